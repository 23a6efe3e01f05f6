// SPDX-License-Identifier: GPL-2.0
//
// Telling the host: messages on inflateq or deflateq, several in flight at once. A message
// is a PFN array (the standard format) or, with VB_F_X_CHUNKED, a chain of chunk
// descriptors; with VB_F_X_INIT_ON_INFLATE an inflate message also carries a bitmap the
// device fills in.
#ifndef VBALLOON_CORE_BALLOON_TELL_HOST_H
#define VBALLOON_CORE_BALLOON_TELL_HOST_H

#include "vballoon/core/balloon.h"

namespace vb {

template <BalloonOs Os> bool Balloon<Os>::tell_host(QueueKind queue, const PageRun* runs, size_t run_count)
{
	constexpr uint32_t kAllSlots = (1u << kMessagesInFlight) - 1;
	PfnPacker pfn_packer(runs, run_count, traits_.page_shift);
	ChunkPacker chunk_packer(runs, run_count, traits_.page_shift);
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
				Message& message = messages_[packed_slot];
				message.count = chunked() ? chunk_packer.pack(message.chunks, chunks_per_message_)
							  : pfn_packer.pack(message.pfns, kPfnsPerMessage);
			}
			if (!add_message(queue, messages_[packed_slot]))
				break; // ring full: wait for the device to return one
			in_flight |= 1u << packed_slot;
			packed_slot = -1;
			added = true;
			if (queue == QueueKind::kInflate)
				counters_.inflate_messages.add(1);
			else
				counters_.deflate_messages.add(1);
		}
		if (added)
			os_.queue_kick(queue);
		if (queue == QueueKind::kDeflate && VB_MUTANT(OP10_DEFLATE_ACK_NOT_AWAITED))
			break;
		if (queue == QueueKind::kInflate && VB_MUTANT(OP13_INFLATE_ACK_NOT_AWAITED))
			break;
		if (!in_flight)
			break;
		if (!wait_for_ack(queue, &in_flight))
			return false;
	}
	if (packed_slot >= 0 || !all_packed()) {
		// Nothing in flight and still no room: the queue is broken (or the device reset).
		counters_.queue_failures.add(1);
		log(LogLevel::kError, "vballoon: queue %u refused a buffer with nothing in flight\n",
		    static_cast<unsigned>(queue));
		return false;
	}
	return true;
}

template <BalloonOs Os> bool Balloon<Os>::add_message(QueueKind queue, Message& message)
{
	Segment pfn_array = {os_.phys_addr(message.pfns), message.count * VB_PFN_ENTRY_BYTES};
	const Segment* out = chunked() ? message.chunks : &pfn_array;
	unsigned out_count = chunked() ? message.count : 1;
	Segment bitmap = {os_.phys_addr(message.initialised), (message.count + 7) / 8};
	bool wants_bitmap = queue == QueueKind::kInflate && negotiated(VB_F_X_INIT_ON_INFLATE);

	if (wants_bitmap)
		fill_bytes(message.initialised, 0, bitmap.len);
	return os_.queue_add(queue, out, out_count, &bitmap, wants_bitmap ? 1 : 0, &message);
}

template <BalloonOs Os> bool Balloon<Os>::wait_for_ack(QueueKind queue, uint32_t* in_flight)
{
	uint32_t len;
	void* token = os_.queue_wait_used(queue, &len);

	if (!token) {
		// The OS gave up on the queue (device reset or removal): nothing more will come back.
		counters_.queue_failures.add(1);
		*in_flight = 0;
		return false;
	}
	for (uint32_t slot = 0; slot < kMessagesInFlight; slot++) {
		if (token == &messages_[slot] && (*in_flight & (1u << slot))) {
			*in_flight &= ~(1u << slot);
			if (queue == QueueKind::kInflate && negotiated(VB_F_X_INIT_ON_INFLATE))
				record_device_initialised(messages_[slot], len);
			return true;
		}
	}
	counters_.foreign_used_buffers.add(1);
	log(LogLevel::kWarning, "vballoon: device returned a buffer it was not given on queue %u\n",
	    static_cast<unsigned>(queue));
	return true;
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
