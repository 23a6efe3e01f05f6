// SPDX-License-Identifier: GPL-2.0
//
// Turns runs of guest pages into the wire's PFN arrays: 4 KiB units, at most a message's
// capacity at a time, never splitting one guest page across two messages.
#ifndef VBALLOON_CORE_PFN_PACKER_H
#define VBALLOON_CORE_PFN_PACKER_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/os_interface.h"
#include "vballoon/core/run_cursor.h"

namespace vb {

// Packs runs[0, run_count) from `from` on; position() is where the next message starts.
class PfnPacker {
public:
	PfnPacker(const PageRun* runs, size_t run_count, unsigned page_shift, RunCursor from = {});

	// Writes up to `capacity` PFNs into `out` and returns how many; 0 once everything has
	// been packed.
	uint32_t pack(uint32_t* out, uint32_t capacity);
	bool done() const { return at_.run == run_count_; }
	RunCursor position() const { return at_; }

private:
	const PageRun* runs_;
	size_t run_count_;
	RunCursor at_;
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
