// SPDX-License-Identifier: GPL-2.0
//
// Memory pressure in the simulated guest: a page cache and a workload, enough to show what
// an inflate does to a guest squeezed below its working set (issue 30).
//
// - Anonymous pages: allocated once, never evicted (no swap).
// - Page cache: file pages allocated from the buddy allocator on one LRU list. The cold
//   cache (read once at boot) is oldest; the workload's file pages move to the head each
//   time it touches them, and are marked referenced (the accessed bit of a mapped page).
// - Reclaim: an allocation that finds free memory at the min watermark runs one direct
//   reclaim pass (an allocation stall) that evicts up to 32 pages from the LRU's tail
//   (Linux's SWAP_CLUSTER_MAX), cold first. A referenced page at the tail is scanned and
//   kept: its mark is cleared and it goes back to the head (Linux activates a referenced
//   mapped page). So reclaim of cold cache frees what it scans, and reclaim that has only
//   the working set left scans all of it to free 32 (pgscan against pgsteal). The
//   balloon's Reclaim::kLight allocation runs one pass and gives up (__GFP_NORETRY); the
//   workload's own allocation tries until nothing is left to evict, then runs the OOM
//   notifier.
// - Each simulated second (tick()) the workload touches its whole working set. A file page
//   evicted since is read back: a refault and a major fault, which costs `refault_cost`
//   page touches of work and takes a page again (which may reclaim in turn). A cyclic scan
//   over an LRU smaller than it misses on every page, so a small deficit is a collapse,
//   as thrashing is.
// - Throughput per tick: the work done (touches minus refault cost, at least 0) over the
//   touches, in permille.
// pressure_sample() reports the counters, free pages, available = free + page cache
// (all of it is clean and reclaimable), the page cache on the LRU, the working set's
// resident file pages as mapped when the workload maps its file (mapped_file), and the
// model's clock (1000 ms per tick).
#ifndef VBSIM_GUEST_PRESSURE_MODEL_H
#define VBSIM_GUEST_PRESSURE_MODEL_H

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <vector>

#include "buddy_allocator.h"
#include "vballoon/core/os_interface.h"

namespace vbsim
{

struct WorkloadOptions {
	uint64_t anon_pages = 0;       // touched every tick, never evicted
	uint64_t file_pages = 0;       // the working set's page cache, touched every tick
	uint64_t cold_cache_pages = 0; // page cache read once at boot and never again
	uint64_t refault_cost = 20;    // one refault costs this many page touches of work
	bool mapped_file = false;      // the working set's file pages are mapped (Mapped)
};

struct WorkloadTick {
	uint64_t touched = 0;
	uint64_t refaults = 0;
	uint64_t alloc_stalls = 0;
	uint64_t throughput_permille = 1000;
	bool oom = false; // a page could not be read back at all
};

class PressureModel
{
public:
	// Called for every page the model allocates (the guest checks it against the host's
	// ownership) and, when the workload finds nothing left to evict, the OOM notifier
	// (returns the pages it freed).
	using PageAllocated = std::function<void(uint64_t pfn)>;
	using OomNotifier = std::function<uint64_t()>;

	PressureModel(BuddyAllocator& allocator, uint64_t min_free_pages, PageAllocated allocated,
		      OomNotifier oom);

	// Boot: the anonymous pages, the cold cache, then the working set's file pages. False
	// when RAM is too small for them.
	bool start(const WorkloadOptions& options);
	// One simulated second of the workload.
	WorkloadTick tick();
	// For an allocation of 2^order pages with Reclaim::kLight: one direct reclaim pass when
	// free memory is at the min watermark. True when the allocation may go ahead.
	bool reclaim_for(unsigned order);
	void sample(vb::PressureSample* sample);

	uint64_t cache_pages() const;
	uint64_t resident_file_pages() const; // of the working set
	uint64_t now_ms() const;

private:
	static constexpr uint64_t kReclaimBatch = 32; // SWAP_CLUSTER_MAX
	static constexpr uint64_t kNotResident = ~uint64_t{0};

	bool low_locked(unsigned order) const;
	// One direct reclaim pass: evicts up to kReclaimBatch pages; returns how many.
	uint64_t reclaim_pass_locked();
	bool allocate_cache_page_locked(uint32_t id, bool workload);

	BuddyAllocator& allocator_;
	const uint64_t min_free_pages_;
	PageAllocated allocated_;
	OomNotifier oom_;
	WorkloadOptions options_;

	mutable std::mutex mutex_;
	std::list<uint32_t> lru_; // page cache ids, most recently used first
	std::vector<std::list<uint32_t>::iterator> lru_pos_;
	std::vector<bool> referenced_; // by id: touched since reclaim last scanned it
	std::vector<uint64_t> pfn_of_; // by id: working set file pages first, then cold cache
	std::vector<uint64_t> anon_;
	uint64_t now_ms_ = 0;
	uint64_t alloc_stalls_ = 0;
	uint64_t direct_scans_ = 0;
	uint64_t reclaim_stolen_ = 0;
	uint64_t refaults_ = 0;
	uint64_t major_faults_ = 0;
	uint64_t oom_kills_ = 0;
	uint64_t resident_file_ = 0;
};

} // namespace vbsim

#endif
