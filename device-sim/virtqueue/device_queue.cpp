// SPDX-License-Identifier: GPL-2.0
#include "virtqueue/device_queue.h"

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "memory/guest_memory.h"
#include "vballoon/support/mutant.h"

namespace vbsim
{

namespace
{

// Largest total length of one chain: "Drivers MUST NOT add a descriptor chain longer than
// 2^32 bytes in total" (virtio 1.x 2.7.13.1); the used length field is 32 bits.
constexpr uint64_t kChainBytesMax = UINT32_MAX;

} // namespace

DeviceQueue::DeviceQueue(GuestMemory& memory, const Config& config, QueueCounters& counters)
    : memory_(memory), layout_(config.areas, config.size), counters_(counters),
      event_idx_(config.event_idx), indirect_desc_(config.indirect_desc)
{
	if (check_queue_areas(memory, config.areas, config.size) != QueueAreaError::kNone)
		throw std::invalid_argument("DeviceQueue: queue areas were not validated");
	head_in_flight_.assign(config.size, false);
	direct_visit_stamp_.assign(config.size, 0);
	indirect_visit_stamp_.assign(config.size, 0);
}

DeviceQueue::PopStatus DeviceQueue::pop(DescriptorChain& chain)
{
	if (broken_)
		return PopStatus::kBroken;

	const uint16_t avail_idx = load_avail_idx();
	const uint16_t pending = static_cast<uint16_t>(avail_idx - last_avail_idx_);
	if (pending > size()) {
		broken_ = true;
		reject(RingRejection::kAvailIdxJump);
		return PopStatus::kBroken;
	}
	if (pending == 0)
		return PopStatus::kEmpty;

	uint16_t head = 0;
	if (!memory_.read_le(layout_.avail_slot(last_avail_idx_), &head))
		throw std::logic_error("DeviceQueue: avail ring outside RAM after validation");
	++last_avail_idx_;
	// With EVENT_IDX the driver kicks when it publishes the entry we will read next.
	if (event_idx_)
		store_avail_event(last_avail_idx_);

	if (head >= size()) {
		reject(RingRejection::kHeadIndexOutOfRange);
		return PopStatus::kRejected;
	}
	if (head_in_flight_[head]) {
		reject(RingRejection::kHeadAlreadyInFlight);
		return PopStatus::kRejected;
	}

	chain.clear();
	chain.head = head;
	mark_in_flight(head);
	if (const auto reason = walk_chain(head, chain)) {
		reject(*reason);
		chain.clear();
		push_used(head, 0);
		return PopStatus::kRejected;
	}
	counters_.chains_popped.fetch_add(1, std::memory_order_relaxed);
	return PopStatus::kChain;
}

std::optional<RingRejection> DeviceQueue::walk_chain(uint16_t head, DescriptorChain& chain)
{
	const uint32_t stamp = next_walk_stamp();
	bool seen_writable = false;
	uint16_t index = head;
	// Every descriptor is visited at most once, so the walk ends within `size` steps
	// whatever the driver wrote: a chain longer than the queue must contain a loop.
	for (;;) {
		if (direct_visit_stamp_[index] == stamp)
			return RingRejection::kDescriptorLoop;
		direct_visit_stamp_[index] = stamp;

		const vb_vring_desc desc = read_descriptor(layout_.descriptor(index));
		if (desc.flags & VB_VRING_DESC_F_INDIRECT) {
			if (!indirect_desc_)
				return RingRejection::kIndirectNotNegotiated;
			if (desc.flags & VB_VRING_DESC_F_NEXT)
				return RingRejection::kIndirectWithNext;
			// Drivers (Linux, Windows, FreeBSD) only put a table at the head; the spec
			// does not say what a table after direct descriptors means, so refuse it.
			if (index != head)
				return RingRejection::kIndirectNotAtHead;
			return walk_indirect_table(desc, chain, seen_writable);
		}
		const bool writable = (desc.flags & VB_VRING_DESC_F_WRITE) != 0;
		if (const auto reason = add_buffer(desc, writable, chain, seen_writable))
			return reason;
		if (!(desc.flags & VB_VRING_DESC_F_NEXT))
			return std::nullopt;
		if (desc.next >= size())
			return RingRejection::kNextIndexOutOfRange;
		index = desc.next;
	}
}

std::optional<RingRejection> DeviceQueue::walk_indirect_table(const vb_vring_desc& table,
							      DescriptorChain& chain,
							      bool& seen_writable)
{
	if (table.len == 0 || table.len % RingLayout::kDescriptorBytes != 0)
		return RingRejection::kIndirectBadLength;
	const uint32_t entries = table.len / RingLayout::kDescriptorBytes;
	// "A driver MUST NOT create a descriptor chain longer than the Queue Size of the
	// device" (2.7.5.3.1); a table is part of its chain.
	if (entries > size())
		return RingRejection::kChainTooLong;
	if (!memory_.contains(table.addr, table.len))
		return RingRejection::kIndirectTableOutsideRam;

	const uint32_t stamp = walk_stamp_;
	uint16_t index = 0;
	for (;;) {
		if (indirect_visit_stamp_[index] == stamp)
			return RingRejection::kDescriptorLoop;
		indirect_visit_stamp_[index] = stamp;

		const vb_vring_desc desc =
			read_descriptor(table.addr + RingLayout::kDescriptorBytes * index);
		if (desc.flags & VB_VRING_DESC_F_INDIRECT)
			return RingRejection::kIndirectNested;
		const bool writable = (desc.flags & VB_VRING_DESC_F_WRITE) != 0;
		if (const auto reason = add_buffer(desc, writable, chain, seen_writable))
			return reason;
		if (!(desc.flags & VB_VRING_DESC_F_NEXT))
			return std::nullopt;
		if (desc.next >= entries)
			return RingRejection::kNextIndexOutOfRange;
		index = desc.next;
	}
}

std::optional<RingRejection> DeviceQueue::add_buffer(const vb_vring_desc& desc, bool writable,
						     DescriptorChain& chain, bool& seen_writable)
{
	vb_vring_desc checked = desc;
	// A device-readable buffer that starts in RAM and runs past its end cut short at the
	// end instead of refused: the chain would then name less than the driver wrote.
	if (VB_MUTANT(XCH_DEV_RANGE_PAST_RAM_CLAMPED) && !writable && desc.addr < memory_.size() &&
	    !memory_.contains(desc.addr, desc.len))
		checked.len = static_cast<uint32_t>(memory_.size() - desc.addr);
	if (!memory_.contains(checked.addr, checked.len))
		return RingRejection::kBufferOutsideRam;
	if (writable) {
		seen_writable = true;
		chain.writable.push_back({desc.addr, desc.len});
		chain.writable_bytes += desc.len;
	} else {
		// "The driver MUST place any device-writable descriptor elements after any
		// device-readable descriptor elements" (2.7.4.2).
		if (seen_writable)
			return RingRejection::kReadableAfterWritable;
		chain.readable.push_back({checked.addr, checked.len});
		chain.readable_bytes += checked.len;
	}
	if (chain.readable_bytes + chain.writable_bytes > kChainBytesMax)
		return RingRejection::kChainBytesOverflow;
	return std::nullopt;
}

vb_vring_desc DeviceQueue::read_descriptor(uint64_t gpa) const
{
	// One copy of the whole descriptor: later checks and uses see the same values even if
	// the driver rewrites the descriptor meanwhile.
	vb_vring_desc wire;
	if (!memory_.read(gpa, &wire, sizeof(wire)))
		throw std::logic_error("DeviceQueue: descriptor outside RAM after validation");
	vb_vring_desc desc;
	desc.addr = from_le(wire.addr);
	desc.len = from_le(wire.len);
	desc.flags = from_le(wire.flags);
	desc.next = from_le(wire.next);
	return desc;
}

void DeviceQueue::push_used(uint16_t head, uint32_t written_bytes)
{
	if (head >= size() || !head_in_flight_[head])
		throw std::logic_error("DeviceQueue: pushing a chain the device does not hold");
	head_in_flight_[head] = false;
	--in_flight_count_;

	const uint64_t slot = layout_.used_slot(used_idx_);
	const bool written = memory_.write_le<uint32_t>(slot, head) &&
			     memory_.write_le<uint32_t>(slot + 4, written_bytes);
	++used_idx_;
	// The element must be visible before the index that publishes it.
	if (!written || !memory_.store_le16_release(layout_.used_idx(), used_idx_))
		throw std::logic_error("DeviceQueue: used ring outside RAM after validation");
	counters_.used_pushed.fetch_add(1, std::memory_order_relaxed);
}

bool DeviceQueue::needs_interrupt()
{
	// The used idx store must be globally visible before we read what the driver asked
	// for; the driver orders the other way round (store used_event/flags, fence, read idx).
	std::atomic_thread_fence(std::memory_order_seq_cst);
	const uint16_t old_used = signalled_used_;
	signalled_used_ = used_idx_;
	if (old_used == used_idx_)
		return false;

	uint16_t value = 0;
	bool wanted;
	if (event_idx_) {
		if (!memory_.load_le16_acquire(layout_.used_event(), &value))
			throw std::logic_error(
				"DeviceQueue: avail ring outside RAM after validation");
		wanted = vb_vring_need_event(value, used_idx_, old_used) != 0;
	} else {
		if (!memory_.load_le16_acquire(layout_.avail_flags(), &value))
			throw std::logic_error(
				"DeviceQueue: avail ring outside RAM after validation");
		wanted = (value & VB_VRING_AVAIL_F_NO_INTERRUPT) == 0;
	}
	if (!wanted)
		counters_.interrupts_suppressed.fetch_add(1, std::memory_order_relaxed);
	return wanted;
}

void DeviceQueue::disable_notifications()
{
	// With EVENT_IDX, not advancing avail_event is the suppression.
	if (!event_idx_)
		store_used_flags(VB_VRING_USED_F_NO_NOTIFY);
}

bool DeviceQueue::enable_notifications()
{
	if (broken_)
		return false;
	if (event_idx_)
		store_avail_event(last_avail_idx_);
	else
		store_used_flags(0);
	// Pairs with the driver's fence between publishing avail idx and reading our
	// flags/avail_event: either it sees notifications enabled, or we see its entry here.
	std::atomic_thread_fence(std::memory_order_seq_cst);
	return load_avail_idx() != last_avail_idx_;
}

uint16_t DeviceQueue::load_avail_idx() const
{
	uint16_t value = 0;
	if (!memory_.load_le16_acquire(layout_.avail_idx(), &value))
		throw std::logic_error("DeviceQueue: avail ring outside RAM after validation");
	return value;
}

void DeviceQueue::store_used_flags(uint16_t flags)
{
	if (!memory_.store_le16_release(layout_.used_flags(), flags))
		throw std::logic_error("DeviceQueue: used ring outside RAM after validation");
}

void DeviceQueue::store_avail_event(uint16_t value)
{
	if (!memory_.store_le16_release(layout_.avail_event(), value))
		throw std::logic_error("DeviceQueue: used ring outside RAM after validation");
}

void DeviceQueue::reject(RingRejection reason)
{
	counters_.rejected[static_cast<size_t>(reason)].fetch_add(1, std::memory_order_relaxed);
}

void DeviceQueue::mark_in_flight(uint16_t head)
{
	head_in_flight_[head] = true;
	++in_flight_count_;
}

uint32_t DeviceQueue::next_walk_stamp()
{
	if (++walk_stamp_ == 0) {
		// After 2^32 walks the stamps wrap: forget every old visit once.
		std::fill(direct_visit_stamp_.begin(), direct_visit_stamp_.end(), 0);
		std::fill(indirect_visit_stamp_.begin(), indirect_visit_stamp_.end(), 0);
		walk_stamp_ = 1;
	}
	return walk_stamp_;
}

} // namespace vbsim
