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
#include <linux/sort.h>
#include <linux/string.h>
#include <linux/spinlock.h>
#include <linux/virtio.h>
#include <linux/virtio_balloon.h>
#include <linux/virtio_config.h>
#include <linux/workqueue.h>

#include "vballoon_dev.h"

/* ---- The hint list (vb::BalloonOs hint_list_insert / hint_list_take) --------------- */

void vb_os_hint_list_insert(struct vballoon_dev *dev, const struct vballoon_page_run *run)
{
	struct page *page = pfn_to_page(run->first_pfn);

	/*
	 * The block is ours (allocated, off every list): its first page carries the link and
	 * the block's length until the block goes back.
	 */
	set_page_private(page, run->count);
	spin_lock(&dev->hint_lock);
	list_add(&page->lru, &dev->hint_blocks);
	spin_unlock(&dev->hint_lock);
}

size_t vb_os_hint_list_take(struct vballoon_dev *dev, struct vballoon_page_run *runs,
			    size_t max_runs, uint64_t max_pages)
{
	uint64_t taken = 0;
	size_t n = 0;

	spin_lock(&dev->hint_lock);
	while (n < max_runs && taken < max_pages) {
		struct page *page = list_first_entry_or_null(&dev->hint_blocks, struct page, lru);

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
	spin_unlock(&dev->hint_lock);
	return n;
}

/* ---- Hinting: blocks handed over as descriptor chains ------------------------------ */

/*
 * The core adds each hint block as a buffer of its own. QEMU (7.2) clears a hinted block
 * from the migration bitmap under the bitmap mutex, which its migration thread holds for
 * up to 50 ms at a time while it sends pages, and it takes that mutex once per block: with
 * one buffer per block, the hinting thread had to win the mutex hundreds of times against
 * the migration thread, and lost it for 50 ms each time it did not, until the migration's
 * first pass over RAM had sent the very pages being hinted. Within one buffer it hints all
 * blocks in a row without letting go for long. So the blocks the core adds between two
 * kicks travel as one chain of many device-writable segments (QEMU takes up to 1024 per
 * buffer), and the chain's buffer, once used, is handed back to the core as the single
 * buffers it added, one per block: the core's contract and counting stay as they are.
 */
#define VB_HINT_CHAIN_BLOCKS_MAX 512
/* Chains on the ring at once; with none free the blocks go one buffer each. */
#define VB_HINT_CHAINS_MAX 16

struct vballoon_hint_chain {
	void *token;         /* the core's token of every block in the chain */
	unsigned int blocks; /* 0: free */
};

struct vballoon_hint_batch {
	/* Added by the core, not on the ring yet. */
	struct vballoon_segment pending[VB_HINT_CHAIN_BLOCKS_MAX];
	unsigned int nr_pending;
	void *pending_token;
	/* The pending blocks sorted, neighbours merged: what the chain carries. */
	struct vballoon_segment merged[VB_HINT_CHAIN_BLOCKS_MAX];
	struct scatterlist sg[VB_HINT_CHAIN_BLOCKS_MAX];
	struct vballoon_hint_chain chains[VB_HINT_CHAINS_MAX];
	/* Blocks of used chains not yet handed back to the core (all share one token). */
	void *drain_token;
	unsigned int drain_left;
	/*
	 * free_page_vq refused a flushed chain (the device broke: surprise removal): every
	 * later add fails and every wait returns at once, so the round stops. The blocks stay
	 * on the hint list until the reset gives them back. Cleared by the reset.
	 */
	int failed;
};

static struct vballoon_hint_chain *vballoon_hint_chain_of(struct vballoon_hint_batch *b,
							  void *token)
{
	struct vballoon_hint_chain *c = token;

	if (c < b->chains || c >= b->chains + VB_HINT_CHAINS_MAX)
		return NULL;
	return c;
}

static void vballoon_hint_drain_more(struct vballoon_hint_batch *b, void *token,
				     unsigned int blocks)
{
	/* The core gives every block the same token; anything else would be lost here. */
	WARN_ON_ONCE(b->drain_left && b->drain_token != token);
	b->drain_token = token;
	b->drain_left += blocks;
}

static int vballoon_segment_cmp(const void *a, const void *b)
{
	const struct vballoon_segment *x = a, *y = b;

	return x->phys_addr < y->phys_addr ? -1 : x->phys_addr > y->phys_addr;
}

/*
 * Sorts a copy of the pending blocks by address and merges neighbours into one segment: QEMU takes
 * the bitmap mutex once per segment, and most of a guest's free blocks lie side by side.
 * Returns the number of segments in b->merged.
 */
static unsigned int vballoon_hint_merge(struct vballoon_hint_batch *b, unsigned int n)
{
	unsigned int i, out = 0;

	memcpy(b->merged, b->pending, n * sizeof(b->pending[0]));
	sort(b->merged, n, sizeof(b->merged[0]), vballoon_segment_cmp, NULL);
	for (i = 1; i < n; i++) {
		struct vballoon_segment *last = &b->merged[out];

		if (last->phys_addr + last->len == b->merged[i].phys_addr &&
		    (u64)last->len + b->merged[i].len <= U32_MAX)
			last->len += b->merged[i].len;
		else
			b->merged[++out] = b->merged[i];
	}
	return n ? out + 1 : 0;
}

/* True when the buffer was taken into the pending chain. */
bool vballoon_hint_batch_add(struct vballoon_dev *vb, const struct vballoon_segment *out,
			     unsigned int n_out, const struct vballoon_segment *in,
			     unsigned int n_in, void *token)
{
	struct vballoon_hint_batch *b = vb->hint_batch;

	if (!b || n_out || n_in != 1)
		return false;
	vb_test_hook_hint_block_added(vb);
	/*
	 * A broken queue takes nothing: the add goes on to virtqueue_add_sgs(), which fails,
	 * and the core ends the round at once instead of taking every free block.
	 */
	if (b->failed || virtqueue_is_broken(vb->vqs[VB_QUEUE_FREE_PAGE]))
		return false;
	if (b->nr_pending &&
	    (b->pending_token != token || b->nr_pending == VB_HINT_CHAIN_BLOCKS_MAX))
		vballoon_hint_batch_flush(vb);
	b->pending[b->nr_pending++] = in[0];
	b->pending_token = token;
	return true;
}

/* Puts the pending blocks on the ring; called before any kick, wait or other buffer. */
void vballoon_hint_batch_flush(struct vballoon_dev *vb)
{
	struct vballoon_hint_batch *b = vb->hint_batch;
	struct virtqueue *vq = vb->vqs[VB_QUEUE_FREE_PAGE];
	struct vballoon_hint_chain *chain = NULL;
	unsigned int i, n, nr_sg;
	int err;

	if (!b || !b->nr_pending)
		return;
	n = b->nr_pending;
	b->nr_pending = 0;
	nr_sg = vballoon_hint_merge(b, n);
	sg_init_table(b->sg, nr_sg);
	for (i = 0; i < nr_sg; i++)
		sg_set_page(&b->sg[i], pfn_to_page(PHYS_PFN(b->merged[i].phys_addr)),
			    b->merged[i].len, offset_in_page(b->merged[i].phys_addr));
	for (i = 0; n > 1 && i < VB_HINT_CHAINS_MAX; i++) {
		if (!b->chains[i].blocks) {
			chain = &b->chains[i];
			break;
		}
	}
	if (chain) {
		chain->token = b->pending_token;
		chain->blocks = n;
		/*
		 * The core counted one descriptor per block and kept room for them, so even
		 * without an indirect table (GFP_KERNEL: this is the hint work item) it fits.
		 */
		err = virtqueue_add_inbuf(vq, b->sg, nr_sg, chain, GFP_KERNEL);
		if (!err)
			return;
		chain->blocks = 0;
	} else {
		for (i = 0; i < n; i++) {
			sg_init_table(&b->sg[i], 1);
			sg_set_page(&b->sg[i], pfn_to_page(PHYS_PFN(b->pending[i].phys_addr)),
				    b->pending[i].len, offset_in_page(b->pending[i].phys_addr));
			err = virtqueue_add_inbuf(vq, &b->sg[i], 1, b->pending_token, GFP_KERNEL);
			if (err)
				break;
		}
		if (!err)
			return;
		n -= i;
	}
	/*
	 * The core kept room for every block, so this is a device that broke (-EIO after a
	 * surprise removal) or memory that ran out: no WARN, the round stops (every later add
	 * and wait fails, see vballoon_hint_batch_failed()) and the blocks, never seen by the
	 * device, stay on the hint list until the reset gives them back.
	 */
	if (!b->failed)
		dev_warn(&vb->vdev->dev, "free_page_vq refused %u hint blocks (%d): hinting stops until the device is reset\n",
			 n, err);
	b->failed = err;
}

/* True once a flush failed: free_page_vq takes and returns nothing more until the reset. */
bool vballoon_hint_batch_failed(struct vballoon_dev *vb)
{
	return vb->hint_batch && vb->hint_batch->failed;
}

/* A block of a used chain, if one is still owed to the core. */
void *vballoon_hint_batch_drained(struct vballoon_dev *vb, uint32_t *len)
{
	struct vballoon_hint_batch *b = vb->hint_batch;

	if (!b || !b->drain_left)
		return NULL;
	b->drain_left--;
	*len = 0;
	return b->drain_token;
}

/* A used buffer from the ring: a chain is handed back as its first block (the rest later). */
void *vballoon_hint_batch_unpack(struct vballoon_dev *vb, void *token)
{
	struct vballoon_hint_batch *b = vb->hint_batch;
	struct vballoon_hint_chain *chain;

	if (!b || !token || !(chain = vballoon_hint_chain_of(b, token)))
		return token;
	token = chain->token;
	vballoon_hint_drain_more(b, token, chain->blocks - 1);
	chain->blocks = 0;
	return token;
}

static void vballoon_hint_batch_reset(struct vballoon_dev *vb)
{
	struct vballoon_hint_batch *b = vb->hint_batch;

	if (!b)
		return;
	b->nr_pending = 0;
	b->drain_left = 0;
	b->failed = 0;
	memset(b->chains, 0, sizeof(b->chains));
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
	/* Only the CPU reads it (the scatterlist is walked by virtqueue_add_inbuf()). */
	vb->hint_batch = kvzalloc(sizeof(*vb->hint_batch), GFP_KERNEL);
	if (!vb->hint_batch)
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
	vballoon_hint_batch_reset(vb);
	vballoon_core_hint_device_reset(vb->core);
}

void vballoon_free_pages_destroy(struct vballoon_dev *vb)
{
	if (vb->hint_wq) {
		destroy_workqueue(vb->hint_wq);
		vb->hint_wq = NULL;
	}
	kvfree(vb->hint_batch);
	vb->hint_batch = NULL;
}
