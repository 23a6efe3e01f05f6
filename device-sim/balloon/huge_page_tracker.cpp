// SPDX-License-Identifier: GPL-2.0
#include "balloon/huge_page_tracker.h"

#include <algorithm>
#include <stdexcept>

namespace vbsim
{

HugePageTracker::HugePageTracker(uint64_t ram_wire_pages, uint32_t wire_pages_per_huge_page)
    : wire_pages_per_huge_page_(wire_pages_per_huge_page),
      ballooned_((ram_wire_pages + wire_pages_per_huge_page - 1) / wire_pages_per_huge_page, 0)
{
	if (wire_pages_per_huge_page == 0 || wire_pages_per_huge_page > UINT16_MAX)
		throw std::invalid_argument("huge page tracker: unsupported host page size");
}

void HugePageTracker::ballooned(uint64_t pfn, std::vector<PfnRun>& completed)
{
	uint64_t huge = pfn / wire_pages_per_huge_page_;
	if (++ballooned_[huge] == wire_pages_per_huge_page_)
		completed.push_back({huge * wire_pages_per_huge_page_, wire_pages_per_huge_page_});
}

void HugePageTracker::released(uint64_t pfn)
{
	uint16_t& count = ballooned_[pfn / wire_pages_per_huge_page_];
	if (count)
		count--;
}

bool HugePageTracker::complete(uint64_t pfn) const
{
	return ballooned_[pfn / wire_pages_per_huge_page_] == wire_pages_per_huge_page_;
}

void HugePageTracker::clear()
{
	std::fill(ballooned_.begin(), ballooned_.end(), 0);
}

} // namespace vbsim
