// SPDX-License-Identifier: GPL-2.0
//
// Telling the host: PFN messages on inflateq or deflateq, several in flight at once.
#ifndef VBALLOON_CORE_BALLOON_TELL_HOST_H
#define VBALLOON_CORE_BALLOON_TELL_HOST_H

#include "vballoon/core/balloon.h"

namespace vb {

template <BalloonOs Os> bool Balloon<Os>::tell_host(QueueKind queue, const PageRun* runs, size_t run_count)
{
	constexpr uint32_t kAllSlots = (1u << kMessagesInFlight) - 1;
	PfnPacker packer(runs, run_count, traits_.page_shift);
	uint32_t in_flight = 0;
	int packed_slot = -1; // a message packed but not yet accepted by the queue

	for (;;) {
		bool added = false;

		for (;;) {
			if (packed_slot < 0) {
				if (packer.done() || in_flight == kAllSlots)
					break;
				packed_slot = __builtin_ctz(~in_flight);
				messages_[packed_slot].count =
					packer.pack(messages_[packed_slot].pfns, kPfnsPerMessage);
			}
			PfnMessage& message = messages_[packed_slot];
			Segment out = {os_.phys_addr(message.pfns), message.count * VB_PFN_ENTRY_BYTES};
			if (!os_.queue_add(queue, &out, 1, nullptr, 0, &message))
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
		if (!in_flight)
			break;
		if (!wait_for_ack(queue, &in_flight))
			return false;
	}
	if (packed_slot >= 0 || !packer.done()) {
		// Nothing in flight and still no room: the queue is broken (or the device reset).
		counters_.queue_failures.add(1);
		log(LogLevel::kError, "vballoon: queue %u refused a buffer with nothing in flight\n",
		    static_cast<unsigned>(queue));
		return false;
	}
	return true;
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
			return true;
		}
	}
	counters_.foreign_used_buffers.add(1);
	log(LogLevel::kWarning, "vballoon: device returned a buffer it was not given on queue %u\n",
	    static_cast<unsigned>(queue));
	return true;
}

} // namespace vb

#endif
