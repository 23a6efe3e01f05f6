// SPDX-License-Identifier: GPL-2.0
#include "balloon/free_page_report_queue.h"

#include "balloon/free_page_hint_queue.h"
#include "balloon/host_page_ownership.h"
#include "memory/guest_memory.h"
#include "virtqueue/device_queue.h"
#include "vballoon/support/mutant.h"

namespace vbsim
{

namespace
{

bool any_host_owned(const HostPageOwnership& ownership, uint64_t first_pfn, uint64_t count)
{
	for (uint64_t pfn = first_pfn; pfn < first_pfn + count; pfn++)
		if (ownership.owns(pfn))
			return true;
	return false;
}

} // namespace

void FreePageReportQueue::receive(DeviceQueue& queue, const DescriptorChain& chain,
				  bool keep_contents, bool tell_initialised, FreePageEvents* events)
{
	// Reports are device-writable ranges only (what Linux sends); a chain that also asks
	// the device to read is refused whole, untouched.
	if (!chain.readable.empty() || chain.writable.empty()) {
		counters_.reject(BalloonRejection::kReportMalformed);
		queue.push_used(chain.head, 0);
		return;
	}
	counters_.report_requests.fetch_add(1);
	runs_.clear();
	for (const ChainBuffer& range : chain.writable) {
		if (!whole_pages_inside_ram(memory_, range)) {
			counters_.reject(BalloonRejection::kRangeNotWholePages);
			continue;
		}
		const uint64_t first = range.phys_addr / GuestMemory::kWirePageBytes;
		const uint64_t count = range.len / GuestMemory::kWirePageBytes;
		// A free page cannot be in the balloon: a driver that says so is confused, and
		// the balloon's pages are none of reporting's business.
		if (any_host_owned(ownership_, first, count)) {
			counters_.reject(BalloonRejection::kReportedBalloonPage);
			continue;
		}
		runs_.push_back({first, count});
	}
	uint64_t pages = 0;
	for (const PfnRun& run : runs_)
		pages += run.wire_pages;
	// DEVICE_INIT_REPORTED: the used length is the bytes the device discarded (so now read
	// zero); an element whose pages were kept, or whose discard failed, says 0.
	uint64_t initialised_bytes = 0;
	if (keep_contents && !VB_MUTANT(DEV_FPR02_POISONED_REPORTS_DISCARDED)) {
		counters_.wire_pages_reported_kept.fetch_add(pages);
		if (VB_MUTANT(DEV_DI07_KEPT_REPORT_CLAIMED_INITIALISED))
			initialised_bytes = pages * GuestMemory::kWirePageBytes;
	} else if (discarder_.inhibited() && !VB_MUTANT(DEV_DI05_INHIBITED_DISCARDS_DONE)) {
		// Discards inhibited: the whole element is skipped, as QEMU does.
		counters_.wire_pages_reported_kept.fetch_add(pages);
		counters_.discards_inhibited.fetch_add(1);
	} else {
		std::vector<PfnRun> discard = runs_; // discard_runs may reorder and join them
		if (discarder_.discard_runs(discard) &&
		    !VB_MUTANT(DEV_DI10_REPORT_USED_LENGTH_ZERO))
			initialised_bytes = pages * GuestMemory::kWirePageBytes;
		else
			counters_.report_discard_failures.fetch_add(1);
		counters_.wire_pages_reported_discarded.fetch_add(pages);
	}
	if (!tell_initialised && !VB_MUTANT(DEV_DI06_USED_LENGTH_WITHOUT_INIT_REPORTED))
		initialised_bytes = 0;
	counters_.wire_pages_reported_device_initialised.fetch_add(initialised_bytes /
								   GuestMemory::kWirePageBytes);
	if (events) {
		for (const PfnRun& run : runs_)
			events->pages_reported(run.first_pfn * GuestMemory::kWirePageBytes,
					       run.wire_pages * GuestMemory::kWirePageBytes);
	}
	// Acknowledged only now: the guest may reuse the pages once it sees this. The used
	// length never exceeds the chain (its writable bytes are at most 2^32 - 1).
	queue.push_used(chain.head, static_cast<uint32_t>(initialised_bytes));
}

} // namespace vbsim
