/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The virtio-balloon protocol (virtio 1.2/1.3, "Traditional Memory Balloon Device") as code.
 *
 * One header for three audiences: the freestanding C++ driver core, the kernel C glue and
 * the userspace simulated device. It therefore uses only fixed-width integer types and
 * plain C; kernel C gets them from <linux/types.h>, everything else from <stdint.h>.
 *
 * Every multi-byte field on the wire is little-endian, including the config space of
 * legacy devices ("unlike the usual convention"). Names carry their unit where one applies.
 */
#ifndef VBALLOON_SPEC_VIRTIO_BALLOON_H
#define VBALLOON_SPEC_VIRTIO_BALLOON_H

#if defined(__KERNEL__) && !defined(__cplusplus)
#include <linux/types.h>
#else
#include <stddef.h>
#include <stdint.h>
#endif

#define VB_VIRTIO_DEVICE_ID_BALLOON 5u

/* ---- Feature bits ------------------------------------------------------------------ */

/* Device-specific bits defined by the spec. */
#define VB_F_MUST_TELL_HOST 0u  /* tell the host (and wait for the ack) before reusing pages */
#define VB_F_STATS_VQ 1u        /* statsq is present */
#define VB_F_DEFLATE_ON_OOM 2u  /* the guest may deflate when it runs out of memory */
#define VB_F_FREE_PAGE_HINT 3u  /* free_page_vq present, free_page_hint_cmd_id valid */
#define VB_F_PAGE_POISON 4u     /* the guest writes poison_val into deflated/reported pages */
#define VB_F_PAGE_REPORTING 5u  /* reporting_vq present */

/*
 * Open proposals (oasis-tcs/virtio-spec issues 244 and 242, as numbered on mst's QEMU and
 * Linux branches). Bit 6 is also claimed by working-set reporting and by a Firecracker
 * fork's HINT_WAIT_ON_ACK, so a driver takes these bits only when told to (the module's
 * device_init parameter); bit 8 is claimed by working-set reporting in crosvm. Our own
 * experimental extensions live at 20-23: device-specific (the spec gives devices bits
 * 0-23), far from the proposals. See spec/experimental.md for their wire format.
 */
#define VB_F_DEVICE_INIT_REPORTED 6u   /* used length of a report: bytes the device zeroed */
#define VB_F_DEVICE_INIT_ON_INFLATE 7u /* inflate requests end in a bitmap of zeroed PFNs */
#define VB_F_X_CHUNKED 20u            /* inflate/deflate carry {address, length} chunks */
#define VB_F_X_INIT_ON_INFLATE 21u    /* discarded pages read back as zero (or poison_val) */
#define VB_F_X_INIT_REPORTED 22u      /* reported pages read back as zero (or poison_val) */
#define VB_F_X_PRESSURE 23u	      /* inflate paced by guest pressure; pressure stats */

/* Transport/ring bits the balloon cares about. */
#define VB_F_RING_INDIRECT_DESC 28u
#define VB_F_RING_EVENT_IDX 29u
#define VB_F_VERSION_1 32u
#define VB_F_ACCESS_PLATFORM 33u

#define VB_FEATURE(bit) (1ull << (bit))

/* ---- Device status (virtio 1.x, 2.1) --------------------------------------------- */

#define VB_STATUS_ACKNOWLEDGE 1u
#define VB_STATUS_DRIVER 2u
#define VB_STATUS_DRIVER_OK 4u
#define VB_STATUS_FEATURES_OK 8u
#define VB_STATUS_NEEDS_RESET 64u
#define VB_STATUS_FAILED 128u

/* ---- Config space ------------------------------------------------------------------ */

/*
 * struct virtio_balloon_config { le32 num_pages; le32 actual;
 *                                le32 free_page_hint_cmd_id; le32 poison_val; }
 * Devices expose a prefix of it: 8 bytes (cloud-hypervisor), 12 (Firecracker), 16 (QEMU
 * with poison). A driver reads a field only when the negotiated features make it valid.
 */
#define VB_CONFIG_NUM_PAGES_OFFSET 0u
#define VB_CONFIG_ACTUAL_OFFSET 4u
#define VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET 8u
#define VB_CONFIG_POISON_VAL_OFFSET 12u
#define VB_CONFIG_SIZE_MIN 8u
#define VB_CONFIG_SIZE_WITH_HINT 12u
#define VB_CONFIG_SIZE_WITH_POISON 16u

/* Reserved free_page_hint_cmd_id values; a real hinting run uses an id >= 2. */
#define VB_CMD_ID_STOP 0u
#define VB_CMD_ID_DONE 1u
#define VB_CMD_ID_MIN_RUN 2u

/* ---- Page frame numbers ------------------------------------------------------------ */

/* A balloon PFN is always guest-physical address >> 12, whatever the guest page size. */
#define VB_PFN_SHIFT 12u
#define VB_PFN_UNIT_BYTES 4096u
/* 32-bit PFNs address at most 16 TiB of guest memory. */
#define VB_PFN_MAX 0xffffffffull
/*
 * Peers cap an inflate/deflate descriptor at 256 PFNs (1 KiB): cloud-hypervisor rejects
 * larger ones, Firecracker skips them. A driver talking to a standard device stays within it.
 */
#define VB_PFNS_PER_DESCRIPTOR_MAX 256u
#define VB_PFN_ENTRY_BYTES 4u

/* ---- Memory statistics (statsq) ---------------------------------------------------- */

#define VB_S_SWAP_IN 0u        /* bytes */
#define VB_S_SWAP_OUT 1u       /* bytes */
#define VB_S_MAJFLT 2u         /* count */
#define VB_S_MINFLT 3u         /* count */
#define VB_S_MEMFREE 4u        /* bytes */
#define VB_S_MEMTOT 5u         /* bytes */
#define VB_S_AVAIL 6u          /* bytes */
#define VB_S_CACHES 7u         /* bytes */
#define VB_S_HTLB_PGALLOC 8u   /* count */
#define VB_S_HTLB_PGFAIL 9u    /* count */
/* Tags 10-15 are Linux extensions (6.12); the spec does not define them. */
#define VB_S_OOM_KILL 10u      /* count */
#define VB_S_ALLOC_STALL 11u   /* count */
#define VB_S_ASYNC_SCAN 12u    /* bytes */
#define VB_S_DIRECT_SCAN 13u   /* bytes */
#define VB_S_ASYNC_RECLAIM 14u /* bytes */
#define VB_S_DIRECT_RECLAIM 15u /* bytes */
/*
 * Tags 16-26 as virtio-spec issue 247 proposes them (unmerged); sent only with
 * VB_F_X_PRESSURE (spec/proposals/vb-f-x-pressure.md), since some devices reject tags they
 * do not know (Firecracker's stats endpoint broke on Linux 6.12's 10-15).
 */
#define VB_S_DIRTY 16u		 /* bytes */
#define VB_S_WRITEBACK 17u	 /* bytes */
#define VB_S_ANON 18u		 /* bytes */
#define VB_S_INACTIVE_FILE 19u	 /* bytes */
#define VB_S_SLAB_RECLAIM 20u	 /* bytes */
#define VB_S_WS_REFAULT_ANON 21u /* count */
#define VB_S_WS_REFAULT_FILE 22u /* count */
#define VB_S_PSI_MEM_SOME 23u	 /* microseconds */
#define VB_S_PSI_MEM_FULL 24u	 /* microseconds */
#define VB_S_PSI_IO_SOME 25u	 /* microseconds */
#define VB_S_PSI_IO_FULL 26u	 /* microseconds */
/* Ours, after issue 247's, with VB_F_X_PRESSURE: what the pressure governor did. */
#define VB_S_X_HELD_BACK 27u  /* bytes: below the target, kept by the guest for now */
#define VB_S_X_GIVEN_BACK 28u /* bytes: deflated early under pressure, since boot */
#define VB_S_X_FLOOR 29u      /* bytes: memory the governor leaves the guest */
/* The first tag VB_F_X_PRESSURE adds; all tags below it are sent without it. */
#define VB_S_FIRST_PRESSURE_TAG VB_S_DIRTY
#define VB_S_NR 30u

/*
 * One statistic on the wire: le16 tag, le64 value, packed to 10 bytes. (The spec's
 * normative text still says "a multiple of 6 bytes", an erratum from the 6-byte era.)
 */
#define VB_STAT_ENTRY_BYTES 10u
struct vb_stat_entry {
	uint16_t tag;
	uint64_t val;
} __attribute__((packed));

/* ---- Virtqueues -------------------------------------------------------------------- */

/* The queues in spec order. */
enum vb_queue_kind {
	VB_QUEUE_INFLATE = 0,
	VB_QUEUE_DEFLATE = 1,
	VB_QUEUE_STATS = 2,
	VB_QUEUE_FREE_PAGE = 3,
	VB_QUEUE_REPORTING = 4,
	VB_QUEUE_KIND_COUNT = 5
};

/*
 * Transport queue index of a queue, or -1 when the negotiated features do not create it.
 * Indices are dense over the queues that exist (what Linux's virtio_find_vqs does and what
 * Firecracker, crosvm and cloud-hypervisor expect): with REPORTING alone, reporting_vq is 2.
 */
static inline int vb_queue_index(uint64_t features, enum vb_queue_kind kind)
{
	int index = 0;
	int k;

	for (k = 0; k < (int)VB_QUEUE_KIND_COUNT; k++) {
		int present = 1;

		if (k == VB_QUEUE_STATS)
			present = (features & VB_FEATURE(VB_F_STATS_VQ)) != 0;
		else if (k == VB_QUEUE_FREE_PAGE)
			present = (features & VB_FEATURE(VB_F_FREE_PAGE_HINT)) != 0;
		else if (k == VB_QUEUE_REPORTING)
			present = (features & VB_FEATURE(VB_F_PAGE_REPORTING)) != 0;
		if (k == (int)kind)
			return present ? index : -1;
		if (present)
			index++;
	}
	return -1;
}

static inline int vb_queue_count(uint64_t features)
{
	return 2 + ((features & VB_FEATURE(VB_F_STATS_VQ)) != 0) +
	       ((features & VB_FEATURE(VB_F_FREE_PAGE_HINT)) != 0) +
	       ((features & VB_FEATURE(VB_F_PAGE_REPORTING)) != 0);
}

#endif /* VBALLOON_SPEC_VIRTIO_BALLOON_H */
