// SPDX-License-Identifier: GPL-2.0
#include "virtqueue/ring_layout.h"

#include "memory/guest_memory.h"

namespace vbsim
{

QueueAreas contiguous_queue_areas(uint64_t base_gpa, uint16_t size, uint64_t used_align)
{
	QueueAreas areas;
	areas.desc_gpa = base_gpa;
	areas.avail_gpa = base_gpa + vb_vring_desc_bytes(size);
	areas.used_gpa =
		base_gpa +
		vb_align_up(vb_vring_desc_bytes(size) + vb_vring_avail_bytes(size), used_align);
	return areas;
}

std::string_view to_string(QueueAreaError error)
{
	switch (error) {
	case QueueAreaError::kNone:
		return "none";
	case QueueAreaError::kSizeInvalid:
		return "size-invalid";
	case QueueAreaError::kMisaligned:
		return "misaligned";
	case QueueAreaError::kOutsideRam:
		return "outside-ram";
	case QueueAreaError::kOverlapping:
		return "overlapping";
	}
	return "unknown";
}

QueueAreaError check_queue_areas(const GuestMemory& memory, const QueueAreas& areas, uint32_t size)
{
	if (!vb_vring_size_valid(size))
		return QueueAreaError::kSizeInvalid;
	if (areas.desc_gpa % VB_VRING_DESC_ALIGN != 0 ||
	    areas.avail_gpa % VB_VRING_AVAIL_ALIGN != 0 ||
	    areas.used_gpa % VB_VRING_USED_ALIGN != 0)
		return QueueAreaError::kMisaligned;
	// The sizes include the event-index fields whether or not EVENT_IDX is negotiated:
	// the spec's area sizes (2.7, "Virtqueue Part ... Size") always count them.
	if (!memory.contains(areas.desc_gpa, vb_vring_desc_bytes(size)) ||
	    !memory.contains(areas.avail_gpa, vb_vring_avail_bytes(size)) ||
	    !memory.contains(areas.used_gpa, vb_vring_used_bytes(size)))
		return QueueAreaError::kOutsideRam;
	// The device writes the used ring and reads the other two. Were they to overlap, the
	// device's own used entries would become new available entries or descriptors, and a
	// hostile driver could keep the device busy forever (found by fuzz_device_queue).
	auto overlaps = [](uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len) {
		return a < b + b_len && b < a + a_len;
	};
	const uint64_t used_len = vb_vring_used_bytes(size);
	if (overlaps(areas.used_gpa, used_len, areas.avail_gpa, vb_vring_avail_bytes(size)) ||
	    overlaps(areas.used_gpa, used_len, areas.desc_gpa, vb_vring_desc_bytes(size)))
		return QueueAreaError::kOverlapping;
	return QueueAreaError::kNone;
}

} // namespace vbsim
