// SPDX-License-Identifier: GPL-2.0
//
// Deflate: take pages off the balloon, tell the host, then give them back to the guest;
// also for the OOM notifier (deflate_for_oom()).
#ifndef VBALLOON_CORE_PAGE_BALLOON_DEFLATE_H
#define VBALLOON_CORE_PAGE_BALLOON_DEFLATE_H

#include "vballoon/core/page_balloon.h"

namespace vb {

// Allocates nothing, so the OOM path may use it.
template <BalloonOs Os> typename PageBalloon<Os>::DeflateResult PageBalloon<Os>::deflate(uint64_t wanted_wire_pages)
{
	os_.lock();
	const uint64_t before = balloon_wire_pages_.get();
	const uint64_t wanted_pages = wanted_wire_pages / wire_pages_per_page_;
	// Pages the host did not acknowledge last time are asked for again first.
	size_t run_count = os_.balloon_held_take(deflate_runs_, kRunsPerStep, wanted_pages);
	uint64_t taken = 0;
	for (size_t i = 0; i < run_count; i++)
		taken += deflate_runs_[i].count;
	if (taken < wanted_pages && run_count < kRunsPerStep)
		run_count += os_.balloon_list_take(deflate_runs_ + run_count, kRunsPerStep - run_count,
						   wanted_pages - taken);
	if (!run_count) {
		os_.unlock();
		return {0, false};
	}
	uint64_t taken_pages = 0;
	for (size_t i = 0; i < run_count; i++)
		taken_pages += deflate_runs_[i].count;

	// Tell the host first, then free the pages. With MUST_TELL_HOST the host owns them
	// until it acknowledges the deflate, and even without it the spec wants the pages
	// reported before use: each run goes back to the guest only once acknowledged.
	if (VB_MUTANT(OP09_DEFLATE_WITHOUT_TELLING_HOST)) {
		for (size_t i = 0; i < run_count; i++)
			give_back(deflate_runs_[i]);
		run_count = 0;
	}
	HostReply reply = messenger_.tell_host(QueueKind::kDeflate, deflate_runs_, run_count,
					       [this](PageRun run) { give_back(run); });
	// Refused or lost: the host still holds these (or may), so they stay in the balloon,
	// still counted, until a later deflate is acknowledged or the device is reset. Held
	// apart, never put back on the balloon list (os_interface.h, balloon_hold()).
	uint64_t held_pages = 0;
	reply.for_each_unacknowledged(deflate_runs_, [&](PageRun run, MessageOutcome) {
		os_.balloon_hold(run);
		held_pages += run.count;
	});
	update_actual_locked();
	const uint64_t freed = before - balloon_wire_pages_.get();
	// Every page taken off the lists went back to the guest or is held, once.
	VB_INVARIANT(freed == (taken_pages - held_pages) * wire_pages_per_page_);
	os_.unlock();
	return {freed, !reply.all_acknowledged()};
}

// Pages the host let go of (or that a reset took from it): back to the guest.
template <BalloonOs Os> void PageBalloon<Os>::give_back(PageRun run)
{
	if (!negotiated(VB_F_DEFLATE_ON_OOM))
		os_.adjust_managed_pages(run, true);
	os_.free_page_run(run);
	balloon_wire_pages_.sub(run.count * wire_pages_per_page_);
	counters_.wire_pages_deflated.add(run.count * wire_pages_per_page_);
}

// Deflate-on-OOM: the guest is out of memory and the device allowed us to give some back.
// Frees at most kOomDeflateWirePages and returns the wire pages freed, as deflate() does (the
// OS converts them to its own pages for the OOM notifier's count). Allocates nothing: this
// runs when the guest has no memory to give.
template <BalloonOs Os> uint64_t PageBalloon<Os>::deflate_for_oom()
{
	if (!negotiated(VB_F_DEFLATE_ON_OOM) && !VB_MUTANT(OP07_OOM_DEFLATE_WITHOUT_DOO))
		return 0;
	counters_.oom_calls.add(1);
	uint64_t freed_wire_pages = deflate(kOomDeflateWirePages).freed_wire_pages;
	counters_.oom_wire_pages_freed.add(freed_wire_pages);
	if (governor_.enabled() && freed_wire_pages) {
		// What FreeBSD's deflate-on-OOM fix does: the inflate must not take these straight
		// back; it waits for the governor's hold.
		os_.lock();
		governor_.note_oom_deflate();
		os_.unlock();
	}
	return freed_wire_pages;
}

} // namespace vb

#endif
