// SPDX-License-Identifier: GPL-2.0
//
// The balloon: one object per device, a template over the OS it runs in.
//
// The flow, as the OS drives it:
//   accept_features()            validate: what to take of what the device offers
//   Balloon(os, features, ...)   after FEATURES_OK, once the queues exist (it asks their size);
//                                its StepRuns are the OS's to place
//   prepare()                    before DRIVER_OK: prime statsq, write poison_val
//   start()                      after DRIVER_OK: notify statsq
//   adjust_towards_target()      on every config change, repeated while it says kMoreWork
//                                (kStalled: retry later, on a timer or when memory is freed)
//   handle_stats_request()       when the device returns the stats buffer
//   deflate_for_oom()            from the OOM notifier (DEFLATE_ON_OOM only)
//   migrate_page()               when compaction moves a ballooned page
//   hint_config_changed()        FREE_PAGE_HINT: from the config-change callback, any context
//   handle_free_page_hint()      FREE_PAGE_HINT: the OS's hint work item
//   hint_held_pages()/hint_release()  FREE_PAGE_HINT: the OS's shrinker (count/scan)
//   hint_device_reset()          FREE_PAGE_HINT: after a reset or before remove, hint work stopped
//   report_free_pages()          PAGE_REPORTING: the OS's reporting pass, up to 32 runs
//   release_all()                on remove, while the device still works: deflates every
//                                page the host acknowledges giving back
//   (the OS resets the device)
//   release_after_reset()        on remove and freeze, after the reset: every page still on
//                                the balloon list goes back to the guest without a message
//                                (the host holds nothing after a reset), and so does every page
//                                held since a deflate the host did not acknowledge. Pages compaction has
//                                isolated come back through migrate_page(), which fails after
//                                a reset, so compaction puts them back on the list; the OS
//                                calls this again until balloon_pfns() is 0.
//
// Failure: a page goes back to the guest only once the host acknowledged its deflate, or
// after the device was reset. tell_host() reports per page whether it was acknowledged,
// never sent or lost (host_reply.h), and each path acts on exactly that.
//
// The member functions live beside this file, one path per file: balloon_inflate.h,
// balloon_deflate.h, balloon_stats.h, balloon_oom.h, balloon_migrate.h, balloon_hint.h,
// balloon_report.h.
#ifndef VBALLOON_CORE_BALLOON_H
#define VBALLOON_CORE_BALLOON_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/chunk_packer.h"
#include "vballoon/core/features.h"
#include "vballoon/core/host_reply.h"
#include "vballoon/core/log_limit.h"
#include "vballoon/core/os_interface.h"
#include "vballoon/core/pfn_packer.h"
#include "vballoon/core/stats_report.h"
#include "vballoon/support/atomic.h"
#include "vballoon/support/freestanding.h"
#include "vballoon/support/mutant.h"

namespace vb {

// What one call to adjust_towards_target() left behind.
enum class StepResult : uint8_t {
	kSettled,  // the balloon is at the target
	kMoreWork, // progress was made; call again
	kStalled,  // the guest has no more pages to give without pressure; retry later
};

struct BalloonCounters {
	Counter inflate_messages; // descriptors added to inflateq
	Counter deflate_messages; // descriptors added to deflateq
	Counter pages_inflated;   // 4 KiB units
	Counter pages_deflated;   // 4 KiB units
	Counter alloc_failures;   // a step that could not allocate what it wanted
	Counter oom_calls;
	Counter oom_pages_freed;  // 4 KiB units
	Counter stats_reports;
	Counter migrations;
	Counter foreign_used_buffers; // the device returned a buffer we did not give it
	Counter unreachable_pages;    // allocated pages beyond what a 32-bit PFN reaches
	Counter queue_failures;       // the device refused buffers or went away mid-request
	Counter pages_device_initialised; // 4 KiB units the device promised to initialise
	// Free page hinting.
	Counter hint_rounds;          // command ids answered with a round
	Counter hint_ids_ignored;     // an id read again with no STOP or DONE between: stale
	Counter hint_blocks;          // blocks handed to the device as hints
	Counter hint_pages;           // 4 KiB units in them (blocks of any order)
	Counter hint_pages_returned;  // 4 KiB units given back after DONE
	Counter hint_pages_released_early; // 4 KiB units given back before DONE (shrinker, reset)
	// Free page reporting.
	Counter reports;              // reports the device acknowledged
	Counter pages_reported;       // 4 KiB units in them
	Counter report_failures;      // reports refused, or never acknowledged (device gone)
};

template <BalloonOs Os> class Balloon {
public:
	// The wire cap per inflate/deflate descriptor that every known device accepts.
	static constexpr uint32_t kPfnsPerMessage = VB_PFNS_PER_DESCRIPTOR_MAX;
	// Descriptors in flight at once; the spec does not ask the driver to wait for each.
	static constexpr uint32_t kMessagesInFlight = kMessagesInFlightMax;
	static constexpr uint32_t kPfnsPerStep = kPfnsPerMessage * kMessagesInFlight;
	// What one OOM notification may free (Linux's VIRTIO_BALLOON_OOM_NR_PAGES).
	static constexpr uint32_t kOomDeflatePfns = 256;
	// Balloon memory is allocated in blocks of up to 2 MiB (on 4 KiB pages).
	static constexpr unsigned kLargestChunkOrder = 9;
	// Allocated blocks beyond 16 TiB held aside in one step before it gives up.
	static constexpr size_t kUnreachableHeld = 16;
	// With VB_F_X_CHUNKED: chunk descriptors per message, and the pages one inflate step
	// may move (16 GiB; when memory is fragmented the run arrays, kRunsPerStep, end it
	// sooner). A step ends with the pipeline drained, the host idle while the guest books
	// the last batch and starts the next, so a step is made large enough that a balloon of
	// a few GiB goes in one. Inflate holds no lock across a step, and reads the target
	// again before every batch. A deflate step holds the lock throughout (the OOM notifier
	// may wait behind it), so it stays 256 MiB.
	static constexpr uint32_t kChunksPerMessageMax = 32;
	static constexpr uint64_t kChunkedStepPfns = 4194304;
	static constexpr uint64_t kChunkedDeflateStepPfns = 65536;
	static constexpr size_t kRunsPerStep = kPfnsPerStep;
	// Inflate sends a step in batches, each on the ring as soon as it is allocated, so the
	// host discards one batch while the guest allocates the next (balloon_inflate.h): a
	// message's worth of PFNs, or with VB_F_X_CHUNKED batches that start at 64 MiB and
	// double up to 2 GiB. The host is the slow side (a discard costs about ten times what
	// the allocation does), so only the first batch finds it idle; after that what counts
	// is its fixed cost per request, about 35 us of it the interrupt that wakes the waiting
	// guest, and growing batches pay it 8 times for 7 GiB where 256 MiB ones paid it 28
	// times (bench/inflate/README.md).
	static constexpr uint64_t kChunkedFirstBatchPfns = 16384;
	static constexpr uint64_t kChunkedBatchPfnsMax = 524288;
	// Message slots: one more than a call may have in flight, so that while an inflate
	// holds its four between batches (the lock let go), a deflate from the OOM notifier
	// still finds one.
	static constexpr uint32_t kMessageSlots = kMessagesInFlight + 1;
	static constexpr uint32_t kPipelineSlots = (1u << kMessagesInFlight) - 1;

	// The page runs one step works on: most of the balloon's memory, and never read by the
	// device, so the OS keeps them apart from the object (in Linux: the object holds the
	// device-visible buffers in an order-1 kmalloc, the runs may come from vmalloc).
	struct StepRuns {
		PageRun inflate[kRunsPerStep];
		PageRun deflate[kRunsPerStep];
	};

	// `runs` must outlive the balloon.
	Balloon(Os& os, uint64_t negotiated_features, const GuestTraits& traits, StepRuns& runs)
		: os_(os), features_(negotiated_features), traits_(traits),
		  pfns_per_page_(1u << (traits.page_shift - VB_PFN_SHIFT)),
		  max_chunk_order_(min(kLargestChunkOrder, traits.max_alloc_order)),
		  inflate_runs_(runs.inflate), deflate_runs_(runs.deflate)
	{
		const QueueKind page_queues[] = {QueueKind::kInflate, QueueKind::kDeflate};
		for (QueueKind queue : page_queues) {
			const uint32_t ring = os.queue_size(queue);
			const uint32_t bitmap = carries_bitmap(queue) ? 1 : 0;
			// Room for every message in flight, each with its bitmap where one
			// travels; at least one chunk, even if then only one message fits.
			const uint32_t per_message = ring / kMessagesInFlight;
			ring_size_[index(queue)] = ring;
			chunks_per_message_[index(queue)] =
				min(kChunksPerMessageMax, per_message > bitmap ? per_message - bitmap : 1);
		}
	}

	Balloon(const Balloon&) = delete;
	Balloon& operator=(const Balloon&) = delete;

	// Before DRIVER_OK. Returns false when the device cannot take the stats buffer.
	bool prepare();
	// After DRIVER_OK.
	void start();

	StepResult adjust_towards_target();
	uint64_t deflate_for_oom();
	void handle_stats_request();
	bool migrate_page(uint64_t old_pfn, uint64_t new_pfn);
	void release_all();
	void release_after_reset();

	// ---- Free page hinting (balloon_hint.h), FREE_PAGE_HINT only --------------------
	// From the OS's config-change callback, in any context (never sleeps, takes no lock):
	// free_page_hint_cmd_id may have changed. True when the OS should queue its hint work
	// item (which then calls handle_free_page_hint()).
	bool hint_config_changed();
	// The hint work item. Reads the command id; on a new id runs a round (the id on
	// free_page_vq, then free blocks of the largest order as in-buffers until the OS has none
	// or the id changes, then STOP) and repeats while the id keeps changing; on DONE gives
	// every hinted block back. Sleeps on free_page_vq, never holds the balloon lock, so
	// inflate and deflate go on beside it. One caller at a time (a work item).
	void handle_free_page_hint();
	// The shrinker. Pages (guest pages) held as hints right now.
	uint64_t hint_held_pages() const { return hint_held_pages_.get(); }
	// Gives at least max_pages (rounded up to whole blocks) back to the guest, or all it
	// holds; returns the guest pages freed. Any thread, also while a round runs (which goes
	// on). A guest that keeps a pattern in free pages gets it written (free_page_run()).
	uint64_t hint_release(uint64_t max_pages);
	// Remove or freeze is coming: a running round ends at its next block (or wait), and
	// no new one starts, until hint_device_reset(). Any thread; the OS then waits for its
	// hint work item to finish.
	void hint_stop() { hint_stop_requested_.set(); }
	// The device was reset or is going away, and the OS has stopped its hint work item:
	// the buffers on free_page_vq are gone, and every held block goes back to the guest.
	void hint_device_reset();

	// Smaller blocks a round takes once the largest run out: down to this many orders
	// below the largest (order 4, 64 KiB, under 4 MiB blocks), and only while the guest
	// keeps 1/kHintReserveShare of its memory free besides.
	static constexpr unsigned kHintOrdersBelowLargest = 6;
	static constexpr uint64_t kHintReserveShare = 64;

	// ---- Free page reporting (balloon_report.h), PAGE_REPORTING only ----------------
	// Most runs in one report (Linux's PAGE_REPORTING_CAPACITY).
	static constexpr size_t kReportRunsMax = 32;
	// Reports free blocks the OS has taken off its free lists (and that hold the guest's
	// free-page pattern when PAGE_POISON is negotiated) in one scatter-gather request, and
	// returns only once the device acknowledged it: true then, and the OS may mark the
	// blocks reported and put them back. False when the request was refused or never
	// acknowledged (device gone): the blocks are not reported; in a guest that needs a
	// pattern in free pages they have been re-initialised, as the device may have written
	// them. Sleeps on reporting_vq, never holds the balloon lock. One caller at a time.
	// Refused before start(): reports begin only after DRIVER_OK.
	bool report_free_pages(const PageRun* runs, size_t count);

	// The device's wish, rounded up to whole guest pages (in 4 KiB units).
	uint64_t target_pfns() const;
	uint64_t balloon_pfns() const { return balloon_pfns_.get(); }
	uint64_t features() const { return features_; }
	const BalloonCounters& counters() const { return counters_; }
	// Largest allocation order tried; 0 reproduces Linux's page-at-a-time inflate.
	void set_max_chunk_order(unsigned order) { max_chunk_order_ = min(order, traits_.max_alloc_order); }

private:
	// One inflate/deflate request. In PFN mode `pfns` is the payload; with VB_F_X_CHUNKED
	// the chunk segments themselves are the payload and `pfns` is unused. With
	// VB_F_X_INIT_ON_INFLATE the device writes one bit per PFN (or per chunk) into
	// `initialised`.
	struct Message {
		union { // one or the other, as VB_F_X_CHUNKED says
			uint32_t pfns[kPfnsPerMessage];
			Segment chunks[kChunksPerMessageMax];
		};
		uint8_t initialised[kPfnsPerMessage / 8];
		uint32_t count;
		RunSpan span; // the pages of tell_host()'s runs this message carries
	};

	// What one deflate step did: the 4 KiB units given back, and whether the host failed
	// to acknowledge some (they stay in the balloon).
	struct DeflateResult {
		uint64_t freed_pfns;
		bool stalled;
	};

	bool negotiated(unsigned bit) const { return has_feature(features_, bit); }
	void log(LogLevel level, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

	// Inflate (balloon_inflate.h).
	StepResult inflate(uint64_t wanted_pfns);
	// Blocks a 32-bit PFN cannot name, held aside until the step ends.
	struct HeldBlocks {
		PageRun blocks[kUnreachableHeld];
		size_t count = 0;
	};
	size_t allocate_runs(size_t first_run, uint64_t wanted_pages, HeldBlocks* unreachable,
			     uint64_t* allocated, bool* short_of_pages);
	size_t fold_last_run(size_t first_run, size_t run_count);
	uint64_t batch_pages(unsigned batch_index) const;

	void keep_inflated(PageRun run);

	// Deflate (balloon_deflate.h).
	DeflateResult deflate(uint64_t wanted_pfns);
	void give_back(PageRun run);

	// Sending (balloon_tell_host.h). Called with the balloon lock held.
	enum class InitialisedBits : uint8_t { kRecord, kIgnore };
	template <class OnAcknowledged>
	HostReply tell_host(QueueKind queue, const PageRun* runs, size_t run_count,
			    OnAcknowledged&& on_acknowledged,
			    InitialisedBits bits = InitialisedBits::kRecord);

	// The messages of one call on one queue: what was packed, sent and acknowledged so far.
	// tell_host() runs one from start to end under the lock; the inflate hands one its runs
	// batch by batch as it allocates them and lets go of the lock in between, messages
	// still in flight (balloon_inflate.h). Every function taking one is called with the
	// balloon lock held.
	struct Outbox {
		Outbox(QueueKind kind, const PageRun* page_runs, unsigned page_shift, uint32_t usable)
			: queue(kind), runs(page_runs), pfn_packer(page_runs, 0, page_shift),
			  chunk_packer(page_runs, 0, page_shift), slots(usable)
		{
		}
		QueueKind queue;
		const PageRun* runs;
		size_t run_count = 0;
		uint64_t total_pages = 0;
		PfnPacker pfn_packer;
		ChunkPacker chunk_packer;
		RunCursor packed_end; // where the next message starts
		uint64_t sent_pages = 0;
		uint32_t slots;         // the message slots this outbox may use
		uint32_t in_flight = 0; // slots whose message is on the ring
		int packed_slot = -1;   // a message packed but not yet accepted by the queue
		bool unfit = false;     // no message fits the ring: nothing is ever sent
		bool device_gone = false;
		RunSpan lost[kMessagesInFlightMax];
		uint32_t lost_count = 0;

		// Slots holding a message of this outbox (on the ring or waiting for room).
		uint32_t held() const { return in_flight | (packed_slot >= 0 ? 1u << packed_slot : 0); }
	};
	// The slots a call may use: the lowest kMessagesInFlight of those nobody holds right
	// now (an inflate between batches holds some).
	uint32_t free_slots() const
	{
		uint32_t free = ((1u << kMessageSlots) - 1) & ~inflate_held_slots_;
		uint32_t usable = 0;
		for (uint32_t n = 0; free && n < kMessagesInFlight; n++) {
			usable |= free & -free;
			free &= free - 1;
		}
		return usable;
	}
	void outbox_open(Outbox& box);
	void outbox_extend(Outbox& box, size_t run_count);
	bool outbox_all_packed(const Outbox& box) const;
	// Adds messages while there are pages, free slots and room on the ring; kicks once.
	template <class OnAcknowledged> void outbox_push(Outbox& box, OnAcknowledged& on_acknowledged);
	// Takes one buffer the device returned, waiting for it if `wait`. False when there is
	// none: not yet (without wait), or never (the device is gone; in-flight messages lost).
	template <class OnAcknowledged>
	bool outbox_collect(Outbox& box, OnAcknowledged& on_acknowledged, InitialisedBits bits,
			    bool wait);
	template <class OnAcknowledged>
	void outbox_take(Outbox& box, void* token, uint32_t len, OnAcknowledged& on_acknowledged,
			 InitialisedBits bits);
	void outbox_lose_in_flight(Outbox& box);
	HostReply outbox_close(Outbox& box);
	void pack_message(Message& message, Outbox& box);
	bool add_message(QueueKind queue, Message& message);
	int slot_of(const void* token, uint32_t in_flight) const;
	static uint64_t lost_pages(const HostReply& reply);
	void record_device_initialised(const Message& message, uint32_t written_bytes);
	bool chunked() const { return negotiated(VB_F_X_CHUNKED); }
	bool carries_bitmap(QueueKind queue) const
	{
		return queue == QueueKind::kInflate && negotiated(VB_F_X_INIT_ON_INFLATE);
	}
	static size_t index(QueueKind queue) { return queue == QueueKind::kInflate ? 0 : 1; }
	uint32_t ring_size(QueueKind queue) const { return ring_size_[index(queue)]; }
	uint32_t chunks_per_message(QueueKind queue) const { return chunks_per_message_[index(queue)]; }
	// Descriptors one message of `chunks` chunks takes: the payload, and the bitmap where
	// one travels.
	uint32_t descriptors_per_message(QueueKind queue, uint32_t chunks) const
	{
		return (chunked() ? chunks : 1) + (carries_bitmap(queue) ? 1 : 0);
	}
	uint64_t inflate_step_pfns() const { return chunked() ? kChunkedStepPfns : kPfnsPerStep; }
	uint64_t deflate_step_pfns() const { return chunked() ? kChunkedDeflateStepPfns : kPfnsPerStep; }
	void update_actual_locked();

	// Free page hinting (balloon_hint.h).
	uint32_t read_hint_cmd_id();
	void run_hint_round(uint32_t cmd_id);
	bool hint_add(const Segment* out, const Segment* in, void* token);
	void hint_reap_used();
	bool hint_wait_used();
	uint64_t hint_give_back(uint64_t max_pages, bool after_done);
	unsigned hint_order() const;
	uint64_t hint_small_block_budget();

	Os& os_;
	const uint64_t features_;
	const GuestTraits traits_;
	const uint32_t pfns_per_page_;
	unsigned max_chunk_order_;
	uint32_t ring_size_[2];          // inflateq, deflateq
	uint32_t chunks_per_message_[2]; // inflateq, deflateq (VB_F_X_CHUNKED)

	Counter balloon_pfns_; // pages in the balloon, 4 KiB units (what `actual` reports)
	BalloonCounters counters_;

	// Inflate fills its runs before it takes the lock; deflate (also reached from the OOM
	// notifier) only under it. Separate arrays keep the two from ever sharing one. Both
	// hold kRunsPerStep runs, in the OS's StepRuns.
	PageRun* const inflate_runs_;
	PageRun* const deflate_runs_;

	// Buffers the device reads: they must live where phys_addr() can name them.
	Message messages_[kMessageSlots];
	// While an inflate has let go of the lock between batches (balloon lock): the message
	// slots it holds, which no other call may use; while any are held it owns inflateq, so
	// migration must not send on it (it would take the inflate's acknowledgements for its own).
	uint32_t inflate_held_slots_ = 0;
	vb_stat_entry stats_[VB_S_NR];
	uint32_t stats_tag_mask_ = 0;
	uint32_t stats_count_ = 0;

	// Free page hinting. The worker alone touches the plain fields; the shrinker reads
	// the counters. The two id buffers are read by the device, so they live here.
	uint32_t hint_id_buffer_ = VB_CMD_ID_STOP;   // the round's id, sent once
	uint32_t hint_stop_buffer_ = VB_CMD_ID_STOP; // STOP, closing a round
	uint8_t hint_block_token_ = 0;               // the token of every hinted block
	uint32_t hint_cmd_id_active_ = VB_CMD_ID_STOP; // id of the last round we ran
	uint32_t hint_cmd_id_seen_ = VB_CMD_ID_STOP;   // what config said when last read
	uint32_t hint_in_flight_ = 0;                  // buffers on free_page_vq
	bool hint_id_in_flight_ = false;
	Flag hint_config_dirty_;
	Flag hint_done_seen_; // DONE read and not yet followed by a new round
	Flag hint_stop_requested_; // hint_stop(): remove or freeze waits for the round
	Counter hint_held_pages_;
	Flag driver_ok_; // start() ran: DRIVER_OK is set
	uint8_t report_token_ = 0;
	// Error logs a broken device could otherwise flood (balloon lock held).
	LogLimit refused_log_;
	LogLimit foreign_log_;
	LogLimit migration_log_;
};

template <BalloonOs Os> void Balloon<Os>::log(LogLevel level, const char* fmt, ...)
{
	va_list args;

	va_start(args, fmt);
	os_.vlog(level, fmt, args);
	va_end(args);
}

template <BalloonOs Os> uint64_t Balloon<Os>::target_pfns() const
{
	uint64_t wanted = os_.config_read32(VB_CONFIG_NUM_PAGES_OFFSET);

	// Round up to whole guest pages, or a 64 KiB-page guest would inflate and deflate
	// forever around a target that is not a multiple of its page.
	return (wanted + pfns_per_page_ - 1) / pfns_per_page_ * pfns_per_page_;
}

template <BalloonOs Os> bool Balloon<Os>::prepare()
{
	// The spec orders it: write poison_val before DRIVER_OK, never change it afterwards.
	if (negotiated(VB_F_PAGE_POISON) && !VB_MUTANT(POISON03_POISON_VAL_AFTER_DRIVER_OK))
		os_.config_write32(VB_CONFIG_POISON_VAL_OFFSET, traits_.free_page_pattern);

	if (negotiated(VB_F_STATS_VQ)) {
		MemoryStats stats{};

		os_.memory_stats(&stats);
		stats_tag_mask_ = stats.present_mask & ((1u << VB_S_NR) - 1);
		stats_count_ = VB_MUTANT(STATS05_PRIME_EMPTY_BUFFER) ? 0 : fill_stats_entries(stats_, stats, stats_tag_mask_);
		// Primed with real values: a device may read them before it ever asks.
		Segment out = {os_.phys_addr(stats_), stats_count_ * VB_STAT_ENTRY_BYTES};
		if (!VB_MUTANT(STATS03_NO_PRIMING_BUFFER) && !os_.queue_add(QueueKind::kStats, &out, 1, nullptr, 0, stats_)) {
			log(LogLevel::kError, "vballoon: statsq refused the stats buffer\n");
			return false;
		}
		if (VB_MUTANT(STATS02_TWO_BUFFERS_OUTSTANDING))
			os_.queue_add(QueueKind::kStats, &out, 1, nullptr, 0, stats_);
	}
	return true;
}

template <BalloonOs Os> void Balloon<Os>::start()
{
	driver_ok_.set();
	hint_stop_requested_.test_and_clear(); // restore: hinting may run again
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

template <BalloonOs Os> StepResult Balloon<Os>::adjust_towards_target()
{
	uint64_t target = target_pfns();
	uint64_t current = balloon_pfns_.get();

	if (target > current)
		return inflate(min<uint64_t>(target - current, inflate_step_pfns()));
	if (target < current) {
		if (deflate(min<uint64_t>(current - target, deflate_step_pfns())).stalled)
			return StepResult::kStalled;
		return balloon_pfns_.get() == target ? StepResult::kSettled : StepResult::kMoreWork;
	}
	return StepResult::kSettled;
}

// Written under the balloon lock, from the count the lock protects: two paths (the
// config-change worker and the OOM notifier) can never write their counts out of order, so
// the last value written is the current one.
template <BalloonOs Os> void Balloon<Os>::update_actual_locked()
{
	if (VB_MUTANT(OP14_ACTUAL_NOT_WRITTEN))
		return;
	// Legacy drivers must write all four bytes at once; one 32-bit write does.
	os_.config_write32(VB_CONFIG_ACTUAL_OFFSET, static_cast<uint32_t>(balloon_pfns_.get()));
	if (negotiated(VB_F_PAGE_POISON) && VB_MUTANT(POISON04_POISON_VAL_CHANGED_AFTER_DRIVER_OK))
		os_.config_write32(VB_CONFIG_POISON_VAL_OFFSET, ~traits_.free_page_pattern);
}

template <BalloonOs Os> void Balloon<Os>::release_all()
{
	while (balloon_pfns_.get() != 0) {
		DeflateResult result = deflate(deflate_step_pfns());
		if (result.stalled || result.freed_pfns == 0)
			break;
	}
}

// The OS has reset the device: the host holds none of the guest's pages any more, whatever
// it was or was not told. Everything on the balloon list goes back to the guest without a
// message; `actual` is not written (the device is reset and must not be touched before it
// is initialised again).
template <BalloonOs Os> void Balloon<Os>::release_after_reset()
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

} // namespace vb

#include "vballoon/core/balloon_tell_host.h"
#include "vballoon/core/balloon_deflate.h"
#include "vballoon/core/balloon_inflate.h"
#include "vballoon/core/balloon_migrate.h"
#include "vballoon/core/balloon_oom.h"
#include "vballoon/core/balloon_stats.h"
#include "vballoon/core/balloon_hint.h"
#include "vballoon/core/balloon_report.h"

#endif
