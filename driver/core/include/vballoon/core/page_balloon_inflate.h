// SPDX-License-Identifier: GPL-2.0
//
// Inflate: take free guest memory, largest blocks first, and hand it to the host.
#ifndef VBALLOON_CORE_PAGE_BALLOON_INFLATE_H
#define VBALLOON_CORE_PAGE_BALLOON_INFLATE_H

#include "vballoon/core/page_balloon.h"
#include "vballoon/core/rules/messenger_rules.h"

namespace vb {

// One step, as a pipeline: the guest allocates a batch, puts its messages on the ring and
// kicks, and allocates the next batch while the host discards the ones before; whenever it
// comes back for the lock it puts the pages of the messages the host has returned
// meanwhile on the balloon list (exchange()). Once a batch waits for a free message slot
// it waits for the host instead, without the lock.
//
// The lock is held only to send, collect acknowledgements and keep the books, never while
// allocating (as in Linux: the OOM notifier must not wait behind an allocator that is
// looking for memory) nor while waiting for the host. In between, messages are in flight;
// what may run then, and why nothing is lost (docs/design.md, "Pipelined inflate"):
// - a deflate from the OOM notifier: it sends on deflateq, takes only pages already on
//   the balloon list (acknowledged ones), and uses message slots the inflate does not
//   hold (the messenger gives a pipeline at most kPipelineSlotMask, four of the five, so
//   one is free);
// - migration: refused while the inflate owns inflateq (pipeline_holds_inflateq()), as when
//   the lock is busy; compaction tries again later;
// - hinting and reporting use their own queues and never this lock.
// A page joins the balloon list and `actual` only once its message is acknowledged; never
// sent pages go back to the guest, lost ones stay until a reset (host_reply.h).
template <BalloonOs Os> StepResult PageBalloon<Os>::inflate(uint64_t wanted_wire_pages)
{
	InflateStep step = {messenger_.open_pipeline(QueueKind::kInflate, inflate_runs_),
			    wanted_wire_pages / wire_pages_per_page_, guest_initialises_inflated(),
			    rules::inflated_pages_wait_for_ack(), governor_.enabled()};

	for (;;) {
		if (allocate_batch(step)) {
			exchange(step);
			continue;
		}
		if (!step.box.in_flight() || !step.awaits_acks)
			break;
		// Everything allocated is on the ring or waits for room on it: wait for the
		// host, without the lock.
		messenger_.wait(step.box);
		exchange(step);
	}

	const bool all_acknowledged = !step.allocated || close_inflate(step);
	for (size_t i = 0; i < step.unreachable.count; i++)
		os_.free_page_run(step.unreachable.blocks[i]);
	if (step.short_of_pages)
		counters_.alloc_failures.add(1);
	// Out of pages, or the host did not take what it was sent: retry later rather than
	// spin on a queue that refuses.
	if (step.short_of_pages || !all_acknowledged)
		return StepResult::kStalled;
	if (step.held) {
		// Not met and not retried on a timer: the governor's tick says when to go on.
		// `actual` stays below num_pages meanwhile (supplying pages is a SHOULD).
		os_.lock();
		governor_.note_held();
		os_.unlock();
		counters_.pressure_held_steps.add(1);
		counters_.pressure_refused_wire_pages.add((step.wanted_pages - step.allocated) *
							  wire_pages_per_page_);
		return StepResult::kHeld;
	}
	return StepResult::kMoreWork;
}

// The guest initialises the pages it inflates (GuestTraits::initialise_before_inflate),
// before they go out, unless the device promises to (bit 7 or 21).
template <BalloonOs Os> bool PageBalloon<Os>::guest_initialises_inflated() const
{
	return traits_.initialise_before_inflate && !negotiated(VB_F_X_INIT_ON_INFLATE) &&
	       !negotiated(VB_F_DEVICE_INIT_ON_INFLATE) && rules::inflating_pages_untouched();
}

// Without the lock: the next batch, once everything allocated so far is on the ring, at
// most batch_pages() and never beyond what the target still wants. Returns whether it
// allocated any pages; the step allocates no more once the allocator runs short, the
// target is reached or a batch comes back empty.
template <BalloonOs Os> bool PageBalloon<Os>::allocate_batch(InflateStep& step)
{
	if (!step.allocating || step.allocated >= step.wanted_pages ||
	    step.run_count >= kRunsPerStep || !step.box.all_sent())
		return false;
	uint64_t batch = min(batch_pages(step.batches++), step.wanted_pages - step.allocated);
	if (step.allocated) { // the host may lower the target while a step runs
		batch = min(batch, pages_below_target(step.allocated - step.acknowledged_pages));
		step.allocating = batch != 0;
	}
	InflatePlan plan = {batch, 0, true};
	if (batch && step.governed) {
		// The governor's share of it: free pages first, reclaim only while the guest is
		// calm, nothing below the floor.
		const GovernorInput in = pressure_input();
		os_.lock();
		plan = governor_.plan(in);
		os_.unlock();
		if (plan.max_pages < batch) {
			batch = plan.max_pages;
			step.held = true;
			step.allocating = false;
		}
	}
	if (!batch)
		return false;
	const size_t first_run = step.run_count;
	const uint64_t allocated = step.governed
					   ? allocate_governed(step, batch, plan)
					   : allocate_runs(step, first_run, batch, Reclaim::kLight);
	step.allocated += allocated;
	if (step.short_of_pages || !allocated)
		step.allocating = false;
	if (step.guest_initialises) {
		for (size_t i = first_run; i < step.run_count; i++)
			os_.initialise_pages(inflate_runs_[i]);
	}
	return allocated != 0;
}

// A governed batch: free pages above the watermarks without reclaim first, then, only if
// the plan allows it (a calm guest), the rest with light reclaim; short of both, the step
// is held.
template <BalloonOs Os>
uint64_t PageBalloon<Os>::allocate_governed(InflateStep& step, uint64_t batch,
					    const InflatePlan& plan)
{
	const size_t first_run = step.run_count;
	const uint64_t free_part =
		rules::governed_inflate_takes_free_pages_first() ? min(batch, plan.free_pages) : 0;
	const uint64_t free_taken = allocate_runs(step, first_run, free_part, Reclaim::kNone);
	uint64_t reclaimed = 0;
	// Short of free pages: reclaim, or hold; but once the blocks beyond 16 TiB filled up
	// the step stalls, as ungoverned.
	step.short_of_pages = step.unreachable.count == kUnreachableHeld;
	if (step.short_of_pages)
		step.held = false;
	else if (free_taken < batch && plan.reclaim && step.run_count < kRunsPerStep)
		reclaimed = allocate_runs(step, first_run, batch - free_taken, Reclaim::kLight);
	else if (free_taken < batch)
		step.held = true;
	counters_.pressure_reclaim_wire_pages.add(reclaimed * wire_pages_per_page_);
	os_.lock();
	governor_.note_inflated(free_taken, reclaimed);
	os_.unlock();
	if (step.held)
		step.allocating = false;
	return free_taken + reclaimed;
}

// Appends up to `wanted_pages` pages to inflate_runs_ after the step's runs before
// `first_run` (those are already with the host and stay as they are; runs from first_run
// on are this batch's and may grow), trying 2^max_chunk_order_ blocks first and smaller
// ones as the larger run out, and returns how many it added. Single pages reclaim as far as
// `single_page_reclaim` says, blocks never. The allocator is never pushed: a failed order
// is not retried in this call, and running out of order-0 pages (or of room for
// unreachable blocks) leaves the step short of pages.
template <BalloonOs Os>
uint64_t PageBalloon<Os>::allocate_runs(InflateStep& step, size_t first_run, uint64_t wanted_pages,
					Reclaim single_page_reclaim)
{
	size_t& run_count = step.run_count;
	HeldBlocks& unreachable = step.unreachable;
	unsigned order = max_chunk_order_;
	uint64_t allocated = 0;

	// A governed batch calls twice (free pages, then reclaim): the first may have filled
	// the blocks held aside.
	if (unreachable.count == kUnreachableHeld) {
		step.short_of_pages = wanted_pages != 0;
		return 0;
	}
	while (allocated < wanted_pages) {
		uint64_t left = wanted_pages - allocated;
		uint64_t pfn;

		while (order > 0 && (1ull << order) > left)
			order--;
		// Blocks come only from free memory; a single page may reclaim lightly, as
		// Linux's own balloon_page_alloc() does, unless the governor says otherwise.
		const Reclaim reclaim = order == 0 ? single_page_reclaim : Reclaim::kNone;
		if (!os_.alloc_pages(order, PageUse::kBalloon, reclaim, &pfn)) {
			if (order == 0) {
				step.short_of_pages = true;
				break;
			}
			order--;
			continue;
		}
		PageRun block = {pfn, 1ull << order};
		if (!run_fits_wire_pfns(block, traits_.page_shift)) {
			// Held aside until the step ends, so the allocator does not hand the same
			// blocks straight back.
			counters_.unreachable_wire_pages.add(block.count * wire_pages_per_page_);
			unreachable.blocks[unreachable.count++] = block;
			if (unreachable.count == kUnreachableHeld) {
				step.short_of_pages = true;
				break;
			}
			continue;
		}
		PageRun* last = run_count > first_run ? &inflate_runs_[run_count - 1] : nullptr;
		if (last && last->first_pfn + last->count == block.first_pfn) {
			last->count += block.count;
			run_count = fold_last_run(first_run, run_count);
		} else if (last && block.first_pfn + block.count == last->first_pfn) {
			last->first_pfn = block.first_pfn;
			last->count += block.count;
			run_count = fold_last_run(first_run, run_count);
		} else if (run_count < kRunsPerStep) {
			inflate_runs_[run_count++] = block;
		} else {
			// Fragmented memory filled the step's runs; the rest waits for the next step.
			os_.free_page_run(block);
			break;
		}
		allocated += block.count;
	}
	return allocated;
}

// A buddy allocator hands out the two halves of a split block one after the other, and
// the blocks themselves often in falling address order: [a, a+2M), [a+2M, a+4M), then
// [a-4M, a-2M), [a-2M, a). Once the last run has grown into the one before it, the two
// become one, so a batch over contiguous free memory is one run: one chunk descriptor on
// the wire and one discard on the host instead of one per 4 MiB.
template <BalloonOs Os> size_t PageBalloon<Os>::fold_last_run(size_t first_run, size_t run_count)
{
	if (run_count < first_run + 2)
		return run_count;
	PageRun& previous = inflate_runs_[run_count - 2];
	const PageRun& last = inflate_runs_[run_count - 1];
	if (last.first_pfn + last.count == previous.first_pfn) {
		previous.first_pfn = last.first_pfn;
		previous.count += last.count;
		return run_count - 1;
	}
	if (previous.first_pfn + previous.count == last.first_pfn) {
		previous.count += last.count;
		return run_count - 1;
	}
	return run_count;
}

// Pages the `batch_index`th batch of a step allocates before it goes to the host: a
// message's worth of PFNs, or with VB_F_X_CHUNKED kChunkedFirstBatchWirePages doubled with each
// batch up to kChunkedBatchWirePagesMax; never less than the largest block, so batching never
// makes the blocks smaller.
template <BalloonOs Os> uint64_t PageBalloon<Os>::batch_pages(unsigned batch_index) const
{
	uint64_t wire_pages = kWirePagesPerMessage;
	if (messenger_.chunked()) {
		wire_pages = kChunkedFirstBatchWirePages;
		for (unsigned i = 0; i < batch_index && wire_pages < kChunkedBatchWirePagesMax; i++)
			wire_pages *= 2;
		wire_pages = min(wire_pages, kChunkedBatchWirePagesMax);
	}
	return max<uint64_t>(wire_pages / wire_pages_per_page_, 1ull << max_chunk_order_);
}

// Guest pages the target still wants beyond those ballooned and `on_their_way` to the host
// (sent or allocated, not yet acknowledged): the target is read again, the host may have
// lowered it.
template <BalloonOs Os> uint64_t PageBalloon<Os>::pages_below_target(uint64_t on_their_way) const
{
	const uint64_t target = target_wire_pages();
	const uint64_t committed = balloon_wire_pages_.get() + on_their_way * wire_pages_per_page_;
	return target > committed ? (target - committed) / wire_pages_per_page_ : 0;
}

// Under the lock, each time the inflate comes back for it: hand the outbox the runs
// allocated since, put the pages of the messages the host returned on the balloon list
// (first the one wait() brought back), send what fits, stop allocating once nothing more
// will go out (no message fits the ring, the queue refused, the device is gone), and park
// the pipeline before the lock goes again.
template <BalloonOs Os> void PageBalloon<Os>::exchange(InflateStep& step)
{
	// Pages join the balloon list as the host acknowledges them, under the lock: deflate
	// and compaction never see a page the host has not taken.
	auto acknowledged = [this, &step](PageRun run) {
		keep_inflated(run);
		step.acknowledged_pages += run.count;
	};

	os_.lock();
	messenger_.extend(step.box, step.run_count);
	if (step.awaits_acks)
		messenger_.collect_returned(step.box, acknowledged, InitialisedBits::kRecord);
	messenger_.push(step.box, acknowledged);
	if (step.box.blocked())
		step.allocating = false;
	messenger_.park(step.box);
	os_.unlock();
}

// The end of a step that allocated pages: what the host did not acknowledge goes where its
// outcome says, and `actual` is brought up to date. Returns whether the host acknowledged
// every page sent.
template <BalloonOs Os> bool PageBalloon<Os>::close_inflate(InflateStep& step)
{
	os_.lock();
	HostReply reply = messenger_.close_pipeline(step.box);
	uint64_t unacknowledged_pages = 0;
	reply.for_each_unacknowledged(inflate_runs_, [&](PageRun run, MessageOutcome outcome) {
		if (outcome == MessageOutcome::kLost)
			keep_inflated(run); // the host may hold it: not the guest's until a reset
		else
			os_.free_page_run(run); // never sent: still the guest's
		unacknowledged_pages += run.count;
	});
	// Every page allocated went to the balloon or back to the guest, once.
	VB_INVARIANT(step.box.pages() == step.allocated);
	VB_INVARIANT(step.acknowledged_pages + unacknowledged_pages == step.allocated);
	const bool all_acknowledged = reply.all_acknowledged();
	update_actual_locked();
	os_.unlock();
	return all_acknowledged;
}

// Pages the host took (or may have taken): on the balloon list, counted in `actual`.
template <BalloonOs Os> void PageBalloon<Os>::keep_inflated(PageRun run)
{
	os_.balloon_list_insert(run);
	balloon_wire_pages_.add(run.count * wire_pages_per_page_);
	counters_.wire_pages_inflated.add(run.count * wire_pages_per_page_);
	// Without deflate-on-OOM the guest must not count on these pages ever coming back.
	if (!negotiated(VB_F_DEFLATE_ON_OOM))
		os_.adjust_managed_pages(run, false);
}

} // namespace vb

#endif
