// SPDX-License-Identifier: GPL-2.0
#include "vballoon/core/pfn_packer.h"

namespace vb {

PfnPacker::PfnPacker(const PageRun* runs, size_t run_count, unsigned page_shift, RunCursor from)
    : runs_(runs), run_count_(run_count), at_(from),
      pfns_per_page_(1u << (page_shift - VB_PFN_SHIFT))
{
}

uint32_t PfnPacker::pack(uint32_t* out, uint32_t capacity)
{
	uint32_t written = 0;

	while (!done() && written + pfns_per_page_ <= capacity) {
		uint64_t wire_pfn = (runs_[at_.run].first_pfn + at_.offset) * pfns_per_page_;

		for (uint32_t i = 0; i < pfns_per_page_; i++)
			out[written++] = static_cast<uint32_t>(wire_pfn + i);
		at_.advance(runs_, 1);
	}
	return written;
}

} // namespace vb
