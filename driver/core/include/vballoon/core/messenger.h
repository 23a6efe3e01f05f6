// SPDX-License-Identifier: GPL-2.0
//
// The messenger: telling the host about guest pages on inflateq or deflateq, several
// messages in flight at once. A message is a PFN array of 4 KiB wire pages (the standard
// format) or, with VB_F_X_CHUNKED, a chain of chunk descriptors; with
// DEVICE_INIT_ON_INFLATE (bit 7) or VB_F_X_INIT_ON_INFLATE (bit 21) an inflate message also
// carries a bitmap the device fills in (the same bitmap for both; they differ on the device's
// side, in what it may promise under a non-zero poison_val).
// Every page a caller names ends in exactly one MessageOutcome (host_reply.h): acknowledged
// (the caller's callback ran for it, once), never sent or lost (the reply names it).
//
// Two ways to send, both called with the balloon lock held:
// - tell_host(): one call from start to end under the lock (deflate, migration, the OOM
//   notifier);
// - a pipeline (open_pipeline() ... close_pipeline()): the inflate hands the outbox its
//   runs batch by batch and lets go of the lock between batches, messages still in flight.
//
// The lock rule between the two is the messenger's, not its callers': a pipeline holds at
// most kPipelineSlotMask of the kMessageSlots message slots, so a tell_host() that runs
// while a pipeline is parked between batches (a deflate from the OOM notifier) always finds
// a free slot, and pipeline_holds_inflateq() tells migration it must not send on inflateq
// (it would take the pipeline's acknowledgements for its own).
#ifndef VBALLOON_CORE_MESSENGER_H
#define VBALLOON_CORE_MESSENGER_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/chunk_packer.h"
#include "vballoon/core/core_log.h"
#include "vballoon/core/counters.h"
#include "vballoon/core/features.h"
#include "vballoon/core/host_reply.h"
#include "vballoon/core/log_limit.h"
#include "vballoon/core/os_interface.h"
#include "vballoon/core/pfn_packer.h"
#include "vballoon/core/rules/messenger_rules.h"
#include "vballoon/support/freestanding.h"
#include "vballoon/support/invariant.h"

namespace vb {

template <BalloonOs Os> class Messenger {
public:
	// The wire cap per inflate/deflate descriptor that every known device accepts.
	static constexpr uint32_t kWirePagesPerMessage = VB_PFNS_PER_DESCRIPTOR_MAX;
	// Descriptors in flight at once; the spec does not ask the driver to wait for each.
	static constexpr uint32_t kMessagesInFlight = kMessagesInFlightMax;
	// With VB_F_X_CHUNKED: chunk descriptors per message, at most.
	static constexpr uint32_t kChunksPerMessageMax = 32;
	// Message slots: one more than a call may have in flight, so that while a pipeline
	// holds its four between batches (the lock let go), a tell_host() still finds one.
	static constexpr uint32_t kMessageSlots = kMessagesInFlight + 1;
	// The slots a pipeline may use (a bit mask over the kMessageSlots slots).
	static constexpr uint32_t kPipelineSlotMask = (1u << kMessagesInFlight) - 1;
	static_assert(__builtin_popcount(kPipelineSlotMask) < kMessageSlots,
		      "a pipeline parked between batches must leave tell_host() a slot");
	static_assert(kMessageSlots <= 32, "slot masks are 32 bits");

	// Whether the device's initialised bits of an acknowledged inflate are recorded on the
	// balloon list (kIgnore: the pages are not on the list, as in migration).
	enum class InitialisedBits : uint8_t { kRecord, kIgnore };

	// The messages of one call on one queue: what was packed, sent and acknowledged so far.
	// Only the messenger changes it; a pipeline's owner asks it what it needs to decide when
	// to allocate and when to wait, and waits through Messenger::wait().
	class Outbox
	{
	public:
		// Some of its messages are on the ring.
		bool in_flight() const { return in_flight_mask != 0; }
		// Every page handed over so far went out in a message the queue took.
		bool all_sent() const { return sent_pages == total_pages; }
		// Nothing more will go out: no message fits the ring, the device is gone, or the
		// queue refuses a message with none of ours in flight to make room.
		bool blocked() const
		{
			return unfit || device_gone || (!in_flight_mask && packed_slot >= 0);
		}
		// Guest pages handed over (extend()).
		uint64_t pages() const { return total_pages; }
		// Slots holding a message of this outbox (on the ring or waiting for room).
		uint32_t held_mask() const
		{
			return in_flight_mask | (packed_slot >= 0 ? 1u << packed_slot : 0);
		}

	private:
		friend Messenger;
		Outbox(QueueKind kind, const PageRun* page_runs, uint32_t usable_mask)
		    : queue(kind), runs(page_runs), slot_mask(usable_mask)
		{
		}
		QueueKind queue;
		const PageRun* runs;
		size_t run_count = 0;
		uint64_t total_pages = 0; // guest pages in runs[0, run_count)
		// Where the next message starts: the one cursor over the runs, which the packers
		// move; a message's span starts where it was.
		RunCursor packed_end;
		uint64_t sent_pages = 0;         // guest pages of messages the queue took
		uint64_t acknowledged_pages = 0; // guest pages of messages the device returned
		uint32_t slot_mask;          // the message slots this outbox may use
		uint32_t in_flight_mask = 0; // slots whose message is on the ring
		int packed_slot = -1;        // a message packed but not yet accepted by the queue
		bool unfit = false;          // no message fits the ring: nothing is ever sent
		bool device_gone = false;
		RunSpan lost[kMessagesInFlightMax];
		uint32_t lost_count = 0;
		void* returned_token = nullptr; // what wait() brought back, not yet taken
		uint32_t returned_len = 0;
	};

	Messenger(Os& os, uint64_t negotiated_features, const GuestTraits& traits,
		  BalloonCounters& counters)
		: os_(os), features_(negotiated_features), page_shift_(traits.page_shift),
		  wire_pages_per_page_(1u << (traits.page_shift - VB_PFN_SHIFT)),
		  initialise_before_inflate_(traits.initialise_before_inflate), counters_(counters)
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

	Messenger(const Messenger&) = delete;
	Messenger& operator=(const Messenger&) = delete;

	// Sends every run, in order, in messages of at most kWirePagesPerMessage wire pages (or
	// the queue's chunks per message), up to kMessagesInFlight at once (fewer while a
	// pipeline is parked), and returns once nothing is in flight. `on_acknowledged(PageRun)`
	// runs for the pages of each message as the device returns it, before the
	// device-initialised bits of that message are recorded (unless `bits` says the pages are
	// not on the balloon list); the pages of messages that were refused or lost come back
	// in the reply. Balloon lock held.
	template <class OnAcknowledged>
	[[nodiscard]] HostReply tell_host(QueueKind queue, const PageRun* runs, size_t run_count,
					  OnAcknowledged&& on_acknowledged,
					  InitialisedBits bits = InitialisedBits::kRecord);

	// ---- The pipeline (the inflate, page_balloon_inflate.h) ----------------------------
	// An outbox over `runs`, which the caller fills and hands over with extend(). May be
	// opened without the lock; every other call below takes it held.
	Outbox open_pipeline(QueueKind queue, const PageRun* runs);
	// runs[0, run_count) are now the outbox's: those past the previous count are appended.
	void extend(Outbox& box, size_t run_count);
	// Adds messages while there are pages, free slots and room on the ring; kicks once.
	template <class OnAcknowledged> void push(Outbox& box, OnAcknowledged& on_acknowledged);
	// Takes one buffer the device returned, waiting for it if `wait`. False when there is
	// none: not yet (without wait), or never (the device is gone; in-flight messages lost).
	template <class OnAcknowledged>
	bool collect(Outbox& box, OnAcknowledged& on_acknowledged, InitialisedBits bits, bool wait);
	// Takes every buffer the device has returned so far, without waiting: first the one
	// wait() brought back, if any.
	template <class OnAcknowledged>
	void collect_returned(Outbox& box, OnAcknowledged& on_acknowledged, InitialisedBits bits)
	{
		if (void* token = box.returned_token) {
			box.returned_token = nullptr;
			take(box, token, box.returned_len, on_acknowledged, bits);
		}
		while (box.in_flight() && collect(box, on_acknowledged, bits, false)) {
		}
	}
	// Waits for the device to return one of `box`'s messages (some are in flight). The
	// pipeline's owner calls it without the lock: the buffer that came back waits in the
	// outbox for collect_returned(), under the lock. When none comes back the device is
	// gone, and every message in flight is lost (only the outbox and the message slots it
	// holds are touched, which no other call uses meanwhile).
	void wait(Outbox& box)
	{
		box.returned_token = os_.queue_wait_used(box.queue, &box.returned_len);
		if (!box.returned_token)
			lose_in_flight(box);
	}
	// The caller is about to let go of the lock with `box`'s messages in flight: its slots
	// stay its own, and it owns inflateq, until close_pipeline().
	void park(const Outbox& box) { pipeline_held_mask_ = box.held_mask(); }
	// Nothing of the pipeline is in flight any more: what became of the pages not
	// acknowledged.
	[[nodiscard]] HostReply close_pipeline(Outbox& box)
	{
		pipeline_held_mask_ = 0;
		return close(box);
	}
	// A pipeline is parked with messages of its own: inflateq's acknowledgements are its.
	bool pipeline_holds_inflateq() const { return pipeline_held_mask_ != 0; }

	uint32_t ring_size(QueueKind queue) const { return ring_size_[index(queue)]; }
	uint32_t chunks_per_message(QueueKind queue) const { return chunks_per_message_[index(queue)]; }
	// Descriptors one message of `chunks` chunks takes: the payload, and the bitmap where
	// one travels.
	uint32_t descriptors_per_message(QueueKind queue, uint32_t chunks) const
	{
		return (chunked() ? chunks : 1) + (carries_bitmap(queue) ? 1 : 0);
	}
	bool chunked() const
	{
		return has_feature(features_, VB_F_X_CHUNKED) &&
		       rules::chunked_requests_are_ranges();
	}

private:
	// One inflate/deflate request. In PFN mode `wire_pfns` is the payload; with
	// VB_F_X_CHUNKED the chunk segments themselves are the payload and `wire_pfns` is
	// unused. With VB_F_X_INIT_ON_INFLATE the device writes one bit per wire page (or per
	// chunk) into `initialised`.
	struct Message {
		union { // one or the other, as VB_F_X_CHUNKED says
			uint32_t wire_pfns[kWirePagesPerMessage];
			Segment chunks[kChunksPerMessageMax];
		};
		uint8_t initialised[kWirePagesPerMessage / 8];
		uint32_t count; // wire PFNs or chunks
		RunSpan span;   // the guest pages of the outbox's runs this message carries
	};

	// The slots a call may use: the lowest kMessagesInFlight of those no parked pipeline
	// holds. Never empty (kPipelineSlotMask leaves one).
	uint32_t free_slot_mask() const
	{
		uint32_t free = ((1u << kMessageSlots) - 1) & ~pipeline_held_mask_;
		uint32_t usable = 0;
		for (uint32_t n = 0; free && n < kMessagesInFlight; n++) {
			usable |= free & -free;
			free &= free - 1;
		}
		return usable;
	}
	// A message that can never fit is never tried: no chain is longer than its ring.
	void open(Outbox& box) { box.unfit = descriptors_per_message(box.queue, 1) > ring_size(box.queue); }
	static bool all_packed(const Outbox& box) { return box.packed_end.run == box.run_count; }
	[[nodiscard]] HostReply close(Outbox& box);
	// The device returned `token`, having written `len` bytes into it.
	template <class OnAcknowledged>
	void take(Outbox& box, void* token, uint32_t len, OnAcknowledged& on_acknowledged,
		  InitialisedBits bits);
	// The OS gave up on the queue (device reset or removal): nothing in flight will come
	// back, and the host will not say what it did with it.
	void lose_in_flight(Outbox& box);
	void pack_message(Message& message, Outbox& box);
	bool add_message(QueueKind queue, Message& message);
	int slot_of(const void* token, uint32_t in_flight_mask) const;
	static uint64_t lost_pages(const HostReply& reply);
	void record_device_initialised(const Message& message, uint32_t written_bytes);
	bool carries_bitmap(QueueKind queue) const
	{
		return queue == QueueKind::kInflate &&
		       (has_feature(features_, VB_F_X_INIT_ON_INFLATE) ||
			(has_feature(features_, VB_F_DEVICE_INIT_ON_INFLATE) &&
			 rules::bit7_inflates_carry_a_bitmap()));
	}
	static size_t index(QueueKind queue) { return queue == QueueKind::kInflate ? 0 : 1; }

	Os& os_;
	const uint64_t features_;
	const unsigned page_shift_;
	const uint32_t wire_pages_per_page_;
	const bool initialise_before_inflate_;
	BalloonCounters& counters_;
	uint32_t ring_size_[2];          // inflateq, deflateq
	uint32_t chunks_per_message_[2]; // inflateq, deflateq (VB_F_X_CHUNKED)
	// Buffers the device reads: they must live where phys_addr() can name them.
	Message messages_[kMessageSlots];
	// While a pipeline has let go of the lock between batches: the message slots it holds,
	// which no other call may use.
	uint32_t pipeline_held_mask_ = 0;
	// Error logs a broken device could otherwise flood.
	LogLimit refused_log_;
	LogLimit foreign_log_;
};

template <BalloonOs Os>
template <class OnAcknowledged>
HostReply Messenger<Os>::tell_host(QueueKind queue, const PageRun* runs, size_t run_count,
				   OnAcknowledged&& on_acknowledged, InitialisedBits bits)
{
	Outbox box(queue, runs, free_slot_mask());
	VB_INVARIANT(box.slot_mask != 0);
	open(box);
	extend(box, run_count);
	for (;;) {
		push(box, on_acknowledged);
		if (queue == QueueKind::kInflate && !rules::inflated_pages_wait_for_ack())
			break;
		if (!box.in_flight_mask || !collect(box, on_acknowledged, bits, true))
			break;
	}
	return close(box);
}

template <BalloonOs Os>
typename Messenger<Os>::Outbox Messenger<Os>::open_pipeline(QueueKind queue, const PageRun* runs)
{
	Outbox box(queue, runs, kPipelineSlotMask);
	open(box);
	return box;
}

template <BalloonOs Os> void Messenger<Os>::extend(Outbox& box, size_t run_count)
{
	for (size_t i = box.run_count; i < run_count; i++)
		box.total_pages += box.runs[i].count;
	box.run_count = run_count;
}

template <BalloonOs Os>
template <class OnAcknowledged>
void Messenger<Os>::push(Outbox& box, OnAcknowledged& on_acknowledged)
{
	const QueueKind queue = box.queue;
	bool added = false;

	while (!box.unfit && !box.device_gone) {
		if (box.packed_slot < 0) {
			const uint32_t free = box.slot_mask & ~box.in_flight_mask;
			if (all_packed(box) || !free)
				break;
			box.packed_slot = __builtin_ctz(free);
			pack_message(messages_[box.packed_slot], box);
		}
		Message& message = messages_[box.packed_slot];
		if (!add_message(queue, message))
			break; // ring full: wait for the device to return one
		box.in_flight_mask |= 1u << box.packed_slot;
		box.sent_pages += message.span.pages;
		if (!rules::pages_wait_for_ack(queue))
			for_each_part(box.runs, message.span, on_acknowledged);
		if (queue == QueueKind::kInflate && !rules::inflating_pages_untouched() &&
		    initialise_before_inflate_ && !carries_bitmap(queue))
			for_each_part(box.runs, message.span, [&](PageRun run) { os_.initialise_pages(run); });
		box.packed_slot = -1;
		added = true;
		if (queue == QueueKind::kInflate)
			counters_.inflate_messages.add(1);
		else
			counters_.deflate_messages.add(1);
	}
	if (added)
		os_.queue_kick(queue);
}

template <BalloonOs Os>
template <class OnAcknowledged>
bool Messenger<Os>::collect(Outbox& box, OnAcknowledged& on_acknowledged, InitialisedBits bits,
			    bool wait)
{
	uint32_t len = 0;
	void* token = wait ? os_.queue_wait_used(box.queue, &len) : os_.queue_get_used(box.queue, &len);

	if (!token) {
		if (wait)
			lose_in_flight(box);
		return false;
	}
	take(box, token, len, on_acknowledged, bits);
	return true;
}

template <BalloonOs Os> void Messenger<Os>::lose_in_flight(Outbox& box)
{
	box.device_gone = true;
	for (uint32_t slot = 0; slot < kMessageSlots; slot++) {
		if (box.in_flight_mask & (1u << slot))
			box.lost[box.lost_count++] = messages_[slot].span;
	}
	box.in_flight_mask = 0;
}

template <BalloonOs Os>
template <class OnAcknowledged>
void Messenger<Os>::take(Outbox& box, void* token, uint32_t len, OnAcknowledged& on_acknowledged,
			 InitialisedBits bits)
{
	const QueueKind queue = box.queue;
	const int slot = slot_of(token, box.in_flight_mask);
	if (slot < 0) {
		counters_.foreign_used_buffers.add(1);
		if (foreign_log_.allow())
			log_to(os_, LogLevel::kWarning,
			       "device returned a buffer it was not given on queue %u "
			       "(%llu times)\n",
			       static_cast<unsigned>(queue),
			       static_cast<unsigned long long>(foreign_log_.occurrences()));
		return;
	}
	box.in_flight_mask &= ~(1u << slot);
	box.acknowledged_pages += messages_[slot].span.pages;
	// (A deflate that broke its rule handed its pages over in push() already.)
	if (queue != QueueKind::kDeflate || rules::deflated_pages_wait_for_ack())
		for_each_part(box.runs, messages_[slot].span, on_acknowledged);
	if (carries_bitmap(queue) && bits == InitialisedBits::kRecord)
		record_device_initialised(messages_[slot], len);
}

// Nothing of the outbox is in flight any more: what became of the pages not acknowledged.
template <BalloonOs Os> HostReply Messenger<Os>::close(Outbox& box)
{
	const QueueKind queue = box.queue;
	HostReply reply;

	reply.device_gone = box.device_gone;
	for (uint32_t i = 0; i < box.lost_count; i++)
		reply.lost[reply.lost_count++] = box.lost[i];
	// Messages go out in the order of the runs: what was not sent is one span at the end.
	reply.never_sent = {RunCursor::at(box.runs, box.sent_pages),
			    box.total_pages - box.sent_pages};
	if (reply.never_sent.pages && !reply.device_gone)
		reply.refused = true;
	// Every page in exactly one outcome: acknowledged, lost or never sent (only a mutant
	// that treats a message as acknowledged once added leaves some in flight).
	VB_INVARIANT(box.sent_pages <= box.total_pages);
	VB_INVARIANT(box.acknowledged_pages + lost_pages(reply) <= box.sent_pages);
	VB_INVARIANT(box.in_flight_mask != 0 ||
		     box.acknowledged_pages + lost_pages(reply) == box.sent_pages);
	if (box.unfit) {
		counters_.queue_failures.add(1);
		if (refused_log_.allow())
			log_to(os_, LogLevel::kError,
			       "queue %u has %u descriptors, a message needs %u (%llu times)\n",
			       static_cast<unsigned>(queue), ring_size(queue),
			       descriptors_per_message(queue, 1),
			       static_cast<unsigned long long>(refused_log_.occurrences()));
	} else if (!reply.all_acknowledged()) {
		counters_.queue_failures.add(1);
		if (refused_log_.allow())
			log_to(os_, LogLevel::kError,
			       "queue %u: %llu of %llu pages not acknowledged (%s, %llu "
			       "times)\n",
			       static_cast<unsigned>(queue),
			       static_cast<unsigned long long>(box.total_pages - box.sent_pages +
							       lost_pages(reply)),
			       static_cast<unsigned long long>(box.total_pages),
			       reply.device_gone ? "device gone" : "queue refused",
			       static_cast<unsigned long long>(refused_log_.occurrences()));
	}
	return reply;
}

template <BalloonOs Os> uint64_t Messenger<Os>::lost_pages(const HostReply& reply)
{
	uint64_t pages = 0;
	for (uint32_t i = 0; i < reply.lost_count; i++)
		pages += reply.lost[i].pages;
	return pages;
}

template <BalloonOs Os> int Messenger<Os>::slot_of(const void* token, uint32_t in_flight_mask) const
{
	for (uint32_t slot = 0; slot < kMessageSlots; slot++) {
		if (token == &messages_[slot] && (in_flight_mask & (1u << slot)))
			return static_cast<int>(slot);
	}
	return -1;
}

// Packs the next message from where the last one ended; the packer moves the outbox's
// cursor past it.
template <BalloonOs Os> void Messenger<Os>::pack_message(Message& message, Outbox& box)
{
	const RunCursor start = box.packed_end;
	uint64_t pages = 0;

	if (chunked()) {
		const uint32_t capacity = chunks_per_message(box.queue);
		ChunkPacker packer(box.runs, box.run_count, page_shift_, box.packed_end);
		message.count = packer.pack(message.chunks, capacity);
		box.packed_end = packer.position();
		for (uint32_t i = 0; i < message.count; i++)
			pages += message.chunks[i].len >> page_shift_;
		// A trailing range that names nothing, or the first page again.
		if (!rules::ranges_never_empty() && message.count && message.count < capacity)
			message.chunks[message.count++] = {message.chunks[0].phys_addr, 0};
		if (!rules::pages_named_once_per_request() && message.count &&
		    message.count < capacity)
			message.chunks[message.count++] = {message.chunks[0].phys_addr,
							   1u << page_shift_};
	} else {
		PfnPacker packer(box.runs, box.run_count, page_shift_, box.packed_end);
		message.count = packer.pack(message.wire_pfns, kWirePagesPerMessage);
		box.packed_end = packer.position();
		pages = message.count / wire_pages_per_page_;
	}
	message.span = {start, pages};
}

template <BalloonOs Os> bool Messenger<Os>::add_message(QueueKind queue, Message& message)
{
	Segment pfn_array = {os_.phys_addr(message.wire_pfns), message.count * VB_PFN_ENTRY_BYTES};
	const Segment* out = chunked() ? message.chunks : &pfn_array;
	unsigned out_count = chunked() ? message.count : 1;
	Segment bitmap = {os_.phys_addr(message.initialised), (message.count + 7) / 8};
	if (chunked() && !rules::range_bitmap_is_ceil_n_over_8())
		bitmap.len = min<uint32_t>(bitmap.len + 1, sizeof(message.initialised));
	bool wants_bitmap = carries_bitmap(queue);

	if (wants_bitmap)
		fill_bytes(message.initialised, 0, bitmap.len);
	return os_.queue_add(queue, out, out_count, &bitmap, wants_bitmap ? 1 : 0, &message);
}

// Marks the pages whose bits the device set. A guest page counts only when every wire page
// of it is set, and bits beyond what the device says it wrote stay clear. Bits beyond the
// message's units are never read. A used length beyond the bitmap is a device that writes
// where it was not asked to: nothing of that message is trusted.
template <BalloonOs Os>
void Messenger<Os>::record_device_initialised(const Message& message, uint32_t written_bytes)
{
	const uint32_t bitmap_bytes = (message.count + 7) / 8;
	if (written_bytes > bitmap_bytes && rules::overlong_bitmap_voids_its_request()) {
		counters_.device_init_overclaims.add(1);
		return;
	}
	uint32_t bits_written = min<uint32_t>(written_bytes, sizeof(message.initialised)) * 8;
	auto bit_set = [&](uint32_t i) {
		return i < bits_written && (message.initialised[i / 8] >> (i % 8)) & 1;
	};
	PageRun run = {0, 0, kPageRunDeviceInitialised};
	auto flush = [&] {
		if (run.count) {
			os_.balloon_list_mark_initialised(run);
			counters_.wire_pages_device_initialised.add(run.count *
								    wire_pages_per_page_);
		}
		run.count = 0;
	};

	if (chunked()) {
		for (uint32_t i = 0; i < message.count; i++) {
			const bool beyond_trusted =
				!rules::range_bits_count_below_used_length_only() &&
				(message.initialised[i / 8] >> (i % 8)) & 1;
			if (!bit_set(i) && !beyond_trusted)
				continue;
			PageRun chunk = {message.chunks[i].phys_addr >> page_shift_,
					 message.chunks[i].len >> page_shift_, kPageRunDeviceInitialised};
			os_.balloon_list_mark_initialised(chunk);
			counters_.wire_pages_device_initialised.add(chunk.count *
								    wire_pages_per_page_);
		}
		return;
	}
	for (uint32_t i = 0; i < message.count; i += wire_pages_per_page_) {
		bool whole_page = true;
		for (uint32_t j = 0; j < wire_pages_per_page_; j++)
			whole_page = whole_page && bit_set(i + j);
		uint64_t pfn = message.wire_pfns[i] / wire_pages_per_page_;
		if (whole_page && run.count && run.first_pfn + run.count == pfn) {
			run.count++;
		} else {
			flush();
			if (whole_page)
				run = {pfn, 1, kPageRunDeviceInitialised};
		}
	}
	flush();
}

} // namespace vb

#endif
