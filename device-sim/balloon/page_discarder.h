// SPDX-License-Identifier: GPL-2.0
//
// How the host gives up the memory behind ballooned pages: madvise(MADV_DONTNEED) on the
// anonymous guest RAM mapping, in one of two ways whose cost differs by orders of
// magnitude (bench/inflate measures it):
//  - kMergeRuns: sort, de-duplicate and merge the request's PFNs, one call per run
//    (Firecracker's way);
//  - kPerPage: one call per 4 KiB PFN in the order received (QEMU's and cloud-hypervisor's
//    way for 4 KiB backing).
// Runs are merged within one request (one chain), never across requests, so the number
// of calls depends only on what the driver sent, not on how kicks were batched.
#ifndef VBSIM_BALLOON_PAGE_DISCARDER_H
#define VBSIM_BALLOON_PAGE_DISCARDER_H

#include <atomic>
#include <cstdint>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "balloon/page_runs.h"

namespace vbsim
{

class GuestMemory;

enum class DiscardMode : uint8_t { kMergeRuns, kPerPage };

class PageDiscarder
{
public:
	PageDiscarder(GuestMemory& memory, DiscardMode mode, BalloonDeviceCounters& counters)
	    : memory_(memory), mode_(mode), counters_(counters)
	{
	}

	DiscardMode mode() const { return mode_; }
	// While inhibited (any thread) nothing is discarded and discard()/discard_runs()
	// return false: the pages keep their contents, so no initialisation may be promised.
	void set_inhibited(bool inhibited) { inhibited_.store(inhibited); }
	bool inhibited() const { return inhibited_.load(); }

	// Discards every page in `pfns` (all inside RAM; the caller checked). May reorder
	// and de-duplicate `pfns`. False when a madvise call failed.
	bool discard(std::vector<uint64_t>& pfns);
	// The same for runs of pages (chunks, whole huge pages): per page in kPerPage mode,
	// else one call per maximal run after sorting and joining adjacent runs. May reorder
	// `runs`.
	bool discard_runs(std::vector<PfnRun>& runs);

private:
	bool discard_run(uint64_t first_pfn, uint64_t page_count);

	GuestMemory& memory_;
	const DiscardMode mode_;
	BalloonDeviceCounters& counters_;
	std::vector<PfnRun> runs_;
	std::atomic<bool> inhibited_{false};
};

} // namespace vbsim

#endif
