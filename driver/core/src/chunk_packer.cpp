// SPDX-License-Identifier: GPL-2.0
#include "vballoon/core/chunk_packer.h"

#include "vballoon/support/freestanding.h"
#include "vballoon/support/mutant.h"

namespace vb {

ChunkPacker::ChunkPacker(const PageRun* runs, size_t run_count, unsigned page_shift, RunCursor from)
    : runs_(runs), run_count_(run_count), at_(from), page_shift_(page_shift),
      max_pages_per_chunk_(kMaxChunkBytes >> page_shift)
{
}

uint32_t ChunkPacker::pack(Segment* out, uint32_t capacity)
{
	uint32_t written = 0;

	while (!done() && written < capacity) {
		uint64_t pages = min(at_.left_in_run(runs_), max_pages_per_chunk_);

		out[written].phys_addr = (runs_[at_.run].first_pfn + at_.offset) << page_shift_;
		if (VB_MUTANT(XCH_DRV_RANGE_NOT_WHOLE_PAGES))
			out[written].phys_addr += 2048;
		out[written].len = static_cast<uint32_t>(pages << page_shift_);
		written++;
		at_.advance(runs_, pages);
	}
	return written;
}

} // namespace vb
