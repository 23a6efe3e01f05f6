// SPDX-License-Identifier: GPL-2.0
//
// Ballooned 4 KiB pages per host huge page. When guest RAM is backed by 2 MiB pages (THP or
// hugetlbfs), discarding one 4 KiB page splits the huge page (THP) or cannot be done at all
// (hugetlbfs), so the host waits until every 4 KiB page of a huge page is in the balloon and
// then discards the whole huge page at once: what QEMU's and cloud-hypervisor's
// "partially ballooned page" bitmaps do, but kept for all huge pages at once, across requests.
#ifndef VBSIM_BALLOON_HUGE_PAGE_TRACKER_H
#define VBSIM_BALLOON_HUGE_PAGE_TRACKER_H

#include <cstdint>
#include <vector>

#include "balloon/page_runs.h"

namespace vbsim
{

class HugePageTracker
{
public:
	// `wire_pages_per_huge_page` wire pages (4 KiB) make one host page (512 for 2 MiB).
	HugePageTracker(uint64_t ram_wire_pages, uint32_t wire_pages_per_huge_page);

	uint32_t wire_pages_per_huge_page() const { return wire_pages_per_huge_page_; }
	// A page entered the balloon. Appends to `completed` the run of the huge page it filled,
	// if it was the last one missing.
	void ballooned(uint64_t pfn, std::vector<PfnRun>& completed);
	// A page left the balloon.
	void released(uint64_t pfn);
	// Whether every 4 KiB page of the huge page holding `pfn` is ballooned.
	bool complete(uint64_t pfn) const;
	void clear();

private:
	uint32_t wire_pages_per_huge_page_;
	std::vector<uint16_t> ballooned_;
};

} // namespace vbsim

#endif
