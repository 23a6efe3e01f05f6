/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The C glue's per-device state, shared by vballoon_main.c (the virtio driver: probe,
 * remove, work items, notifiers) and vballoon_os.c (the kernel services the core calls).
 * C only: the C++ side sees struct vballoon_dev as an opaque pointer.
 */
#ifndef VBALLOON_LINUX_VBALLOON_DEV_H
#define VBALLOON_LINUX_VBALLOON_DEV_H

#include <linux/mutex.h>
#include <linux/notifier.h>
#include <linux/page_reporting.h>
#include <linux/scatterlist.h>
#include <linux/shrinker.h>
#include <linux/spinlock.h>
#include <linux/virtio.h>
#include <linux/wait.h>
#include <linux/workqueue.h>

#include "vballoon/spec/virtio_balloon.h"
#include "vballoon_compat.h"
#include "vballoon_os.h"
#include "vballoon_test_hooks.h"

struct dentry;

/* A chain of hint blocks as virtqueue_add_sgs() takes it (32 KiB: kvmalloc). */
struct vb_os_hint_sg {
	struct scatterlist sg[VB_OS_HINT_CHAIN_SEGMENTS_MAX];
	struct scatterlist *sgs[VB_OS_HINT_CHAIN_SEGMENTS_MAX];
};

struct vballoon_dev {
	struct virtio_device *vdev;
	/* Indexed by spec queue kind (VB_QUEUE_*); NULL for a queue not negotiated. */
	struct virtqueue *vqs[VB_QUEUE_KIND_COUNT];
	/* Inflate and deflate acknowledgements; see vb_os_queue_wait_used(). */
	wait_queue_head_t acked;
	/*
	 * vb_os_queue_add()'s scatterlists, per queue: too large for the stack. free_page_vq
	 * uses hint_sg instead.
	 */
	struct scatterlist sg[VB_QUEUE_KIND_COUNT][VB_OS_MAX_SEGMENTS];
	struct scatterlist *sgs[VB_QUEUE_KIND_COUNT][VB_OS_MAX_SEGMENTS];

	/*
	 * The C++ core, constructed in core_mem (kmalloc memory: it holds the buffers the
	 * device reads), and its workspace in workspace_mem (kvmalloc: the CPU alone reads it).
	 */
	struct vballoon_core *core;
	void *core_mem;
	void *workspace_mem;

	/* The balloon lock (vb::BalloonOs lock/unlock/try_lock). */
	struct mutex balloon_lock;
	/* The balloon page list; its pages stay movable through balloon compaction. */
	struct balloon_dev_info b_dev_info;
	/*
	 * Ballooned pages off that list: dequeued for a deflate the host did not acknowledge
	 * (vb_os_balloon_hold()). Linked through page->lru, under the balloon lock.
	 */
	struct list_head held_pages;
	unsigned long nr_held_pages;
	/*
	 * Inflate's blocks of a pageblock or more, kept whole and unmovable off that list
	 * (vballoon_whole_blocks.c; module parameter keep_blocks_whole). Linked through their
	 * first page, newest first, under the balloon lock.
	 */
	bool keep_blocks_whole;
	struct list_head whole_blocks;
	unsigned long nr_whole_block_pages;
	/* Blocks that left the balloon in one piece, and blocks split on the way (debugfs). */
	unsigned long whole_blocks_freed;
	unsigned long whole_blocks_split;

	/* Config changes, and the core's own "call me again". */
	struct delayed_work update_work;
	/* The device returned the stats buffer. */
	struct work_struct stats_work;
	/* The pressure governor's tick (module parameter pressure_governor), when it runs. */
	bool pressure_governed;
	struct delayed_work pressure_work;
	/*
	 * Set under stop_lock while the device has no queues (remove, freeze, a failed
	 * restore): no callback queues new work then, and work runs only once it is clear.
	 */
	spinlock_t stop_lock;
	bool stopping;

	struct notifier_block oom_nb;
	bool oom_registered;
	struct dentry *debugfs_dir;

	/* Free page hinting (vballoon_free_pages.c). */
	struct workqueue_struct *hint_wq;
	struct work_struct hint_work;
	/* Blocks held as hints, linked through their first page; see vb_os_hint_list_*(). */
	spinlock_t hint_lock;
	struct list_head hint_blocks;
	/* NULL unless registered (vb_shrinker_create()). */
	struct shrinker *hint_shrinker;
	/* vb_os_queue_add()'s scatterlists for free_page_vq's chains of hint blocks. */
	struct vb_os_hint_sg *hint_sg;

	/* Free page reporting. */
	struct page_reporting_dev_info pr_dev_info;
	bool reporting_registered;
	struct vballoon_page_run report_runs[VB_OS_REPORT_RUNS_MAX];

	/* Fault injection, in test builds only (vballoon_test_hooks.h). */
	struct vballoon_test_hooks test_hooks;
};

/* vballoon_whole_blocks.c: inflate's whole blocks, off balloon compaction's list. */
bool vb_whole_blocks_wanted(const struct vballoon_dev *vb, unsigned int order);
/* A block of 2^order pages, marked as whole; NULL when none is free. */
struct page *vb_whole_block_alloc(unsigned int order);
/*
 * Pages the driver owns from `pfn` to `end` (exclusive), as far as they are in one whole
 * block: inserts them into the balloon (the block joins the list once all its pages are
 * in), or gives them back to the guest (the block in one piece once all its parts were
 * given back, or split if part of it stays in the balloon). Return how many pages that
 * was, 0 if pfn is in no whole block.
 */
uint64_t vb_whole_blocks_insert(struct vballoon_dev *vb, uint64_t pfn, uint64_t end);
uint64_t vb_whole_blocks_free(struct vballoon_dev *vb, uint64_t pfn, uint64_t end);
/* Splits the whole block `page` belongs to, if any, into order-0 pages. */
void vb_whole_block_break_up(struct vballoon_dev *vb, struct page *page);
/*
 * As vb_os_balloon_list_take(), from the whole blocks; *taken says how many pages. A block
 * larger than what is left to take is split, its rest put on the balloon list.
 */
size_t vb_whole_blocks_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			    size_t max_runs, uint64_t max_pages, uint64_t *taken);
size_t vb_os_add_range_to_runs(struct vballoon_page_run *runs, size_t nr_runs, uint64_t pfn,
			       uint64_t count);

/* vballoon_free_pages.c: free page hinting and reporting around the core. */
int vballoon_free_pages_init(struct vballoon_dev *vb);
void vballoon_free_pages_start(struct vballoon_dev *vb);
void vballoon_free_pages_config_changed(struct vballoon_dev *vb);
void vballoon_free_pages_stop(struct vballoon_dev *vb);
void vballoon_free_pages_device_reset(struct vballoon_dev *vb);
void vballoon_free_pages_destroy(struct vballoon_dev *vb);

#endif /* VBALLOON_LINUX_VBALLOON_DEV_H */
