// SPDX-License-Identifier: GPL-2.0
#include "balloon/page_discarder.h"

#include <algorithm>

#include "memory/guest_memory.h"
#include "vballoon/support/mutant.h"

namespace vbsim
{

bool PageDiscarder::discard(std::vector<uint64_t>& pfns)
{
	if (inhibited() && !VB_MUTANT(DEV_DI05_INHIBITED_DISCARDS_DONE)) {
		counters_.discards_inhibited.fetch_add(1, std::memory_order_relaxed);
		return false;
	}
	bool all_done = true;
	if (mode_ == DiscardMode::kPerPage) {
		for (const uint64_t pfn : pfns)
			all_done &= discard_run(pfn, 1);
		return all_done;
	}
	merge_into_runs(pfns, runs_);
	for (const PfnRun& run : runs_)
		all_done &= discard_run(run.first_pfn, run.wire_pages);
	return all_done;
}

bool PageDiscarder::discard_runs(std::vector<PfnRun>& runs)
{
	if (inhibited() && !VB_MUTANT(DEV_DI05_INHIBITED_DISCARDS_DONE)) {
		counters_.discards_inhibited.fetch_add(1, std::memory_order_relaxed);
		return false;
	}
	bool all_done = true;
	if (mode_ == DiscardMode::kPerPage) {
		for (const PfnRun& run : runs) {
			for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.wire_pages;
			     pfn++)
				all_done &= discard_run(pfn, 1);
		}
		return all_done;
	}
	std::sort(runs.begin(), runs.end(),
		  [](const PfnRun& a, const PfnRun& b) { return a.first_pfn < b.first_pfn; });
	size_t i = 0;
	while (i < runs.size()) {
		uint64_t first = runs[i].first_pfn;
		uint64_t end = first + runs[i].wire_pages;
		// Join runs that touch or overlap (the same page twice is discarded once).
		while (++i < runs.size() && runs[i].first_pfn <= end)
			end = std::max(end, runs[i].first_pfn + runs[i].wire_pages);
		all_done &= discard_run(first, end - first);
	}
	return all_done;
}

bool PageDiscarder::discard_run(uint64_t first_pfn, uint64_t page_count)
{
	if (VB_MUTANT(DEV_OP02_INFLATED_PAGES_KEPT))
		return true;
	counters_.discard_calls.fetch_add(1, std::memory_order_relaxed);
	if (memory_.discard(first_pfn * GuestMemory::kWirePageBytes,
			    page_count * GuestMemory::kWirePageBytes) != 0) {
		// The pages stay resident; the guest still gave them up, so the ack still goes out.
		counters_.discard_failures.fetch_add(1, std::memory_order_relaxed);
		return false;
	}
	counters_.wire_pages_discarded.fetch_add(page_count, std::memory_order_relaxed);
	return true;
}

} // namespace vbsim
