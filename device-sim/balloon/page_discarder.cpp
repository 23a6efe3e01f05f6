// SPDX-License-Identifier: GPL-2.0
#include "balloon/page_discarder.h"

#include "memory/guest_memory.h"

namespace vbsim
{

void PageDiscarder::discard(std::vector<uint64_t>& pfns)
{
	if (mode_ == DiscardMode::kPerPage) {
		for (const uint64_t pfn : pfns)
			discard_run(pfn, 1);
		return;
	}
	merge_into_runs(pfns, runs_);
	for (const PfnRun& run : runs_)
		discard_run(run.first_pfn, run.page_count);
}

void PageDiscarder::discard_run(uint64_t first_pfn, uint64_t page_count)
{
	counters_.discard_calls.fetch_add(1, std::memory_order_relaxed);
	if (memory_.discard(first_pfn * GuestMemory::kPageBytes,
			    page_count * GuestMemory::kPageBytes) != 0) {
		// The pages stay resident; the guest still gave them up, so the ack still goes out.
		counters_.discard_failures.fetch_add(1, std::memory_order_relaxed);
		return;
	}
	counters_.pages_discarded.fetch_add(page_count, std::memory_order_relaxed);
}

} // namespace vbsim
