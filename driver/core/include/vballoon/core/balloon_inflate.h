// SPDX-License-Identifier: GPL-2.0
//
// Inflate: take free guest memory, largest blocks first, and hand it to the host.
#ifndef VBALLOON_CORE_BALLOON_INFLATE_H
#define VBALLOON_CORE_BALLOON_INFLATE_H

#include "vballoon/core/balloon.h"

namespace vb {

// Fills inflate_runs_ with up to `wanted_pages` pages, trying 2^max_chunk_order_ blocks
// first and smaller ones as the larger run out. The allocator is never pushed: a failed
// order is not retried in this step, and running out of order-0 pages ends the step.
template <BalloonOs Os> size_t Balloon<Os>::allocate_runs(uint64_t wanted_pages, bool* short_of_pages)
{
	// Blocks a 32-bit PFN cannot name are held aside until the step ends, so the
	// allocator does not hand the same ones straight back.
	PageRun unreachable[kUnreachableHeld];
	size_t unreachable_count = 0;
	size_t run_count = 0;
	uint64_t allocated = 0;
	unsigned order = max_chunk_order_;

	*short_of_pages = false;
	while (allocated < wanted_pages) {
		uint64_t left = wanted_pages - allocated;
		uint64_t pfn;

		while (order > 0 && (1ull << order) > left)
			order--;
		if (!os_.alloc_pages_no_pressure(order, &pfn)) {
			if (order == 0) {
				*short_of_pages = true;
				break;
			}
			order--;
			continue;
		}
		PageRun block = {pfn, 1ull << order};
		if (!run_fits_wire_pfns(block, traits_.page_shift)) {
			counters_.unreachable_pages.add(block.count * pfns_per_page_);
			unreachable[unreachable_count++] = block;
			if (unreachable_count == kUnreachableHeld) {
				*short_of_pages = true;
				break;
			}
			continue;
		}
		PageRun* last = run_count ? &inflate_runs_[run_count - 1] : nullptr;
		if (last && last->first_pfn + last->count == block.first_pfn) {
			last->count += block.count;
		} else if (last && block.first_pfn + block.count == last->first_pfn) {
			last->first_pfn = block.first_pfn;
			last->count += block.count;
		} else if (run_count < kRunsPerStep) {
			inflate_runs_[run_count++] = block;
		} else {
			// Fragmented memory filled the step's runs; the rest waits for the next step.
			os_.free_page_run(block);
			break;
		}
		allocated += block.count;
	}
	for (size_t i = 0; i < unreachable_count; i++)
		os_.free_page_run(unreachable[i]);
	return run_count;
}

template <BalloonOs Os> StepResult Balloon<Os>::inflate(uint64_t wanted_pfns)
{
	bool short_of_pages;
	// Allocation happens before the lock, as in Linux: the OOM notifier must not wait
	// behind an allocator that is looking for memory.
	size_t run_count = allocate_runs(wanted_pfns / pfns_per_page_, &short_of_pages);
	bool all_acknowledged = true;

	if (run_count) {
		if (traits_.initialise_before_inflate && !negotiated(VB_F_X_INIT_ON_INFLATE)) {
			for (size_t i = 0; i < run_count; i++)
				os_.initialise_pages(inflate_runs_[i]);
		}
		os_.lock();
		// Pages join the balloon list as the host acknowledges them, under the same
		// lock hold: deflate and compaction never see a page the host has not taken.
		HostReply reply = tell_host(QueueKind::kInflate, inflate_runs_, run_count,
					    [this](PageRun run) { keep_inflated(run); });
		reply.for_each_unacknowledged(inflate_runs_, [this](PageRun run, MessageOutcome outcome) {
			if (outcome == MessageOutcome::kLost)
				keep_inflated(run); // the host may hold it: not the guest's until a reset
			else
				os_.free_page_run(run); // never sent: still the guest's
		});
		all_acknowledged = reply.all_acknowledged();
		update_actual_locked();
		os_.unlock();
	}
	if (short_of_pages)
		counters_.alloc_failures.add(1);
	// Out of pages, or the host did not take what it was sent: retry later rather than
	// spin on a queue that refuses.
	if (short_of_pages || !all_acknowledged)
		return StepResult::kStalled;
	return StepResult::kMoreWork;
}

// Pages the host took (or may have taken): on the balloon list, counted in `actual`.
template <BalloonOs Os> void Balloon<Os>::keep_inflated(PageRun run)
{
	os_.balloon_list_insert(run);
	balloon_pfns_.add(run.count * pfns_per_page_);
	counters_.pages_inflated.add(run.count * pfns_per_page_);
	// Without deflate-on-OOM the guest must not count on these pages ever coming back.
	if (!negotiated(VB_F_DEFLATE_ON_OOM))
		os_.adjust_managed_pages(run, false);
}

} // namespace vb

#endif
