// SPDX-License-Identifier: GPL-2.0
#include "balloon/free_page_hint_queue.h"

#include "memory/guest_memory.h"
#include "virtqueue/device_queue.h"
#include "vballoon/spec/virtio_balloon.h"
#include "vballoon/support/mutant.h"

namespace vbsim
{

bool whole_pages_inside_ram(const GuestMemory& memory, const ChainBuffer& range)
{
	return range.len != 0 && range.phys_addr % GuestMemory::kWirePageBytes == 0 &&
	       range.len % GuestMemory::kWirePageBytes == 0 &&
	       memory.contains(range.phys_addr, range.len);
}

void FreePageHintQueue::receive(DeviceQueue& queue, const DescriptorChain& chain,
				uint32_t config_cmd_id, ByteOrder id_order, FreePageEvents* events)
{
	if (VB_MUTANT(DEV_LEG07_CMD_ID_READ_LITTLE_ENDIAN))
		id_order = ByteOrder::kLittle;
	// A chain is either one id (exactly 4 device-readable bytes) or blocks (device-writable
	// only); anything else is refused whole.
	if (chain.writable.empty() && chain.readable.size() == 1 && chain.readable_bytes == 4) {
		uint32_t wire = 0;
		if (!memory_.read(chain.readable[0].phys_addr, &wire, sizeof(wire)))
			counters_.reject(BalloonRejection::kHintMalformed);
		else
			receive_id(from_wire(wire, id_order), config_cmd_id, events);
	} else if (chain.readable.empty() && !chain.writable.empty()) {
		receive_blocks(chain, config_cmd_id, events);
	} else {
		counters_.reject(BalloonRejection::kHintMalformed);
	}
	// The device writes nothing into hinted pages.
	queue.push_used(chain.head, 0);
}

void FreePageHintQueue::receive_id(uint32_t id, uint32_t config_cmd_id, FreePageEvents* events)
{
	if (id == VB_CMD_ID_STOP) {
		if (active_cmd_id_ != 0) {
			counters_.hint_rounds_stopped.fetch_add(1);
			if (events)
				events->hint_round_stopped(active_cmd_id_);
		}
		active_cmd_id_ = 0;
		return;
	}
	if (id < VB_CMD_ID_MIN_RUN || id != config_cmd_id || id == active_cmd_id_) {
		// DONE is the host's word, not the driver's; an old id is stale; the current
		// id twice breaks the driver's rule of one buffer per id.
		counters_.hint_ids_ignored.fetch_add(1);
		return;
	}
	if (active_cmd_id_ != 0) {
		// A new round without STOP for the last: the last one is over all the same.
		counters_.hint_rounds_stopped.fetch_add(1);
		if (events)
			events->hint_round_stopped(active_cmd_id_);
	}
	active_cmd_id_ = id;
	counters_.hint_rounds_started.fetch_add(1);
	if (events)
		events->hint_round_started(id);
}

void FreePageHintQueue::receive_blocks(const DescriptorChain& chain, uint32_t config_cmd_id,
				       FreePageEvents* events)
{
	// "The device MUST ignore ... hints with a command ID different from the current one."
	const bool in_round = (active_cmd_id_ != 0 && active_cmd_id_ == config_cmd_id) ||
			      VB_MUTANT(DEV_FPH04_HINTS_OUTSIDE_THE_ROUND_USED);
	for (const ChainBuffer& block : chain.writable) {
		if (!whole_pages_inside_ram(memory_, block)) {
			counters_.reject(BalloonRejection::kRangeNotWholePages);
			continue;
		}
		if (!in_round) {
			counters_.wire_pages_hint_ignored.fetch_add(block.len /
								    GuestMemory::kWirePageBytes);
			continue;
		}
		counters_.wire_pages_hinted.fetch_add(block.len / GuestMemory::kWirePageBytes);
		if (events)
			events->pages_hinted(active_cmd_id_, block.phys_addr, block.len);
	}
}

void FreePageHintQueue::reset(FreePageEvents* events)
{
	if (active_cmd_id_ != 0 && events)
		events->hint_round_stopped(active_cmd_id_);
	active_cmd_id_ = 0;
}

} // namespace vbsim
