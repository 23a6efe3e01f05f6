/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The split virtqueue (virtio 1.x, 2.7) as code: the three areas, their alignment and
 * size, and the event-index arithmetic. All fields are little-endian on the wire.
 *
 *   descriptor table  16 bytes per entry, 16-byte aligned
 *   available ring    le16 flags, le16 idx, le16 ring[size], le16 used_event; 2-byte aligned
 *   used ring         le16 flags, le16 idx, {le32 id, le32 len} ring[size], le16 avail_event;
 *                     4-byte aligned
 */
#ifndef VBALLOON_SPEC_VIRTIO_RING_H
#define VBALLOON_SPEC_VIRTIO_RING_H

#if defined(__KERNEL__) && !defined(__cplusplus)
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif

#define VB_VRING_DESC_F_NEXT 1u
#define VB_VRING_DESC_F_WRITE 2u
#define VB_VRING_DESC_F_INDIRECT 4u

#define VB_VRING_AVAIL_F_NO_INTERRUPT 1u
#define VB_VRING_USED_F_NO_NOTIFY 1u

/* The largest queue the split format allows. */
#define VB_VRING_SIZE_MAX 32768u

#define VB_VRING_DESC_ALIGN 16u
#define VB_VRING_AVAIL_ALIGN 2u
#define VB_VRING_USED_ALIGN 4u
/* Legacy (pre-1.0) devices put the used ring on the next 4096-byte boundary. */
#define VB_VRING_LEGACY_ALIGN 4096u

struct vb_vring_desc {
	uint64_t addr; /* guest-physical */
	uint32_t len;
	uint16_t flags;
	uint16_t next;
};

struct vb_vring_avail {
	uint16_t flags;
	uint16_t idx;
	uint16_t ring[]; /* then le16 used_event (with EVENT_IDX) */
};

struct vb_vring_used_elem {
	uint32_t id; /* head of the returned chain */
	uint32_t len; /* bytes the device wrote into the chain */
};

struct vb_vring_used {
	uint16_t flags;
	uint16_t idx;
	struct vb_vring_used_elem ring[]; /* then le16 avail_event (with EVENT_IDX) */
};

static inline size_t vb_vring_desc_bytes(unsigned size)
{
	return (size_t)16 * size;
}

/* Includes the trailing used_event field. */
static inline size_t vb_vring_avail_bytes(unsigned size)
{
	return 6 + (size_t)2 * size;
}

/* Includes the trailing avail_event field. */
static inline size_t vb_vring_used_bytes(unsigned size)
{
	return 6 + (size_t)8 * size;
}

/* Offset of used_event inside the available ring. */
static inline size_t vb_vring_used_event_offset(unsigned size)
{
	return 4 + (size_t)2 * size;
}

/* Offset of avail_event inside the used ring. */
static inline size_t vb_vring_avail_event_offset(unsigned size)
{
	return 4 + (size_t)8 * size;
}

static inline size_t vb_align_up(size_t value, size_t align)
{
	return (value + align - 1) & ~(align - 1);
}

/*
 * Total bytes of one queue laid out contiguously (descriptor table, then available ring,
 * then used ring), each area at its alignment; the used ring at `used_align` (4 for
 * virtio 1.x, 4096 for legacy layouts).
 */
static inline size_t vb_vring_total_bytes(unsigned size, size_t used_align)
{
	size_t avail_end = vb_vring_desc_bytes(size) + vb_vring_avail_bytes(size);

	return vb_align_up(avail_end, used_align) + vb_vring_used_bytes(size);
}

/*
 * Event suppression: with EVENT_IDX, the other side wants a notification when the index
 * moves past `event_idx`, i.e. when event_idx is in [old_idx, new_idx) modulo 2^16.
 */
static inline int vb_vring_need_event(uint16_t event_idx, uint16_t new_idx, uint16_t old_idx)
{
	return (uint16_t)(new_idx - event_idx - 1) < (uint16_t)(new_idx - old_idx);
}

static inline int vb_vring_size_valid(unsigned size)
{
	return size != 0 && size <= VB_VRING_SIZE_MAX && (size & (size - 1)) == 0;
}

#endif /* VBALLOON_SPEC_VIRTIO_RING_H */
