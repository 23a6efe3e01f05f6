// SPDX-License-Identifier: GPL-2.0
//
// The page balloon: what the host asked for (the target) and what it holds (`actual`), on
// inflateq and deflateq through the messenger (messenger.h), plus memory statistics. Its
// paths live beside this file, one per file: page_balloon_inflate.h, page_balloon_deflate.h
// (also the OOM notifier's deflate), page_balloon_migrate.h, page_balloon_stats.h.
//
// Units. A guest page is (1 << GuestTraits::page_shift) bytes and PageRun counts them; a
// wire page is the protocol's 4 KiB unit (num_pages, actual, the PFN arrays). Names say
// which: `*_wire_pages` count wire pages, `*_pages` guest pages. On a 4 KiB-page guest the
// two are the same number; on a 64 KiB-page guest one page is 16 wire pages.
//
// Locking. The balloon lock (Os::lock()) guards the balloon list, the count behind
// `actual` and the messenger. Inflate allocates without it and takes it to send and
// collect, deflate (also from the OOM notifier) holds it throughout, migration only tries
// it. The accounting rule, checked (VB_INVARIANT) wherever `actual` is written: the balloon
// holds exactly the wire pages inflated and not yet deflated, and a page joins it only once
// the host acknowledged (or may have taken) it.
#ifndef VBALLOON_CORE_PAGE_BALLOON_H
#define VBALLOON_CORE_PAGE_BALLOON_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/core_log.h"
#include "vballoon/core/counters.h"
#include "vballoon/core/features.h"
#include "vballoon/core/host_reply.h"
#include "vballoon/core/log_limit.h"
#include "vballoon/core/messenger.h"
#include "vballoon/core/os_interface.h"
#include "vballoon/core/pfn_packer.h"
#include "vballoon/core/pressure_governor.h"
#include "vballoon/core/stats_report.h"
#include "vballoon/support/atomic.h"
#include "vballoon/support/freestanding.h"
#include "vballoon/support/invariant.h"
#include "vballoon/support/mutant.h"

namespace vb {

// What one call to adjust_towards_target() left behind.
enum class [[nodiscard]] StepResult : uint8_t{
	kSettled,  // the balloon is at the target
	kMoreWork, // progress was made; call again
	kStalled,  // the guest has no more pages to give without pressure; retry later
	// The pressure governor (pressure_governor.h) holds the inflate back: the target is not
	// met and the guest cannot spare more now. The OS does not retry on its stall timer;
	// its next pressure_tick() says when to call again.
	kHeld,
};

template <BalloonOs Os> class PageBalloon {
public:
	using Messenger = vb::Messenger<Os>;
	static constexpr uint32_t kWirePagesPerMessage = Messenger::kWirePagesPerMessage;
	static constexpr uint32_t kMessagesInFlight = Messenger::kMessagesInFlight;
	static constexpr uint32_t kWirePagesPerStep = kWirePagesPerMessage * kMessagesInFlight;
	// What one OOM notification may free (Linux's VIRTIO_BALLOON_OOM_NR_PAGES).
	static constexpr uint32_t kOomDeflateWirePages = 256;
	// Balloon memory is allocated in blocks of up to 2 MiB (on 4 KiB pages).
	static constexpr unsigned kLargestChunkOrder = 9;
	// Allocated blocks beyond 16 TiB held aside in one step before it gives up.
	static constexpr size_t kUnreachableHeld = 16;
	// With VB_F_X_CHUNKED: the pages one inflate step may move (16 GiB; when memory is
	// fragmented the run arrays, kRunsPerStep, end it sooner). A step ends with the
	// pipeline drained, the host idle while the guest books the last batch and starts the
	// next, so a step is made large enough that a balloon of a few GiB goes in one. Inflate
	// holds no lock across a step, and reads the target again before every batch. A
	// deflate step holds the lock throughout (the OOM notifier may wait behind it), so it
	// stays 256 MiB.
	static constexpr uint64_t kChunkedStepWirePages = 4194304;
	static constexpr uint64_t kChunkedDeflateStepWirePages = 65536;
	// PageRuns per step: at least one per message's worth of wire pages.
	static constexpr size_t kRunsPerStep = kWirePagesPerStep;
	// Inflate sends a step in batches, each on the ring as soon as it is allocated, so the
	// host discards one batch while the guest allocates the next (page_balloon_inflate.h):
	// a message's worth of wire pages, or with VB_F_X_CHUNKED batches that start at 64 MiB
	// and double up to 2 GiB. The host is the slow side (a discard costs far more than the
	// allocation), so only the first batch must be small to get it started; after that what
	// counts is its fixed cost per request, mostly the interrupt that wakes the waiting
	// guest, and growing batches pay it a few times per balloon instead of once per fixed
	// batch (measured in bench/inflate/README.md, "Growing batches").
	static constexpr uint64_t kChunkedFirstBatchWirePages = 16384;
	static constexpr uint64_t kChunkedBatchWirePagesMax = 524288;

	// The page runs one step works on: most of the balloon's memory, and never read by the
	// device, so the OS keeps them apart from the object (in Linux: the object holds the
	// device-visible buffers in an order-1 kmalloc, the runs may come from vmalloc).
	struct StepRuns {
		PageRun inflate[kRunsPerStep];
		PageRun deflate[kRunsPerStep];
	};

	// `runs` must outlive the balloon.
	PageBalloon(Os& os, uint64_t negotiated_features, const GuestTraits& traits,
		    BalloonCounters& counters, StepRuns& runs)
	    : os_(os), features_(negotiated_features), traits_(traits),
	      wire_pages_per_page_(1u << (traits.page_shift - VB_PFN_SHIFT)),
	      max_chunk_order_(min(kLargestChunkOrder, traits.max_alloc_order)),
	      counters_(counters), messenger_(os, negotiated_features, traits, counters),
	      inflate_runs_(runs.inflate), deflate_runs_(runs.deflate), governor_(traits.page_shift)
	{
	}

	PageBalloon(const PageBalloon&) = delete;
	PageBalloon& operator=(const PageBalloon&) = delete;

	// Before DRIVER_OK: poison_val, and the statsq primed. False when the device cannot
	// take the stats buffer.
	[[nodiscard]] bool prepare();
	// After DRIVER_OK: `actual` as it is, the statsq notified.
	void start();

	StepResult adjust_towards_target();
	uint64_t deflate_for_oom(); // the wire pages freed, as deflate()
	// Before start(): pace the inflate by the guest's memory pressure (pressure_governor.h).
	void set_pressure_policy(const PressurePolicy& policy)
	{
		governor_.set_policy(policy, negotiated(VB_F_DEFLATE_ON_OOM));
	}
	// About once a second (PressureGovernor::kPressureTickMs) while the policy is enabled,
	// no lock held, in a context that may sleep: samples the guest's pressure, gives back
	// when the governor says so (through deflate(), under the balloon lock), and returns
	// true when adjust_towards_target() should run again.
	bool pressure_tick();
	const PressureGovernor& governor() const { return governor_; }
	void handle_stats_request();
	[[nodiscard]] bool migrate_page(uint64_t old_pfn, uint64_t new_pfn);
	void release_all();
	void release_after_reset();

	// The device's wish, rounded up to whole guest pages (in wire pages).
	uint64_t target_wire_pages() const;
	// What the balloon holds, in wire pages (what `actual` reports).
	uint64_t balloon_wire_pages() const { return balloon_wire_pages_.get(); }
	// Largest allocation order tried; 0 reproduces Linux's page-at-a-time inflate.
	void set_max_chunk_order(unsigned order) { max_chunk_order_ = min(order, traits_.max_alloc_order); }

	const Messenger& messenger() const { return messenger_; }

private:
	using Outbox = typename Messenger::Outbox;
	using InitialisedBits = typename Messenger::InitialisedBits;

	// What one deflate step did: the wire pages given back, and whether the host failed
	// to acknowledge some (they stay in the balloon).
	struct [[nodiscard]] DeflateResult {
		uint64_t freed_wire_pages;
		bool stalled;
	};

	bool negotiated(unsigned bit) const { return has_feature(features_, bit); }

	// Inflate (page_balloon_inflate.h).
	StepResult inflate(uint64_t wanted_wire_pages);
	// Blocks a 32-bit PFN cannot name, held aside until the step ends.
	struct HeldBlocks {
		PageRun blocks[kUnreachableHeld];
		size_t count = 0;
	};
	// One inflate step as it goes: its outbox over inflate_runs_, the pages allocated
	// into inflate_runs_[0, run_count) and those the host acknowledged so far.
	struct InflateStep {
		Outbox box;
		uint64_t wanted_pages;
		bool guest_initialises; // the guest writes each page before the host sees it
		bool awaits_acks;	// pages join the balloon as the host acknowledges them
		bool governed;		// the pressure governor plans each batch
		size_t run_count = 0;
		uint64_t allocated = 0;
		uint64_t acknowledged_pages = 0;
		unsigned batches = 0;
		bool allocating = true;
		bool short_of_pages = false;
		bool held = false; // the governor stopped the step short
		HeldBlocks unreachable{};
	};
	bool guest_initialises_inflated() const;
	bool allocate_batch(InflateStep& step);
	uint64_t allocate_governed(InflateStep& step, uint64_t batch, const InflatePlan& plan);
	uint64_t allocate_runs(InflateStep& step, size_t first_run, uint64_t wanted_pages,
			       Reclaim single_page_reclaim);
	// The governor's look at the guest now (samples it; no lock held).
	GovernorInput pressure_input();
	// VB_F_X_PRESSURE's own tags (27-29): what the governor holds back, gave back and
	// leaves the guest.
	void add_pressure_stats(MemoryStats& stats) const;
	size_t fold_last_run(size_t first_run, size_t run_count);
	uint64_t batch_pages(unsigned batch_index) const;
	uint64_t pages_below_target(uint64_t on_their_way) const;
	void exchange(InflateStep& step);
	bool close_inflate(InflateStep& step);
	void keep_inflated(PageRun run);

	// Deflate (page_balloon_deflate.h).
	DeflateResult deflate(uint64_t wanted_wire_pages);
	void give_back(PageRun run);

	uint64_t inflate_step_wire_pages() const
	{
		return messenger_.chunked() ? kChunkedStepWirePages : kWirePagesPerStep;
	}
	uint64_t deflate_step_wire_pages() const
	{
		return messenger_.chunked() ? kChunkedDeflateStepWirePages : kWirePagesPerStep;
	}
	void update_actual_locked();

	Os& os_;
	const uint64_t features_;
	const GuestTraits traits_;
	const uint32_t wire_pages_per_page_;
	unsigned max_chunk_order_;
	BalloonCounters& counters_;
	Messenger messenger_;

	Counter balloon_wire_pages_; // what `actual` reports (balloon lock)

	// Inflate fills its runs before it takes the lock; deflate (also reached from the OOM
	// notifier) only under it. Separate arrays keep the two from ever sharing one. Both
	// hold kRunsPerStep runs, in the OS's StepRuns.
	PageRun* const inflate_runs_;
	PageRun* const deflate_runs_;

	vb_stat_entry stats_[VB_S_NR];
	uint32_t stats_tag_mask_ = 0;
	uint32_t stats_count_ = 0;
	// Error logs a broken device could otherwise flood (balloon lock held).
	LogLimit migration_log_;
	// Balloon lock; its policy is set before start().
	PressureGovernor governor_;
};

template <BalloonOs Os> uint64_t PageBalloon<Os>::target_wire_pages() const
{
	uint64_t wanted = os_.config_read32(VB_CONFIG_NUM_PAGES_OFFSET);

	// Round up to whole guest pages, or a 64 KiB-page guest would inflate and deflate
	// forever around a target that is not a multiple of its page.
	return (wanted + wire_pages_per_page_ - 1) / wire_pages_per_page_ * wire_pages_per_page_;
}

template <BalloonOs Os> bool PageBalloon<Os>::prepare()
{
	// The spec orders it: write poison_val before DRIVER_OK, never change it afterwards.
	if (negotiated(VB_F_PAGE_POISON) && !VB_MUTANT(POISON03_POISON_VAL_AFTER_DRIVER_OK))
		os_.config_write32(VB_CONFIG_POISON_VAL_OFFSET, traits_.free_page_pattern);

	if (negotiated(VB_F_STATS_VQ)) {
		MemoryStats stats{};

		os_.memory_stats(&stats);
		add_pressure_stats(stats);
		stats_tag_mask_ = stats.present_mask & ((1u << VB_S_NR) - 1);
		// Tags past Linux's own only to a device that asked for them: some devices refuse
		// a stats buffer with a tag they do not know.
		if (!negotiated(VB_F_X_PRESSURE) && !VB_MUTANT(PRS12_PRESSURE_TAGS_UNASKED))
			stats_tag_mask_ &= (1u << VB_S_FIRST_PRESSURE_TAG) - 1;
		stats_count_ = VB_MUTANT(STATS05_PRIME_EMPTY_BUFFER) ? 0 : fill_stats_entries(stats_, stats, stats_tag_mask_);
		// Primed with real values: a device may read them before it ever asks.
		Segment out = {os_.phys_addr(stats_), stats_count_ * VB_STAT_ENTRY_BYTES};
		if (!VB_MUTANT(STATS03_NO_PRIMING_BUFFER) && !os_.queue_add(QueueKind::kStats, &out, 1, nullptr, 0, stats_)) {
			log_to(os_, LogLevel::kError, "statsq refused the stats buffer\n");
			return false;
		}
		if (VB_MUTANT(STATS02_TWO_BUFFERS_OUTSTANDING))
			os_.queue_add(QueueKind::kStats, &out, 1, nullptr, 0, stats_);
	}
	return true;
}

template <BalloonOs Os> void PageBalloon<Os>::start()
{
	if (negotiated(VB_F_PAGE_POISON) && VB_MUTANT(POISON03_POISON_VAL_AFTER_DRIVER_OK))
		os_.config_write32(VB_CONFIG_POISON_VAL_OFFSET, traits_.free_page_pattern);
	// A reset does not clear `actual` in every device (QEMU keeps the last value written,
	// e.g. by a remove whose deflates the host refused): say what the balloon holds now.
	os_.lock();
	update_actual_locked();
	os_.unlock();
	if (negotiated(VB_F_STATS_VQ))
		os_.queue_kick(QueueKind::kStats);
}

template <BalloonOs Os> StepResult PageBalloon<Os>::adjust_towards_target()
{
	uint64_t target = target_wire_pages();
	uint64_t current = balloon_wire_pages_.get();

	if (governor_.enabled()) {
		os_.lock();
		governor_.note_target(target);
		os_.unlock();
	}
	if (target > current)
		return inflate(min<uint64_t>(target - current, inflate_step_wire_pages()));
	if (target < current) {
		if (deflate(min<uint64_t>(current - target, deflate_step_wire_pages())).stalled)
			return StepResult::kStalled;
		return balloon_wire_pages_.get() == target ? StepResult::kSettled : StepResult::kMoreWork;
	}
	return StepResult::kSettled;
}

// Written under the balloon lock, from the count the lock protects: two paths (the
// config-change worker and the OOM notifier) can never write their counts out of order, so
// the last value written is the current one.
template <BalloonOs Os> void PageBalloon<Os>::update_actual_locked()
{
	// The balloon holds what went in and has not come out (the counters only ever grow,
	// and the balloon adds to both under this lock).
	VB_INVARIANT(balloon_wire_pages_.get() ==
		     counters_.wire_pages_inflated.get() - counters_.wire_pages_deflated.get());
	VB_INVARIANT(balloon_wire_pages_.get() % wire_pages_per_page_ == 0);
	if (VB_MUTANT(OP14_ACTUAL_NOT_WRITTEN))
		return;
	// Legacy drivers must write all four bytes at once; one 32-bit write does.
	os_.config_write32(VB_CONFIG_ACTUAL_OFFSET, static_cast<uint32_t>(balloon_wire_pages_.get()));
	if (negotiated(VB_F_PAGE_POISON) && VB_MUTANT(POISON04_POISON_VAL_CHANGED_AFTER_DRIVER_OK))
		os_.config_write32(VB_CONFIG_POISON_VAL_OFFSET, ~traits_.free_page_pattern);
}

template <BalloonOs Os> void PageBalloon<Os>::release_all()
{
	while (balloon_wire_pages_.get() != 0) {
		DeflateResult result = deflate(deflate_step_wire_pages());
		if (result.stalled || result.freed_wire_pages == 0)
			break;
	}
}

// The OS has reset the device: the host holds none of the guest's pages any more, whatever
// it was or was not told. Everything on the balloon list goes back to the guest without a
// message; `actual` is not written (the device is reset and must not be touched before it
// is initialised again).
template <BalloonOs Os> void PageBalloon<Os>::release_after_reset()
{
	os_.lock();
	for (;;) {
		// The held pages (deflates the host never acknowledged) first, then the list.
		size_t run_count = os_.balloon_held_take(deflate_runs_, kRunsPerStep, ~uint64_t{0});
		if (!run_count)
			run_count = os_.balloon_list_take(deflate_runs_, kRunsPerStep, ~uint64_t{0});
		if (!run_count)
			break;
		for (size_t i = 0; i < run_count; i++)
			give_back(deflate_runs_[i]);
	}
	os_.unlock();
}

template <BalloonOs Os> void PageBalloon<Os>::add_pressure_stats(MemoryStats& stats) const
{
	// Present whenever the bit is: the tag set may not change while the driver is bound,
	// and the policy may be set after the stats buffer was primed.
	if (!negotiated(VB_F_X_PRESSURE))
		return;
	stats.present_mask |=
		(1u << VB_S_X_HELD_BACK) | (1u << VB_S_X_GIVEN_BACK) | (1u << VB_S_X_FLOOR);
	stats.value[VB_S_X_HELD_BACK] = stats.value[VB_S_X_GIVEN_BACK] = stats.value[VB_S_X_FLOOR] =
		0;
	if (!governor_.enabled())
		return;
	const uint64_t target = target_wire_pages();
	const uint64_t held = balloon_wire_pages();
	stats.value[VB_S_X_HELD_BACK] =
		governor_.inflate_held() && target > held && !VB_MUTANT(PRS13_HELD_BACK_UNREPORTED)
			? (target - held) * VB_PFN_UNIT_BYTES
			: 0;
	stats.value[VB_S_X_GIVEN_BACK] =
		counters_.pressure_give_back_wire_pages.get() * VB_PFN_UNIT_BYTES;
	stats.value[VB_S_X_FLOOR] = counters_.pressure_floor_pages.get() << traits_.page_shift;
}

template <BalloonOs Os> GovernorInput PageBalloon<Os>::pressure_input()
{
	GovernorInput in{};
	os_.pressure_sample(&in.sample);
	in.kept_free_pages = os_.free_pages_kept();
	in.balloon_pages = balloon_wire_pages_.get() / wire_pages_per_page_;
	// RAM with the balloon: without DEFLATE_ON_OOM its pages left the guest's total
	// (keep_inflated()), with it they stay counted.
	in.ram_pages =
		in.sample.total_pages + (negotiated(VB_F_DEFLATE_ON_OOM) ? 0 : in.balloon_pages);
	return in;
}

template <BalloonOs Os> bool PageBalloon<Os>::pressure_tick()
{
	if (!governor_.enabled())
		return false;
	const GovernorInput in = pressure_input();
	os_.lock();
	const bool below_target = target_wire_pages() > balloon_wire_pages_.get();
	const TickDecision decision = governor_.tick(in, below_target);
	counters_.pressure_ticks.add(1);
	if (governor_.level() != PressureLevel::kCalm)
		counters_.pressure_ticks_under_pressure.add(1);
	counters_.pressure_floor_pages.set(governor_.floor_pages(in.ram_pages));
	os_.unlock();
	if (decision.give_back_pages) {
		const uint64_t freed =
			deflate(decision.give_back_pages * wire_pages_per_page_).freed_wire_pages;
		counters_.pressure_give_backs.add(1);
		counters_.pressure_give_back_wire_pages.add(freed);
	}
	return decision.resume;
}

} // namespace vb

#include "vballoon/core/page_balloon_deflate.h"
#include "vballoon/core/page_balloon_inflate.h"
#include "vballoon/core/page_balloon_migrate.h"
#include "vballoon/core/page_balloon_stats.h"

#endif
