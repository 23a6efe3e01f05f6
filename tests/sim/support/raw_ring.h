// SPDX-License-Identifier: GPL-2.0
//
// A hostile driver's pen: writes any value into a split ring in guest RAM, with none of
// DriverRing's care, so tests can hand the device exactly the corruption they want.
#ifndef VBSIM_TESTS_SIM_SUPPORT_RAW_RING_H
#define VBSIM_TESTS_SIM_SUPPORT_RAW_RING_H

#include <cstdint>

#include "memory/guest_memory.h"
#include "virtqueue/ring_layout.h"

namespace vbsim::test
{

struct UsedElement {
	uint32_t id;
	uint32_t len;
};

class RawRing
{
public:
	// Zeroes the ring's areas.
	RawRing(GuestMemory& memory, const QueueAreas& areas, uint16_t size);

	const RingLayout& layout() const { return layout_; }

	// Descriptor `index` of the ring's table (index < size).
	void set_descriptor(uint16_t index, uint64_t addr, uint32_t len, uint16_t flags,
			    uint16_t next);
	// A descriptor anywhere in guest RAM (for indirect tables).
	void write_descriptor_at(uint64_t gpa, uint64_t addr, uint32_t len, uint16_t flags,
				 uint16_t next);
	// Puts `head` in the next avail slot and publishes it.
	void offer(uint16_t head);
	// Publishes an arbitrary avail idx (the slots are not touched).
	void set_avail_idx(uint16_t idx);
	uint16_t avail_idx() const { return avail_idx_; }
	void set_avail_flags(uint16_t flags);
	void set_used_event(uint16_t value);

	uint16_t used_idx() const;
	UsedElement used(uint16_t ring_idx) const;
	uint16_t used_flags() const;
	uint16_t avail_event() const;

private:
	GuestMemory& memory_;
	RingLayout layout_;
	uint16_t avail_idx_ = 0;
};

} // namespace vbsim::test

#endif
