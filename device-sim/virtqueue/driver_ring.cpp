// SPDX-License-Identifier: GPL-2.0
#include "virtqueue/driver_ring.h"

#include <atomic>
#include <stdexcept>

#include "memory/guest_memory.h"

namespace vbsim
{

uint64_t DriverRing::indirect_area_bytes(uint16_t size, uint16_t table_entries)
{
	return uint64_t{size} * table_entries * RingLayout::kDescriptorBytes;
}

DriverRing::DriverRing(GuestMemory& memory, const Config& config)
    : memory_(memory), layout_(config.areas, config.size), event_idx_(config.event_idx),
      use_indirect_(config.indirect_desc && config.indirect_table_entries >= 2),
      indirect_area_gpa_(config.indirect_area_gpa),
      indirect_table_entries_(config.indirect_table_entries)
{
	if (check_queue_areas(memory, config.areas, config.size) != QueueAreaError::kNone)
		throw std::invalid_argument(
			"DriverRing: queue areas not inside guest RAM or misaligned");
	if (use_indirect_ &&
	    (indirect_area_gpa_ % VB_VRING_DESC_ALIGN != 0 ||
	     !memory.contains(indirect_area_gpa_,
			      indirect_area_bytes(config.size, indirect_table_entries_))))
		throw std::invalid_argument(
			"DriverRing: indirect area not inside guest RAM or misaligned");

	const uint16_t size = config.size;
	if (!memory_.fill(config.areas.desc_gpa, 0, vb_vring_desc_bytes(size)) ||
	    !memory_.fill(config.areas.avail_gpa, 0, vb_vring_avail_bytes(size)) ||
	    !memory_.fill(config.areas.used_gpa, 0, vb_vring_used_bytes(size)))
		throw std::logic_error("DriverRing: zeroing a validated ring failed");

	next_.resize(size);
	for (uint16_t i = 0; i < size; ++i)
		next_[i] = static_cast<uint16_t>(i + 1);
	token_.assign(size, nullptr);
	chain_descriptors_.assign(size, 0);
	chain_writable_bytes_.assign(size, 0);
	num_free_ = size;
}

bool DriverRing::add(const ChainBuffer* out, unsigned n_out, const ChainBuffer* in, unsigned n_in,
		     void* token)
{
	const unsigned total = n_out + n_in;
	if (total == 0 || token == nullptr || broken_)
		return false;
	const bool indirect = use_indirect_ && total >= 2 && total <= indirect_table_entries_;
	const unsigned needed = indirect ? 1 : total;
	if (needed > num_free_)
		return false;

	const uint16_t head = free_head_;
	uint64_t writable_bytes = 0;
	auto segment_at = [&](unsigned i) -> const ChainBuffer& {
		return i < n_out ? out[i] : in[i - n_out];
	};

	if (indirect) {
		// The table for a chain sits in the slot of its head, which no other outstanding
		// chain can use.
		const uint64_t table = indirect_area_gpa_ + uint64_t{head} *
								    indirect_table_entries_ *
								    RingLayout::kDescriptorBytes;
		for (unsigned i = 0; i < total; ++i) {
			const ChainBuffer& segment = segment_at(i);
			uint16_t flags = i + 1 < total ? VB_VRING_DESC_F_NEXT : 0;
			if (i >= n_out) {
				flags |= VB_VRING_DESC_F_WRITE;
				writable_bytes += segment.len;
			}
			write_descriptor(table + RingLayout::kDescriptorBytes * i,
					 segment.phys_addr, segment.len, flags,
					 static_cast<uint16_t>(i + 1));
		}
		write_descriptor(layout_.descriptor(head), table,
				 static_cast<uint32_t>(total * RingLayout::kDescriptorBytes),
				 VB_VRING_DESC_F_INDIRECT, 0);
		free_head_ = next_[head];
	} else {
		uint16_t index = head;
		for (unsigned i = 0; i < total; ++i) {
			const ChainBuffer& segment = segment_at(i);
			uint16_t flags = i + 1 < total ? VB_VRING_DESC_F_NEXT : 0;
			if (i >= n_out) {
				flags |= VB_VRING_DESC_F_WRITE;
				writable_bytes += segment.len;
			}
			write_descriptor(layout_.descriptor(index), segment.phys_addr, segment.len,
					 flags, next_[index]);
			index = next_[index];
		}
		free_head_ = index;
	}
	num_free_ -= needed;
	token_[head] = token;
	chain_descriptors_[head] = static_cast<uint16_t>(needed);
	chain_writable_bytes_[head] = writable_bytes;
	++chains_in_flight_;

	if (!memory_.write_le<uint16_t>(layout_.avail_slot(avail_idx_), head))
		throw std::logic_error("DriverRing: avail ring outside RAM after validation");
	++avail_idx_;
	return true;
}

bool DriverRing::kick_prepare()
{
	const uint16_t old_idx = published_avail_idx_;
	const uint16_t new_idx = avail_idx_;
	if (old_idx == new_idx)
		return false;
	store16(layout_.avail_idx(), new_idx); // release: descriptors and slots first
	published_avail_idx_ = new_idx;
	// The idx store must be visible before we read the device's wishes; the device does
	// the mirror image (store flags/avail_event, fence, read idx), so one of us sees the other.
	std::atomic_thread_fence(std::memory_order_seq_cst);

	uint16_t value = 0;
	if (event_idx_) {
		if (!memory_.load_le16_acquire(layout_.avail_event(), &value))
			throw std::logic_error(
				"DriverRing: used ring outside RAM after validation");
		return vb_vring_need_event(value, new_idx, old_idx) != 0;
	}
	if (!memory_.load_le16_acquire(layout_.used_flags(), &value))
		throw std::logic_error("DriverRing: used ring outside RAM after validation");
	return (value & VB_VRING_USED_F_NO_NOTIFY) == 0;
}

bool DriverRing::has_used() const
{
	return !broken_ && load_used_idx() != last_used_idx_;
}

void* DriverRing::get_used(uint32_t* len)
{
	if (broken_)
		return nullptr;
	const uint16_t used_idx = load_used_idx();
	const uint16_t pending = static_cast<uint16_t>(used_idx - last_used_idx_);
	if (pending == 0)
		return nullptr;
	if (pending > chains_in_flight_) {
		count_device_error(DriverRingError::kUsedIdxJump);
		broken_ = true;
		return nullptr;
	}

	uint32_t id = 0;
	uint32_t written = 0;
	const uint64_t slot = layout_.used_slot(last_used_idx_);
	if (!memory_.read_le(slot, &id) || !memory_.read_le(slot + 4, &written))
		throw std::logic_error("DriverRing: used ring outside RAM after validation");
	++last_used_idx_;
	if (event_idx_ && interrupts_enabled_)
		store16(layout_.used_event(), last_used_idx_);

	if (id >= size()) {
		count_device_error(DriverRingError::kUsedIdOutOfRange);
		return nullptr;
	}
	void* token = token_[id];
	if (token == nullptr) {
		count_device_error(DriverRingError::kUsedIdNotInFlight);
		return nullptr;
	}
	if (written > chain_writable_bytes_[id]) {
		// Keep the buffer (losing it would leak it), but never report more than fits.
		count_device_error(DriverRingError::kUsedLenTooLarge);
		written = static_cast<uint32_t>(chain_writable_bytes_[id]);
	}
	free_chain(static_cast<uint16_t>(id));
	if (len != nullptr)
		*len = written;
	return token;
}

void DriverRing::disable_interrupts()
{
	interrupts_enabled_ = false;
	// With EVENT_IDX, leaving used_event behind is the suppression (at most one more
	// interrupt arrives); the flag is ignored by the device then.
	if (!event_idx_)
		store16(layout_.avail_flags(), VB_VRING_AVAIL_F_NO_INTERRUPT);
}

bool DriverRing::enable_interrupts()
{
	interrupts_enabled_ = true;
	if (event_idx_)
		store16(layout_.used_event(), last_used_idx_);
	else
		store16(layout_.avail_flags(), 0);
	std::atomic_thread_fence(std::memory_order_seq_cst);
	return !has_used();
}

std::vector<void*> DriverRing::detach_unused()
{
	std::vector<void*> tokens;
	for (uint16_t head = 0; head < size(); ++head) {
		if (token_[head] != nullptr) {
			tokens.push_back(token_[head]);
			free_chain(head);
		}
	}
	return tokens;
}

uint64_t DriverRing::device_errors_total() const
{
	uint64_t total = 0;
	for (uint64_t count : device_errors_)
		total += count;
	return total;
}

void DriverRing::write_descriptor(uint64_t gpa, uint64_t addr, uint32_t len, uint16_t flags,
				  uint16_t next)
{
	const vb_vring_desc wire{to_le(addr), to_le(len), to_le(flags), to_le(next)};
	if (!memory_.write(gpa, &wire, sizeof(wire)))
		throw std::logic_error("DriverRing: descriptor outside RAM after validation");
}

void DriverRing::free_chain(uint16_t head)
{
	// Walk our own links, not the table in guest RAM: the device could have scribbled on it.
	uint16_t tail = head;
	for (uint16_t i = 1; i < chain_descriptors_[head]; ++i)
		tail = next_[tail];
	next_[tail] = free_head_;
	free_head_ = head;
	num_free_ += chain_descriptors_[head];
	token_[head] = nullptr;
	chain_descriptors_[head] = 0;
	chain_writable_bytes_[head] = 0;
	--chains_in_flight_;
}

void DriverRing::count_device_error(DriverRingError kind)
{
	++device_errors_[static_cast<size_t>(kind)];
}

uint16_t DriverRing::load_used_idx() const
{
	uint16_t value = 0;
	if (!memory_.load_le16_acquire(layout_.used_idx(), &value))
		throw std::logic_error("DriverRing: used ring outside RAM after validation");
	return value;
}

void DriverRing::store16(uint64_t gpa, uint16_t value)
{
	if (!memory_.store_le16_release(gpa, value))
		throw std::logic_error("DriverRing: ring field outside RAM after validation");
}

} // namespace vbsim
