// SPDX-License-Identifier: GPL-2.0
#include "vballoon/core/chunk_packer.h"

#include "vballoon/support/freestanding.h"
#include "vballoon/support/mutant.h"

namespace vb {

ChunkPacker::ChunkPacker(const PageRun* runs, size_t run_count, unsigned page_shift)
	: runs_(runs), run_count_(run_count), page_shift_(page_shift),
	  max_pages_per_chunk_(kMaxChunkBytes >> page_shift)
{
}

uint32_t ChunkPacker::pack(Segment* out, uint32_t capacity)
{
	uint32_t written = 0;

	while (run_index_ < run_count_ && written < capacity) {
		const PageRun& run = runs_[run_index_];
		uint64_t pages = min(run.count - offset_in_run_, max_pages_per_chunk_);

		out[written].phys_addr = (run.first_pfn + offset_in_run_) << page_shift_;
		if (VB_MUTANT(XCH_DRV_RANGE_NOT_WHOLE_PAGES))
			out[written].phys_addr += 2048;
		out[written].len = static_cast<uint32_t>(pages << page_shift_);
		written++;
		offset_in_run_ += pages;
		if (offset_in_run_ == run.count) {
			offset_in_run_ = 0;
			run_index_++;
		}
	}
	return written;
}

} // namespace vb
