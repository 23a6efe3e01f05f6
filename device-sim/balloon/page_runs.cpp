// SPDX-License-Identifier: GPL-2.0
#include "balloon/page_runs.h"

#include <algorithm>

namespace vbsim
{

void merge_into_runs(std::vector<uint64_t>& pfns, std::vector<PfnRun>& runs)
{
	runs.clear();
	std::sort(pfns.begin(), pfns.end());
	pfns.erase(std::unique(pfns.begin(), pfns.end()), pfns.end());
	for (const uint64_t pfn : pfns) {
		if (!runs.empty() && runs.back().first_pfn + runs.back().wire_pages == pfn)
			++runs.back().wire_pages;
		else
			runs.push_back({pfn, 1});
	}
}

} // namespace vbsim
