// SPDX-License-Identifier: GPL-2.0
//
// Turns runs of guest pages into the wire's PFN arrays: 4 KiB units, at most a message's
// capacity at a time, never splitting one guest page across two messages.
#ifndef VBALLOON_CORE_PFN_PACKER_H
#define VBALLOON_CORE_PFN_PACKER_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/os_interface.h"

namespace vb {

class PfnPacker {
public:
	PfnPacker(const PageRun* runs, size_t run_count, unsigned page_shift);

	// Writes up to `capacity` PFNs into `out` and returns how many; 0 once everything has
	// been packed.
	uint32_t pack(uint32_t* out, uint32_t capacity);
	bool done() const { return run_index_ == run_count_; }
	// More runs were appended to the array (those packed so far stay as they were).
	void extend(size_t run_count) { run_count_ = run_count; }

private:
	const PageRun* runs_;
	size_t run_count_;
	size_t run_index_ = 0;
	uint64_t offset_in_run_ = 0;
	uint32_t pfns_per_page_;
};

// The 4 KiB PFNs of a guest page must fit the wire's 32 bits (16 TiB of guest memory).
inline bool run_fits_wire_pfns(PageRun run, unsigned page_shift)
{
	uint64_t last_wire_pfn = ((run.first_pfn + run.count) << (page_shift - VB_PFN_SHIFT)) - 1;
	return run.count != 0 && last_wire_pfn <= VB_PFN_MAX;
}

} // namespace vb

#endif
