// SPDX-License-Identifier: GPL-2.0
//
// Where each field of a split virtqueue lives in guest RAM (virtio 1.x, 2.7), computed
// from spec/virtio_ring.h. Both ends of a ring (DriverRing and DeviceQueue) address the
// ring only through this, so they cannot disagree about the layout.
#ifndef VBSIM_VIRTQUEUE_RING_LAYOUT_H
#define VBSIM_VIRTQUEUE_RING_LAYOUT_H

#include <cstdint>
#include <string_view>

#include "vballoon/spec/virtio_ring.h"

namespace vbsim
{

class GuestMemory;

// The three areas of one queue, as the driver tells the transport.
struct QueueAreas {
	uint64_t desc_gpa = 0;
	uint64_t avail_gpa = 0;
	uint64_t used_gpa = 0;
};

class RingLayout
{
public:
	static constexpr uint64_t kDescriptorBytes = sizeof(vb_vring_desc);
	static constexpr uint64_t kUsedElemBytes = sizeof(vb_vring_used_elem);

	RingLayout(const QueueAreas& areas, uint16_t size) : areas_(areas), size_(size) {}

	uint16_t size() const { return size_; }
	const QueueAreas& areas() const { return areas_; }

	uint64_t descriptor(uint32_t index) const
	{
		return areas_.desc_gpa + kDescriptorBytes * index;
	}

	uint64_t avail_flags() const { return areas_.avail_gpa; }
	uint64_t avail_idx() const { return areas_.avail_gpa + 2; }
	uint64_t avail_slot(uint16_t ring_idx) const
	{
		return areas_.avail_gpa + 4 + 2ull * (ring_idx % size_);
	}
	uint64_t used_event() const { return areas_.avail_gpa + vb_vring_used_event_offset(size_); }

	uint64_t used_flags() const { return areas_.used_gpa; }
	uint64_t used_idx() const { return areas_.used_gpa + 2; }
	uint64_t used_slot(uint16_t ring_idx) const
	{
		return areas_.used_gpa + 4 + kUsedElemBytes * (ring_idx % size_);
	}
	uint64_t avail_event() const
	{
		return areas_.used_gpa + vb_vring_avail_event_offset(size_);
	}

private:
	QueueAreas areas_;
	uint16_t size_;
};

// The three areas packed one after another from `base_gpa`, each at its alignment; the
// used ring at `used_align` (VB_VRING_USED_ALIGN for virtio 1.x, 4096 for legacy layouts).
QueueAreas contiguous_queue_areas(uint64_t base_gpa, uint16_t size,
				  uint64_t used_align = VB_VRING_USED_ALIGN);

enum class QueueAreaError : uint8_t {
	kNone,
	kSizeInvalid, // zero, not a power of two, or above the split-ring maximum
	kMisaligned,  // an area below the alignment virtio 1.x requires
	kOutsideRam,  // an area (including the event-index fields) not fully inside RAM
	kOverlapping, // the used ring overlaps what the device reads: its own writes would feed it
};

std::string_view to_string(QueueAreaError error);

// Whether a driver-supplied queue can be used as is: checked once when the queue is set
// up, so that every later ring access stays inside RAM without re-checking.
QueueAreaError check_queue_areas(const GuestMemory& memory, const QueueAreas& areas, uint32_t size);

} // namespace vbsim

#endif
