// SPDX-License-Identifier: GPL-2.0
//
// Telling the host: messages on inflateq or deflateq, several in flight at once. A message
// is a PFN array (the standard format) or, with VB_F_X_CHUNKED, a chain of chunk
// descriptors; with VB_F_X_INIT_ON_INFLATE an inflate message also carries a bitmap the
// device fills in. What became of each page is reported per MessageOutcome (host_reply.h).
#ifndef VBALLOON_CORE_BALLOON_TELL_HOST_H
#define VBALLOON_CORE_BALLOON_TELL_HOST_H

#include "vballoon/core/balloon.h"

namespace vb {

// Sends every run, in order, in messages of at most kPfnsPerMessage PFNs (or the queue's
// chunks per message), up to kMessagesInFlight at once (fewer while an inflate holds some
// between its batches), and returns once nothing is in flight. `on_acknowledged(PageRun)`
// runs for the pages of each message as the device returns it, before the
// device-initialised bits of that message are recorded (unless `bits` says the pages are
// not on the balloon list); the pages of messages that were refused or lost come back in
// the reply. Called with the balloon lock held.
template <BalloonOs Os>
template <class OnAcknowledged>
HostReply Balloon<Os>::tell_host(QueueKind queue, const PageRun* runs, size_t run_count,
				 OnAcknowledged&& on_acknowledged, InitialisedBits bits)
{
	Outbox box(queue, runs, traits_.page_shift, free_slots());
	outbox_open(box);
	outbox_extend(box, run_count);
	for (;;) {
		outbox_push(box, on_acknowledged);
		if (queue == QueueKind::kInflate && VB_MUTANT(OP13_INFLATE_ACK_NOT_AWAITED))
			break;
		if (!box.in_flight || !outbox_collect(box, on_acknowledged, bits, true))
			break;
	}
	return outbox_close(box);
}

// A message that can never fit is never tried: no chain is longer than its ring.
template <BalloonOs Os> void Balloon<Os>::outbox_open(Outbox& box)
{
	box.unfit = descriptors_per_message(box.queue, 1) > ring_size(box.queue);
}

// runs[0, run_count) are now the outbox's: those past the previous count are appended.
template <BalloonOs Os> void Balloon<Os>::outbox_extend(Outbox& box, size_t run_count)
{
	for (size_t i = box.run_count; i < run_count; i++)
		box.total_pages += box.runs[i].count;
	box.run_count = run_count;
	box.pfn_packer.extend(run_count);
	box.chunk_packer.extend(run_count);
}

template <BalloonOs Os> bool Balloon<Os>::outbox_all_packed(const Outbox& box) const
{
	return chunked() ? box.chunk_packer.done() : box.pfn_packer.done();
}

template <BalloonOs Os>
template <class OnAcknowledged>
void Balloon<Os>::outbox_push(Outbox& box, OnAcknowledged& on_acknowledged)
{
	const QueueKind queue = box.queue;
	bool added = false;

	while (!box.unfit && !box.device_gone) {
		if (box.packed_slot < 0) {
			const uint32_t free = box.slots & ~box.in_flight;
			if (outbox_all_packed(box) || !free)
				break;
			box.packed_slot = __builtin_ctz(free);
			pack_message(messages_[box.packed_slot], box);
		}
		Message& message = messages_[box.packed_slot];
		if (!add_message(queue, message))
			break; // ring full: wait for the device to return one
		box.in_flight |= 1u << box.packed_slot;
		box.sent_pages += message.span.pages;
		if ((queue == QueueKind::kDeflate && VB_MUTANT(OP10_DEFLATED_PAGES_FREED_BEFORE_ACK)) ||
		    (queue == QueueKind::kInflate && VB_MUTANT(OP13_INFLATE_ACK_NOT_AWAITED)))
			for_each_part(box.runs, message.span, on_acknowledged);
		if (queue == QueueKind::kInflate && VB_MUTANT(OP12_PAGES_WRITTEN_WHILE_INFLATING) &&
		    traits_.initialise_before_inflate && !negotiated(VB_F_X_INIT_ON_INFLATE))
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
bool Balloon<Os>::outbox_collect(Outbox& box, OnAcknowledged& on_acknowledged,
				 InitialisedBits bits, bool wait)
{
	uint32_t len = 0;
	void* token = wait ? os_.queue_wait_used(box.queue, &len) : os_.queue_get_used(box.queue, &len);

	if (!token) {
		if (wait)
			outbox_lose_in_flight(box);
		return false;
	}
	outbox_take(box, token, len, on_acknowledged, bits);
	return true;
}

// The OS gave up on the queue (device reset or removal): nothing in flight will come back,
// and the host will not say what it did with it.
template <BalloonOs Os> void Balloon<Os>::outbox_lose_in_flight(Outbox& box)
{
	box.device_gone = true;
	for (uint32_t slot = 0; slot < kMessageSlots; slot++) {
		if (box.in_flight & (1u << slot))
			box.lost[box.lost_count++] = messages_[slot].span;
	}
	box.in_flight = 0;
}

// The device returned `token`, having written `len` bytes into it.
template <BalloonOs Os>
template <class OnAcknowledged>
void Balloon<Os>::outbox_take(Outbox& box, void* token, uint32_t len,
			      OnAcknowledged& on_acknowledged, InitialisedBits bits)
{
	const QueueKind queue = box.queue;
	const int slot = slot_of(token, box.in_flight);
	if (slot < 0) {
		counters_.foreign_used_buffers.add(1);
		if (foreign_log_.allow())
			log(LogLevel::kWarning,
			    "vballoon: device returned a buffer it was not given on queue %u "
			    "(%llu times)\n",
			    static_cast<unsigned>(queue),
			    static_cast<unsigned long long>(foreign_log_.occurrences()));
		return;
	}
	box.in_flight &= ~(1u << slot);
	if (!(queue == QueueKind::kDeflate && VB_MUTANT(OP10_DEFLATED_PAGES_FREED_BEFORE_ACK)))
		for_each_part(box.runs, messages_[slot].span, on_acknowledged);
	if (carries_bitmap(queue) && bits == InitialisedBits::kRecord)
		record_device_initialised(messages_[slot], len);
}

// Nothing of the outbox is in flight any more: what became of the pages not acknowledged.
template <BalloonOs Os> HostReply Balloon<Os>::outbox_close(Outbox& box)
{
	const QueueKind queue = box.queue;
	HostReply reply;

	reply.device_gone = box.device_gone;
	for (uint32_t i = 0; i < box.lost_count; i++)
		reply.lost[reply.lost_count++] = box.lost[i];
	// Messages go out in the order of the runs: what was not sent is one span at the end.
	reply.never_sent = {advance(box.runs, {}, box.sent_pages), box.total_pages - box.sent_pages};
	if (reply.never_sent.pages && !reply.device_gone)
		reply.refused = true;
	if (box.unfit) {
		counters_.queue_failures.add(1);
		if (refused_log_.allow())
			log(LogLevel::kError,
			    "vballoon: queue %u has %u descriptors, a message needs %u (%llu times)\n",
			    static_cast<unsigned>(queue), ring_size(queue),
			    descriptors_per_message(queue, 1),
			    static_cast<unsigned long long>(refused_log_.occurrences()));
	} else if (!reply.all_acknowledged()) {
		counters_.queue_failures.add(1);
		if (refused_log_.allow())
			log(LogLevel::kError,
			    "vballoon: queue %u: %llu of %llu pages not acknowledged (%s, %llu "
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

template <BalloonOs Os> uint64_t Balloon<Os>::lost_pages(const HostReply& reply)
{
	uint64_t pages = 0;
	for (uint32_t i = 0; i < reply.lost_count; i++)
		pages += reply.lost[i].pages;
	return pages;
}

template <BalloonOs Os> int Balloon<Os>::slot_of(const void* token, uint32_t in_flight) const
{
	for (uint32_t slot = 0; slot < kMessageSlots; slot++) {
		if (token == &messages_[slot] && (in_flight & (1u << slot)))
			return static_cast<int>(slot);
	}
	return -1;
}

template <BalloonOs Os> void Balloon<Os>::pack_message(Message& message, Outbox& box)
{
	uint64_t pages = 0;

	if (chunked()) {
		message.count = box.chunk_packer.pack(message.chunks, chunks_per_message(box.queue));
		for (uint32_t i = 0; i < message.count; i++)
			pages += message.chunks[i].len >> traits_.page_shift;
	} else {
		message.count = box.pfn_packer.pack(message.pfns, kPfnsPerMessage);
		pages = message.count / pfns_per_page_;
	}
	message.span = {box.packed_end, pages};
	box.packed_end = advance(box.runs, box.packed_end, pages);
}

template <BalloonOs Os> bool Balloon<Os>::add_message(QueueKind queue, Message& message)
{
	Segment pfn_array = {os_.phys_addr(message.pfns), message.count * VB_PFN_ENTRY_BYTES};
	const Segment* out = chunked() ? message.chunks : &pfn_array;
	unsigned out_count = chunked() ? message.count : 1;
	Segment bitmap = {os_.phys_addr(message.initialised), (message.count + 7) / 8};
	bool wants_bitmap = carries_bitmap(queue);

	if (wants_bitmap)
		fill_bytes(message.initialised, 0, bitmap.len);
	return os_.queue_add(queue, out, out_count, &bitmap, wants_bitmap ? 1 : 0, &message);
}

// Marks the pages whose bits the device set. A guest page counts only when every 4 KiB
// unit of it is set, and bits beyond what the device says it wrote stay clear.
template <BalloonOs Os>
void Balloon<Os>::record_device_initialised(const Message& message, uint32_t written_bytes)
{
	uint32_t bits_written = min<uint32_t>(written_bytes, sizeof(message.initialised)) * 8;
	auto bit_set = [&](uint32_t i) {
		return i < bits_written && (message.initialised[i / 8] >> (i % 8)) & 1;
	};
	PageRun run = {0, 0, kPageRunDeviceInitialised};
	auto flush = [&] {
		if (run.count) {
			os_.balloon_list_mark_initialised(run);
			counters_.pages_device_initialised.add(run.count * pfns_per_page_);
		}
		run.count = 0;
	};

	if (chunked()) {
		for (uint32_t i = 0; i < message.count; i++) {
			if (!bit_set(i))
				continue;
			PageRun chunk = {message.chunks[i].phys_addr >> traits_.page_shift,
					 message.chunks[i].len >> traits_.page_shift, kPageRunDeviceInitialised};
			os_.balloon_list_mark_initialised(chunk);
			counters_.pages_device_initialised.add(chunk.count * pfns_per_page_);
		}
		return;
	}
	for (uint32_t i = 0; i < message.count; i += pfns_per_page_) {
		bool whole_page = true;
		for (uint32_t j = 0; j < pfns_per_page_; j++)
			whole_page = whole_page && bit_set(i + j);
		uint64_t pfn = message.pfns[i] / pfns_per_page_;
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
