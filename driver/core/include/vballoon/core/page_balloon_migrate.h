// SPDX-License-Identifier: GPL-2.0
//
// Compaction moved a ballooned page: the new page joins the balloon, the old one leaves.
#ifndef VBALLOON_CORE_PAGE_BALLOON_MIGRATE_H
#define VBALLOON_CORE_PAGE_BALLOON_MIGRATE_H

#include "vballoon/core/page_balloon.h"

namespace vb {

// Returns false, having changed nothing, when the balloon is busy (compaction retries
// later rather than wait behind an inflate that may itself be waiting for memory, or that
// has messages in flight between two batches) or when
// the host did not acknowledge the move (compaction puts the old page back).
template <BalloonOs Os> bool PageBalloon<Os>::migrate_page(uint64_t old_pfn, uint64_t new_pfn)
{
	// A page a 32-bit PFN cannot name could never be told to the host: stay where we are.
	if (!run_fits_wire_pfns({new_pfn, 1}, traits_.page_shift))
		return false;
	if (!os_.try_lock())
		return false;
	// An inflate between two batches owns inflateq: its acknowledgements are not ours.
	if (messenger_.pipeline_holds_inflateq()) {
		os_.unlock();
		return false;
	}

	PageRun new_page = {new_pfn, 1};
	PageRun old_page = {old_pfn, 1};
	// Inflate the new page before deflating the old, so the host never sees the balloon
	// shrink. The list changes only once both are acknowledged: a failure leaves it as it
	// was, which is what compaction expects when it puts the old page back. (The device's
	// initialised bit for the new page is not recorded, as the page is not on the list
	// yet; the guest then initialises it itself if it ever needs to.)
	bool inflated = false;
	(void)messenger_.tell_host(QueueKind::kInflate, &new_page, 1, [&](PageRun) { inflated = true; },
				   InitialisedBits::kIgnore);
	if (!inflated) {
		// Never sent: the host does not know the new page. Lost: the device is gone,
		// and after its reset the host holds nothing. Either way the old page stays.
		os_.unlock();
		return false;
	}
	bool deflated = VB_MUTANT(OP09_MIGRATION_OLD_PAGE_NOT_DEFLATED);
	if (!deflated)
		(void)messenger_.tell_host(QueueKind::kDeflate, &old_page, 1,
					   [&](PageRun) { deflated = true; });
	if (!deflated) {
		// The host still holds the old page, which stays in the balloon. It also
		// holds the new one, which compaction now frees: the deflateq has just failed,
		// so only a reset of the device can settle that. Say so.
		if (migration_log_.allow())
			log_to(os_, LogLevel::kError,
			       "migration of page %#llx failed; the host holds page %#llx "
			       "until the device is reset (%llu times)\n",
			       static_cast<unsigned long long>(old_pfn),
			       static_cast<unsigned long long>(new_pfn),
			       static_cast<unsigned long long>(migration_log_.occurrences()));
		os_.unlock();
		return false;
	}
	os_.balloon_list_replace(old_pfn, new_pfn);
	// The pages may sit in different zones, so the managed count moves with them.
	if (!negotiated(VB_F_DEFLATE_ON_OOM)) {
		os_.adjust_managed_pages(old_page, true);
		os_.adjust_managed_pages(new_page, false);
	}
	counters_.migrations.add(1);
	os_.unlock();
	return true;
}

} // namespace vb

#endif
