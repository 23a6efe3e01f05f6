// SPDX-License-Identifier: GPL-2.0
#include "support/raw_ring.h"

#include <stdexcept>

namespace vbsim::test
{

namespace
{

void require(bool ok)
{
	if (!ok)
		throw std::runtime_error("RawRing: access outside guest RAM");
}

} // namespace

RawRing::RawRing(GuestMemory& memory, const QueueAreas& areas, uint16_t size)
    : memory_(memory), layout_(areas, size)
{
	require(memory_.fill(areas.desc_gpa, 0, vb_vring_desc_bytes(size)));
	require(memory_.fill(areas.avail_gpa, 0, vb_vring_avail_bytes(size)));
	require(memory_.fill(areas.used_gpa, 0, vb_vring_used_bytes(size)));
}

void RawRing::set_descriptor(uint16_t index, uint64_t addr, uint32_t len, uint16_t flags,
			     uint16_t next)
{
	write_descriptor_at(layout_.descriptor(index), addr, len, flags, next);
}

void RawRing::write_descriptor_at(uint64_t gpa, uint64_t addr, uint32_t len, uint16_t flags,
				  uint16_t next)
{
	require(memory_.write_le(gpa, addr) && memory_.write_le(gpa + 8, len) &&
		memory_.write_le(gpa + 12, flags) && memory_.write_le(gpa + 14, next));
}

void RawRing::offer(uint16_t head)
{
	require(memory_.write_le(layout_.avail_slot(avail_idx_), head));
	set_avail_idx(static_cast<uint16_t>(avail_idx_ + 1));
}

void RawRing::set_avail_idx(uint16_t idx)
{
	avail_idx_ = idx;
	require(memory_.store_le16_release(layout_.avail_idx(), idx));
}

void RawRing::set_avail_flags(uint16_t flags)
{
	require(memory_.store_le16_release(layout_.avail_flags(), flags));
}

void RawRing::set_used_event(uint16_t value)
{
	require(memory_.store_le16_release(layout_.used_event(), value));
}

uint16_t RawRing::used_idx() const
{
	uint16_t value = 0;
	require(memory_.load_le16_acquire(layout_.used_idx(), &value));
	return value;
}

UsedElement RawRing::used(uint16_t ring_idx) const
{
	UsedElement element{};
	require(memory_.read_le(layout_.used_slot(ring_idx), &element.id) &&
		memory_.read_le(layout_.used_slot(ring_idx) + 4, &element.len));
	return element;
}

uint16_t RawRing::used_flags() const
{
	uint16_t value = 0;
	require(memory_.load_le16_acquire(layout_.used_flags(), &value));
	return value;
}

uint16_t RawRing::avail_event() const
{
	uint16_t value = 0;
	require(memory_.load_le16_acquire(layout_.avail_event(), &value));
	return value;
}

} // namespace vbsim::test
