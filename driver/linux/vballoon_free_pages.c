// SPDX-License-Identifier: GPL-2.0
/*
 * Free page hinting and free page reporting: the kernel's side of what the core does in
 * free_page_hinter.h and free_page_reporter.h.
 *
 *   config change (any context) -> hint work item on a high-priority workqueue
 *                                  -> vballoon_core_handle_free_page_hint()
 *   memory pressure             -> shrinker -> vballoon_core_hint_release()
 *   page_reporting's pass       -> vballoon_report() -> vballoon_core_report_free_pages()
 *
 * The hinted blocks are the driver's until the device says DONE: they sit on a list of
 * their own (not the balloon list, they are not balloon pages), guarded by its own
 * spinlock, so the shrinker can take them back while a round is still handing out more.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/list.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/page_reporting.h>
#include <linux/scatterlist.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/virtio.h>
#include <linux/virtio_balloon.h>
#include <linux/virtio_config.h>
#include <linux/workqueue.h>

#include "vballoon_dev.h"

/* ---- The hint list (vb::BalloonOs hint_list_insert / hint_list_take) --------------- */

void vb_os_hint_list_insert(struct vballoon_dev *vb, const struct vballoon_page_run *run)
{
	struct page *page = pfn_to_page(run->first_pfn);

	/*
	 * The block is ours (allocated, off every list): its first page carries the link and
	 * the block's length until the block goes back.
	 */
	set_page_private(page, run->count);
	spin_lock(&vb->hint_lock);
	list_add(&page->lru, &vb->hint_blocks);
	spin_unlock(&vb->hint_lock);
}

size_t vb_os_hint_list_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			    size_t max_runs, uint64_t max_pages)
{
	uint64_t taken = 0;
	size_t n = 0;

	spin_lock(&vb->hint_lock);
	while (n < max_runs && taken < max_pages) {
		struct page *page = list_first_entry_or_null(&vb->hint_blocks, struct page, lru);

		if (!page)
			break;
		list_del(&page->lru);
		runs[n].first_pfn = page_to_pfn(page);
		runs[n].count = page_private(page);
		runs[n].flags = 0;
		set_page_private(page, 0);
		taken += runs[n].count;
		n++;
	}
	spin_unlock(&vb->hint_lock);
	return n;
}

/* ---- Hinting: the work item and the shrinker --------------------------------------- */

static void vballoon_free_page_hint_func(struct work_struct *work)
{
	struct vballoon_dev *vb = container_of(work, struct vballoon_dev, hint_work);

	vballoon_core_handle_free_page_hint(vb->core);
}

static unsigned long vballoon_hint_count(struct shrinker *shrinker, struct shrink_control *sc)
{
	struct vballoon_dev *vb = vb_shrinker_private(shrinker);
	unsigned long held = vballoon_core_hint_held_pages(vb->core);

	return held ? held : SHRINK_EMPTY;
}

static unsigned long vballoon_hint_scan(struct shrinker *shrinker, struct shrink_control *sc)
{
	struct vballoon_dev *vb = vb_shrinker_private(shrinker);
	unsigned long freed = vballoon_core_hint_release(vb->core, sc->nr_to_scan);

	return freed ? freed : SHRINK_STOP;
}

/* ---- Reporting --------------------------------------------------------------------- */

/* page_reporting runs one pass at a time per device, so report_runs needs no lock. */
static int vballoon_report(struct page_reporting_dev_info *prdev, struct scatterlist *sgl,
			   unsigned int nents)
{
	struct vballoon_dev *vb = container_of(prdev, struct vballoon_dev, pr_dev_info);
	struct scatterlist *sg;
	unsigned int i;

	if (WARN_ON_ONCE(nents > VB_OS_REPORT_RUNS_MAX))
		return -EINVAL;
	for_each_sg(sgl, sg, nents, i) {
		vb->report_runs[i].first_pfn = page_to_pfn(sg_page(sg));
		vb->report_runs[i].count = sg->length >> PAGE_SHIFT;
		vb->report_runs[i].flags = 0;
	}
	/* An error makes page_reporting put the blocks back unreported and retry later. */
	return vballoon_core_report_free_pages(vb->core, vb->report_runs, nents) ? 0 : -EIO;
}

/* ---- Life cycle -------------------------------------------------------------------- */

int vballoon_free_pages_init(struct vballoon_dev *vb)
{
	spin_lock_init(&vb->hint_lock);
	INIT_LIST_HEAD(&vb->hint_blocks);
	INIT_WORK(&vb->hint_work, vballoon_free_page_hint_func);
	if (!virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_FREE_PAGE_HINT))
		return 0;
	/* Only the CPU reads it (virtqueue_add_sgs() walks it), so it may come from vmalloc. */
	vb->hint_sg = kvzalloc(sizeof(*vb->hint_sg), GFP_KERNEL);
	if (!vb->hint_sg)
		return -ENOMEM;
	/*
	 * A race with the migration's first pass over RAM: the round must start as soon as the
	 * id arrives, ahead of ordinary work (HIGHPRI), and a long round must not hold up other
	 * work items (CPU_INTENSIVE). Frozen with the system, as the other work items are.
	 * Per-CPU, said explicitly (VB_WQ_PERCPU): the round starts on the CPU that took the
	 * config interrupt, whose caches hold the id, rather than wait for an unbound worker.
	 */
	vb->hint_wq = alloc_workqueue("vballoon-hint-%s",
				      WQ_FREEZABLE | WQ_HIGHPRI | WQ_CPU_INTENSIVE | VB_WQ_PERCPU,
				      0, dev_name(&vb->vdev->dev));
	return vb->hint_wq ? 0 : -ENOMEM;
}

/* After DRIVER_OK and the core's start(). */
void vballoon_free_pages_start(struct vballoon_dev *vb)
{
	struct virtio_device *vdev = vb->vdev;
	int err;

	if (virtio_has_feature(vdev, VIRTIO_BALLOON_F_FREE_PAGE_HINT)) {
		vb->hint_shrinker = vb_shrinker_create(vballoon_hint_count, vballoon_hint_scan, vb,
						       "vballoon-hint-", dev_name(&vdev->dev));
		/* Without it held blocks still come back at DONE, only not under pressure. */
		if (!vb->hint_shrinker)
			dev_warn(&vdev->dev, "no shrinker for hinted pages\n");
	}
	if (virtio_has_feature(vdev, VIRTIO_BALLOON_F_REPORTING)) {
		vb->pr_dev_info.report = vballoon_report;
		/* 2 MiB on x86: large enough for the host to drop whole huge pages, and THP. */
		vb->pr_dev_info.order = pageblock_order;
		err = vb_page_reporting_register(&vb->pr_dev_info);
		/* -EBUSY: another device already reports this guest's free pages. */
		if (err)
			dev_warn(&vdev->dev, "free page reporting not started: %d\n", err);
		vb->reporting_registered = !err;
	}
}

/* Called from the config-change callback, in any context, while work may be queued. */
void vballoon_free_pages_config_changed(struct vballoon_dev *vb)
{
	if (vb->hint_wq && vballoon_core_hint_config_changed(vb->core))
		queue_work(vb->hint_wq, &vb->hint_work);
}

/*
 * Before remove or freeze resets the device, once no callback can queue the hint work any
 * more: no report and no hint round is running when this returns.
 */
void vballoon_free_pages_stop(struct vballoon_dev *vb)
{
	if (vb->reporting_registered) {
		vb_page_reporting_unregister(&vb->pr_dev_info);
		vb->reporting_registered = false;
	}
	/* A running round stops at its next block or wait, rather than run to its end. */
	vballoon_core_hint_stop(vb->core);
	wake_up(&vb->acked);
	cancel_work_sync(&vb->hint_work);
	if (vb->hint_shrinker) {
		vb_shrinker_destroy(vb->hint_shrinker);
		vb->hint_shrinker = NULL;
	}
}

/* After the reset: the device dropped every buffer, so every held block goes back. */
void vballoon_free_pages_device_reset(struct vballoon_dev *vb)
{
	vballoon_core_hint_device_reset(vb->core);
}

void vballoon_free_pages_destroy(struct vballoon_dev *vb)
{
	if (vb->hint_wq) {
		destroy_workqueue(vb->hint_wq);
		vb->hint_wq = NULL;
	}
	kvfree(vb->hint_sg);
	vb->hint_sg = NULL;
}
