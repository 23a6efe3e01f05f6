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
// chunks per message), up to kMessagesInFlight at once, and returns once nothing is in
// flight. `on_acknowledged(PageRun)` runs for the pages of each message as the device
// returns it, before the device-initialised bits of that message are recorded (unless
// `bits` says the pages are not on the balloon list); the pages
// of messages that were refused or lost come back in the reply. Called with the balloon
// lock held.
template <BalloonOs Os>
template <class OnAcknowledged>
HostReply Balloon<Os>::tell_host(QueueKind queue, const PageRun* runs, size_t run_count,
				 OnAcknowledged&& on_acknowledged, InitialisedBits bits)
{
	constexpr uint32_t kAllSlots = (1u << kMessagesInFlight) - 1;
	HostReply reply;
	uint64_t total_pages = 0;
	for (size_t i = 0; i < run_count; i++)
		total_pages += runs[i].count;

	// A message that can never fit is never tried: no chain is longer than its ring.
	if (descriptors_per_message(queue, 1) > ring_size(queue)) {
		reply.refused = true;
		reply.never_sent = {{}, total_pages};
		counters_.queue_failures.add(1);
		if (refused_log_.allow())
			log(LogLevel::kError,
			    "vballoon: queue %u has %u descriptors, a message needs %u (%llu times)\n",
			    static_cast<unsigned>(queue), ring_size(queue),
			    descriptors_per_message(queue, 1),
			    static_cast<unsigned long long>(refused_log_.occurrences()));
		return reply;
	}

	PfnPacker pfn_packer(runs, run_count, traits_.page_shift);
	ChunkPacker chunk_packer(runs, run_count, traits_.page_shift);
	RunCursor packed_end; // where the next message starts
	uint64_t sent_pages = 0;
	uint32_t in_flight = 0;
	int packed_slot = -1; // a message packed but not yet accepted by the queue
	auto all_packed = [&] { return chunked() ? chunk_packer.done() : pfn_packer.done(); };

	for (;;) {
		bool added = false;

		for (;;) {
			if (packed_slot < 0) {
				if (all_packed() || in_flight == kAllSlots)
					break;
				packed_slot = __builtin_ctz(~in_flight);
				pack_message(messages_[packed_slot], queue, runs, &packed_end,
					     pfn_packer, chunk_packer);
			}
			if (!add_message(queue, messages_[packed_slot]))
				break; // ring full: wait for the device to return one
			in_flight |= 1u << packed_slot;
			sent_pages += messages_[packed_slot].span.pages;
			packed_slot = -1;
			added = true;
			if (queue == QueueKind::kInflate)
				counters_.inflate_messages.add(1);
			else
				counters_.deflate_messages.add(1);
		}
		if (added)
			os_.queue_kick(queue);
		if (!in_flight)
			break;

		uint32_t len;
		void* token = os_.queue_wait_used(queue, &len);
		if (!token) {
			// The OS gave up on the queue (device reset or removal): nothing in flight
			// will come back, and the host will not say what it did with it.
			reply.device_gone = true;
			for (uint32_t slot = 0; slot < kMessagesInFlight; slot++) {
				if (in_flight & (1u << slot))
					reply.lost[reply.lost_count++] = messages_[slot].span;
			}
			in_flight = 0;
			break;
		}
		const int slot = slot_of(token, in_flight);
		if (slot < 0) {
			counters_.foreign_used_buffers.add(1);
			if (foreign_log_.allow())
				log(LogLevel::kWarning,
				    "vballoon: device returned a buffer it was not given on queue %u "
				    "(%llu times)\n",
				    static_cast<unsigned>(queue),
				    static_cast<unsigned long long>(foreign_log_.occurrences()));
			continue;
		}
		in_flight &= ~(1u << slot);
		for_each_part(runs, messages_[slot].span, on_acknowledged);
		if (carries_bitmap(queue) && bits == InitialisedBits::kRecord)
			record_device_initialised(messages_[slot], len);
	}

	// Messages go out in the order of the runs: what was not sent is one span at the end.
	reply.never_sent = {advance(runs, {}, sent_pages), total_pages - sent_pages};
	if (reply.never_sent.pages && !reply.device_gone)
		reply.refused = true;
	if (!reply.all_acknowledged()) {
		counters_.queue_failures.add(1);
		if (refused_log_.allow())
			log(LogLevel::kError,
			    "vballoon: queue %u: %llu of %llu pages not acknowledged (%s, %llu "
			    "times)\n",
			    static_cast<unsigned>(queue),
			    static_cast<unsigned long long>(total_pages - sent_pages +
							    lost_pages(reply)),
			    static_cast<unsigned long long>(total_pages),
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
	for (uint32_t slot = 0; slot < kMessagesInFlight; slot++) {
		if (token == &messages_[slot] && (in_flight & (1u << slot)))
			return static_cast<int>(slot);
	}
	return -1;
}

template <BalloonOs Os>
void Balloon<Os>::pack_message(Message& message, QueueKind queue, const PageRun* runs,
			       RunCursor* packed_end, PfnPacker& pfn_packer,
			       ChunkPacker& chunk_packer)
{
	uint64_t pages = 0;

	if (chunked()) {
		message.count = chunk_packer.pack(message.chunks, chunks_per_message(queue));
		for (uint32_t i = 0; i < message.count; i++)
			pages += message.chunks[i].len >> traits_.page_shift;
	} else {
		message.count = pfn_packer.pack(message.pfns, kPfnsPerMessage);
		pages = message.count / pfns_per_page_;
	}
	message.span = {*packed_end, pages};
	*packed_end = advance(runs, *packed_end, pages);
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
