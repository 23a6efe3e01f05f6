// SPDX-License-Identifier: GPL-2.0
//
// Deflate: take pages off the balloon, tell the host, then give them back to the guest.
#ifndef VBALLOON_CORE_BALLOON_DEFLATE_H
#define VBALLOON_CORE_BALLOON_DEFLATE_H

#include "vballoon/core/balloon.h"

namespace vb {

// Returns the 4 KiB units given back. Allocates nothing, so the OOM path may use it.
template <BalloonOs Os> uint64_t Balloon<Os>::deflate(uint64_t wanted_pfns)
{
	uint64_t pages = 0;

	os_.lock();
	size_t run_count = os_.balloon_list_take(deflate_runs_, kRunsPerStep, wanted_pfns / pfns_per_page_);
	for (size_t i = 0; i < run_count; i++)
		pages += deflate_runs_[i].count;
	if (!pages) {
		os_.unlock();
		return 0;
	}

	// Tell the host first, then free the pages. With MUST_TELL_HOST the host owns them
	// until it acknowledges the deflate, and even without it the spec wants the pages
	// reported before use. tell_host() returns only once every message is acknowledged.
	if (!VB_MUTANT(OP09_DEFLATE_WITHOUT_TELLING_HOST))
		tell_host(QueueKind::kDeflate, deflate_runs_, run_count);
	for (size_t i = 0; i < run_count; i++) {
		if (!negotiated(VB_F_DEFLATE_ON_OOM))
			os_.adjust_managed_pages(deflate_runs_[i], true);
		os_.free_page_run(deflate_runs_[i]);
	}

	balloon_pfns_.sub(pages * pfns_per_page_);
	counters_.pages_deflated.add(pages * pfns_per_page_);
	os_.unlock();
	update_actual();
	return pages * pfns_per_page_;
}

} // namespace vb

#endif
