// SPDX-License-Identifier: GPL-2.0
#include "vballoon/core/pfn_packer.h"

namespace vb {

PfnPacker::PfnPacker(const PageRun* runs, size_t run_count, unsigned page_shift)
	: runs_(runs), run_count_(run_count), pfns_per_page_(1u << (page_shift - VB_PFN_SHIFT))
{
}

uint32_t PfnPacker::pack(uint32_t* out, uint32_t capacity)
{
	uint32_t written = 0;

	while (run_index_ < run_count_ && written + pfns_per_page_ <= capacity) {
		const PageRun& run = runs_[run_index_];
		uint64_t wire_pfn = (run.first_pfn + offset_in_run_) * pfns_per_page_;

		for (uint32_t i = 0; i < pfns_per_page_; i++)
			out[written++] = static_cast<uint32_t>(wire_pfn + i);
		if (++offset_in_run_ == run.count) {
			offset_in_run_ = 0;
			run_index_++;
		}
	}
	return written;
}

} // namespace vb
