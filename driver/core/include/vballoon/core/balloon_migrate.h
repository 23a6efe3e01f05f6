// SPDX-License-Identifier: GPL-2.0
//
// Compaction moved a ballooned page: the new page joins the balloon, the old one leaves.
#ifndef VBALLOON_CORE_BALLOON_MIGRATE_H
#define VBALLOON_CORE_BALLOON_MIGRATE_H

#include "vballoon/core/balloon.h"

namespace vb {

// Returns false, having changed nothing, when the balloon is busy: compaction retries later
// rather than wait behind an inflate that may itself be waiting for memory.
template <BalloonOs Os> bool Balloon<Os>::migrate_page(uint64_t old_pfn, uint64_t new_pfn)
{
	// A page a 32-bit PFN cannot name could never be told to the host: stay where we are.
	if (!run_fits_wire_pfns({new_pfn, 1}, traits_.page_shift))
		return false;
	if (!os_.try_lock())
		return false;

	// Inflate the new page before deflating the old, so the host never sees the balloon
	// shrink; the old page is the OS's to free once this returns.
	os_.balloon_list_replace(old_pfn, new_pfn);
	PageRun new_page = {new_pfn, 1};
	PageRun old_page = {old_pfn, 1};
	// The pages may sit in different zones, so the managed count moves with them.
	if (!negotiated(VB_F_DEFLATE_ON_OOM)) {
		os_.adjust_managed_pages(old_page, true);
		os_.adjust_managed_pages(new_page, false);
	}
	tell_host(QueueKind::kInflate, &new_page, 1);
	if (!VB_MUTANT(OP09_MIGRATION_OLD_PAGE_NOT_DEFLATED))
		tell_host(QueueKind::kDeflate, &old_page, 1);
	counters_.migrations.add(1);
	os_.unlock();
	return true;
}

} // namespace vb

#endif
