// SPDX-License-Identifier: GPL-2.0
/*
 * vballoon: a virtio-balloon driver whose balloon lives in a freestanding C++ core
 * (driver/core). This file is the virtio driver around it: feature negotiation, queues,
 * the work items, the OOM notifier, balloon compaction, debugfs and module parameters.
 * It turns kernel events into calls on the core and decides nothing about the balloon.
 *
 *   validate        -> legacy devices refused; vballoon_accept_features()
 *   probe           -> core init, prepare() (before DRIVER_OK), start() (after)
 *   config change   -> update work -> adjust_towards_target(), again while it asks
 *   statsq callback -> stats work -> handle_stats_request()
 *   hinting, reporting -> vballoon_free_pages.c
 *   OOM notifier    -> deflate_for_oom()
 *   compaction      -> migrate_page()
 *   remove, freeze  -> work stopped, release_all(), reset, release_after_reset(),
 *                      queues deleted
 *   restore         -> queues, prepare(), start(); work again only once all succeeded
 *
 * Kernel features relied on: CONFIG_VIRTIO (a VERSION_1 transport), the balloon page list
 * (CONFIG_MEMORY_BALLOON up to 6.x, CONFIG_BALLOON from 7.0). Optional: balloon page
 * migration (CONFIG_BALLOON_COMPACTION, CONFIG_BALLOON_MIGRATION from 7.0), CONFIG_PM_SLEEP
 * (freeze/restore), CONFIG_DEBUG_FS (counters). The build prints what it found (Kbuild).
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/build_bug.h>
#include <linux/debugfs.h>
#include <linux/delay.h>
#include <linux/jiffies.h>
#include <linux/migrate.h>
#include <linux/mm.h>
#include <linux/module.h>
#include <linux/oom.h>
#include <linux/poison.h>
#include <linux/seq_file.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/virtio.h>
#include <linux/virtio_balloon.h>
#include <linux/virtio_config.h>
#include <linux/virtio_ids.h>

#include "vballoon_dev.h"

/*
 * 2 MiB blocks by default: free memory is taken in whole pageblocks while they last, so
 * the balloon holds contiguous runs (cheaper to allocate, and one discard per run for a
 * host that merges). Smaller orders are used as the large ones run out, never by force.
 */
static unsigned int max_chunk_order = 9;
module_param(max_chunk_order, uint, 0444);
MODULE_PARM_DESC(max_chunk_order,
		 "Largest block inflate allocates, as a page order (default 9 = 2 MiB; 0: a page at a time, like virtio_balloon)");

/*
 * What Linux did in 2017 (commit bb01b64cfab7, later reverted): the guest zeroes every page
 * as it enters the balloon, so a deflated page comes back clean. Off by default; it exists
 * to measure what that zeroing costs. The VIRTIO_BALLOON_F_SG thread of 2017 (which older
 * text calls "seed 004"; docs/references.md) measured it: inflating 7 GiB of an 8 GiB
 * guest took 2.8 s once the guest zeroed. The "guest zeroes" variant in
 * bench/guest/README.md repeats that in a real guest; its figures are in bench/guest/seed004/.
 */
static bool zero_on_inflate;
module_param(zero_on_inflate, bool, 0444);
MODULE_PARM_DESC(zero_on_inflate,
		 "Zero pages entering the balloon, unless the device does it (default off)");

/*
 * Blocks of a pageblock or more stay whole and unmovable off balloon compaction's list
 * (vballoon_whole_blocks.c): one allocator call per block in and out instead of one per
 * page. Off: every page split and movable, as virtio_balloon keeps them.
 */
static bool keep_blocks_whole = true;
module_param(keep_blocks_whole, bool, 0444);
MODULE_PARM_DESC(keep_blocks_whole,
		 "Keep inflated blocks of a pageblock or more whole and unmovable (default Y; N: "
		 "split every block into movable pages)");

/*
 * The DEVICE_INIT proposals (virtio-spec issues 244 and 242, bits 6 and 7 as on mst's
 * branches) are taken only when asked for: bit 6 is also claimed by working-set reporting
 * and by a Firecracker fork's HINT_WAIT_ON_ACK, whose devices would mean something else by
 * it. What the host initialised is counted in debugfs; the kernel still zeroes the pages
 * itself (skipping that needs mm changes, driver/linux/README.md).
 */
static bool device_init;
module_param(device_init, bool, 0444);
MODULE_PARM_DESC(device_init, "Take the DEVICE_INIT bits 6 and 7 if offered (default: off)");

/*
 * The pressure governor (driver/core/include/vballoon/core/pressure_governor.h) paces the
 * inflate by the guest's memory pressure, stops it at a floor and, with DEFLATE_ON_OOM,
 * gives memory back before the OOM killer runs. With it a guest may keep `actual` below
 * the host's target for as long as it cannot spare the memory: the spec allows it
 * (supplying pages is a SHOULD), but a management tool may read it as a fault. So by
 * default (-1) it runs only for a device that offers VB_F_X_PRESSURE, whose host expects
 * it (spec/proposals/vb-f-x-pressure.md); 1 runs it for any device, 0 never.
 */
static int pressure_governor = -1;
module_param(pressure_governor, int, 0444);
MODULE_PARM_DESC(pressure_governor, "Pace inflation by the guest's memory pressure: -1 when the "
				    "device offers VB_F_X_PRESSURE (default), 1 always, 0 never");

static unsigned int pressure_floor_mib;
module_param(pressure_floor_mib, uint, 0444);
MODULE_PARM_DESC(pressure_floor_mib, "Memory the governor never inflates into, in MiB (default 0: "
				     "derived from RAM and refaults)");

/* After the guest ran out of pages to give without pressure (virtio_balloon: "Out of puff"). */
#define VBALLOON_STALL_RETRY_MS 200
/*
 * After a reset, pages compaction has isolated come back through a failing migratepage;
 * remove looks for them this often, and says every 30 s that it is still waiting.
 */
#define VBALLOON_RELEASE_RETRY_MS 20
#define VBALLOON_RELEASE_REPORT_MS 30000
/* Where virtio_balloon sits among OOM notifiers. */
#define VBALLOON_OOM_NOTIFY_PRIORITY 80

/* The kernel's uapi names and the spec header must describe the same protocol. */
static_assert(VIRTIO_ID_BALLOON == VB_VIRTIO_DEVICE_ID_BALLOON);
static_assert(VIRTIO_BALLOON_F_MUST_TELL_HOST == VB_F_MUST_TELL_HOST);
static_assert(VIRTIO_BALLOON_F_STATS_VQ == VB_F_STATS_VQ);
static_assert(VIRTIO_BALLOON_F_DEFLATE_ON_OOM == VB_F_DEFLATE_ON_OOM);
static_assert(VIRTIO_BALLOON_F_FREE_PAGE_HINT == VB_F_FREE_PAGE_HINT);
static_assert(VIRTIO_BALLOON_F_PAGE_POISON == VB_F_PAGE_POISON);
static_assert(VIRTIO_BALLOON_F_REPORTING == VB_F_PAGE_REPORTING);
static_assert(VIRTIO_BALLOON_PFN_SHIFT == VB_PFN_SHIFT);
static_assert(offsetof(struct virtio_balloon_config, num_pages) == VB_CONFIG_NUM_PAGES_OFFSET);
static_assert(offsetof(struct virtio_balloon_config, actual) == VB_CONFIG_ACTUAL_OFFSET);
static_assert(offsetof(struct virtio_balloon_config, free_page_hint_cmd_id) ==
	      VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET);
static_assert(offsetof(struct virtio_balloon_config, poison_val) == VB_CONFIG_POISON_VAL_OFFSET);
static_assert(sizeof(struct virtio_balloon_stat) == VB_STAT_ENTRY_BYTES);
static_assert(VIRTIO_BALLOON_S_SWAP_IN == VB_S_SWAP_IN && VIRTIO_BALLOON_S_CACHES == VB_S_CACHES &&
	      VIRTIO_BALLOON_S_HTLB_PGFAIL == VB_S_HTLB_PGFAIL);

static struct dentry *vballoon_debugfs_root;

static void vballoon_guest_traits(struct vballoon_guest_traits *traits)
{
	traits->page_shift = PAGE_SHIFT;
	/* init_on_free zeroes freed pages, page poisoning fills them with PAGE_POISON. */
	traits->freed_pages_need_pattern = want_init_on_free() || page_poisoning_enabled_static();
	traits->free_page_pattern = want_init_on_free() ? 0 : PAGE_POISON * 0x01010101u;
	traits->max_alloc_order = VB_MAX_PAGE_ORDER;
	traits->initialise_before_inflate = zero_on_inflate;
	traits->runs_free_page_hinting = true;
	traits->runs_page_reporting = IS_ENABLED(CONFIG_PAGE_REPORTING);
	traits->accept_device_init = device_init;
	traits->runs_pressure_governor = pressure_governor != 0;
}

/* ---- Queues ----------------------------------------------------------------------- */

/* Inflate, deflate, report acknowledgements; hint buffers returned while a round waits. */
static void vballoon_ack(struct virtqueue *vq)
{
	struct vballoon_dev *vb = vq->vdev->priv;

	wake_up(&vb->acked);
}

/* The device returned the stats buffer: it wants fresh statistics. */
static void vballoon_stats_request(struct virtqueue *vq)
{
	struct vballoon_dev *vb = vq->vdev->priv;
	unsigned long flags;

	spin_lock_irqsave(&vb->stop_lock, flags);
	if (!vb->stopping)
		queue_work(system_freezable_wq, &vb->stats_work);
	spin_unlock_irqrestore(&vb->stop_lock, flags);
}

static const char *const vballoon_vq_names[VB_QUEUE_KIND_COUNT] = {
	[VB_QUEUE_INFLATE] = "inflate",
	[VB_QUEUE_DEFLATE] = "deflate",
	[VB_QUEUE_STATS] = "stats",
	[VB_QUEUE_FREE_PAGE] = "free_page_vq",
	[VB_QUEUE_REPORTING] = "reporting_vq",
};

/*
 * The free page queue's callback is off except while a hint round waits for room
 * (vb_os_queue_wait_used()): the device returns every block, and an interrupt for each
 * would only slow the round down.
 */
static vq_callback_t *const vballoon_vq_callbacks[VB_QUEUE_KIND_COUNT] = {
	[VB_QUEUE_INFLATE] = vballoon_ack,
	[VB_QUEUE_DEFLATE] = vballoon_ack,
	[VB_QUEUE_STATS] = vballoon_stats_request,
	[VB_QUEUE_FREE_PAGE] = vballoon_ack,
	[VB_QUEUE_REPORTING] = vballoon_ack,
};

static int vballoon_init_vqs(struct vballoon_dev *vb)
{
	struct virtqueue *vqs[VB_QUEUE_KIND_COUNT];
	vq_callback_t *callbacks[VB_QUEUE_KIND_COUNT];
	const char *names[VB_QUEUE_KIND_COUNT];
	int kind, err;

	/*
	 * A queue whose feature was not negotiated gets no name: vb_virtio_find_vqs() skips it
	 * and numbers the others densely, which is what devices expect.
	 */
	for (kind = 0; kind < VB_QUEUE_KIND_COUNT; kind++) {
		bool present = vb_queue_index(vb->vdev->features, kind) >= 0;

		names[kind] = present ? vballoon_vq_names[kind] : NULL;
		callbacks[kind] = present ? vballoon_vq_callbacks[kind] : NULL;
	}
	err = vb_virtio_find_vqs(vb->vdev, VB_QUEUE_KIND_COUNT, vqs, callbacks, names);
	if (err)
		return err;
	for (kind = 0; kind < VB_QUEUE_KIND_COUNT; kind++)
		vb->vqs[kind] = names[kind] ? vqs[kind] : NULL;
	if (vb->vqs[VB_QUEUE_FREE_PAGE])
		virtqueue_disable_cb(vb->vqs[VB_QUEUE_FREE_PAGE]);
	return 0;
}

/*
 * As virtio_balloon: page_reporting hands over up to PAGE_REPORTING_CAPACITY runs in one
 * chain, which a smaller reporting_vq could never take; such a device is refused.
 */
static int vballoon_check_vqs(struct vballoon_dev *vb)
{
	struct virtqueue *vq = vb->vqs[VB_QUEUE_REPORTING];

	if (vq && virtqueue_get_vring_size(vq) < PAGE_REPORTING_CAPACITY) {
		dev_err(&vb->vdev->dev, "reporting_vq holds %u descriptors, fewer than the %u a report needs\n",
			virtqueue_get_vring_size(vq), PAGE_REPORTING_CAPACITY);
		return -ENOSPC;
	}
	return 0;
}

static void vballoon_del_vqs(struct vballoon_dev *vb)
{
	vb->vdev->config->del_vqs(vb->vdev);
	memset(vb->vqs, 0, sizeof(vb->vqs));
}

/* ---- Work ------------------------------------------------------------------------- */

static void vballoon_queue_update(struct vballoon_dev *vb, unsigned long delay)
{
	unsigned long flags;

	spin_lock_irqsave(&vb->stop_lock, flags);
	if (!vb->stopping)
		queue_delayed_work(system_freezable_wq, &vb->update_work, delay);
	spin_unlock_irqrestore(&vb->stop_lock, flags);
}

static void vballoon_update_func(struct work_struct *work)
{
	struct vballoon_dev *vb =
		container_of(to_delayed_work(work), struct vballoon_dev, update_work);

	/* One step per run, so remove and freeze never wait long for a running step. */
	switch (vballoon_core_adjust(vb->core)) {
	case VB_OS_STEP_MORE_WORK:
		vballoon_queue_update(vb, 0);
		break;
	case VB_OS_STEP_STALLED:
		dev_info_ratelimited(&vb->vdev->dev, "out of puff, retrying in %u ms\n",
				     VBALLOON_STALL_RETRY_MS);
		vballoon_queue_update(vb, msecs_to_jiffies(VBALLOON_STALL_RETRY_MS));
		break;
	default:
		/* Settled, or held back by the governor: its tick says when to go on. */
		break;
	}
}

static void vballoon_queue_pressure_tick(struct vballoon_dev *vb)
{
	unsigned long flags;

	spin_lock_irqsave(&vb->stop_lock, flags);
	if (!vb->stopping && vb->pressure_governed)
		queue_delayed_work(system_freezable_wq, &vb->pressure_work,
				   msecs_to_jiffies(vballoon_core_pressure_tick_ms()));
	spin_unlock_irqrestore(&vb->stop_lock, flags);
}

/* The governor's clock: a sample a second, a give-back when it decides, a resume. */
static void vballoon_pressure_func(struct work_struct *work)
{
	struct vballoon_dev *vb =
		container_of(to_delayed_work(work), struct vballoon_dev, pressure_work);

	if (vballoon_core_pressure_tick(vb->core))
		vballoon_queue_update(vb, 0);
	vballoon_queue_pressure_tick(vb);
}

static void vballoon_stats_func(struct work_struct *work)
{
	struct vballoon_dev *vb = container_of(work, struct vballoon_dev, stats_work);

	vballoon_core_handle_stats_request(vb->core);
}

/* May run in interrupt context. */
static void vballoon_changed(struct virtio_device *vdev)
{
	struct vballoon_dev *vb = vdev->priv;
	unsigned long flags;

	spin_lock_irqsave(&vb->stop_lock, flags);
	/* mod_: a step waiting out a stall runs now, towards the new target. */
	if (!vb->stopping) {
		mod_delayed_work(system_freezable_wq, &vb->update_work, 0);
		vballoon_free_pages_config_changed(vb);
	}
	spin_unlock_irqrestore(&vb->stop_lock, flags);
}

/*
 * No callback queues work from here on, and none is pending or running when this returns.
 * On freeze the freezable workqueue is already frozen: pending items are cancelled rather
 * than left to run, after thaw, against a device that may have no queues.
 */
static void vballoon_stop_work(struct vballoon_dev *vb)
{
	spin_lock_irq(&vb->stop_lock);
	vb->stopping = true;
	spin_unlock_irq(&vb->stop_lock);
	cancel_delayed_work_sync(&vb->update_work);
	cancel_work_sync(&vb->stats_work);
	cancel_delayed_work_sync(&vb->pressure_work);
}

/* The queues are up and the core started: callbacks may queue work again. */
static void vballoon_start_work(struct vballoon_dev *vb)
{
	spin_lock_irq(&vb->stop_lock);
	vb->stopping = false;
	spin_unlock_irq(&vb->stop_lock);
}

/*
 * After the reset: every page still ballooned (the host did not acknowledge its deflate,
 * or compaction had it isolated) goes back to the guest. The queues are broken first, so a
 * migration callback that still tries to tell the host fails at once instead of waiting
 * for a device that no longer answers, and compaction puts its page back on the list.
 *
 * No time limit: an isolated page still points at b_dev_info, and mm will call
 * migratepage or put it back on b_dev_info->pages, so neither the device state nor the
 * module's code may go while one is out. Isolation is short-lived (migrate_pages() retries
 * a failing callback a bounded number of times, then puts the page back), so the wait ends;
 * a page that never came back would be a kernel bug, and the log says so meanwhile.
 */
static void vballoon_release_after_reset(struct vballoon_dev *vb)
{
	unsigned long waited_ms = 0;

	virtio_break_device(vb->vdev);
	for (;;) {
		vballoon_core_release_after_reset(vb->core);
		if (!vballoon_core_balloon_wire_pages(vb->core))
			return;
		msleep(VBALLOON_RELEASE_RETRY_MS);
		waited_ms += VBALLOON_RELEASE_RETRY_MS;
		if (waited_ms % VBALLOON_RELEASE_REPORT_MS == 0)
			dev_warn(&vb->vdev->dev,
				 "%llu wire pages still isolated by compaction after %lu s; "
				 "waiting for "
				 "them\n",
				 vballoon_core_balloon_wire_pages(vb->core), waited_ms / 1000);
	}
}

/* ---- OOM and compaction ----------------------------------------------------------- */

static int vballoon_oom_notify(struct notifier_block *nb, unsigned long unused, void *parm)
{
	struct vballoon_dev *vb = container_of(nb, struct vballoon_dev, oom_nb);
	unsigned long *freed = parm;
	uint64_t freed_wire_pages = vballoon_core_deflate_for_oom(vb->core);

	/* The notifier counts pages; the core, wire pages. */
	*freed += freed_wire_pages >> (PAGE_SHIFT - VB_PFN_SHIFT);
	return NOTIFY_OK;
}

/* Registered only while the device has queues: the notifier deflates through them. */
static int vballoon_register_oom(struct vballoon_dev *vb)
{
	int err;

	if (!virtio_has_feature(vb->vdev, VIRTIO_BALLOON_F_DEFLATE_ON_OOM))
		return 0;
	vb->oom_nb.notifier_call = vballoon_oom_notify;
	vb->oom_nb.priority = VBALLOON_OOM_NOTIFY_PRIORITY;
	err = register_oom_notifier(&vb->oom_nb);
	if (!err)
		vb->oom_registered = true;
	return err;
}

static void vballoon_unregister_oom(struct vballoon_dev *vb)
{
	if (vb->oom_registered)
		unregister_oom_notifier(&vb->oom_nb);
	vb->oom_registered = false;
}

#ifdef VB_BALLOON_MIGRATION
/*
 * Compaction isolated the old page from the balloon list (up to 6.x it also holds both
 * pages' locks). Only the host is told here; the list work is the kernel generation's
 * (vb_balloon_migrated_insert(), vb_balloon_migrated_release()). Never -ENOENT: the core
 * inflates the new page before it deflates the old, so a failure leaves the old one in.
 */
static int vballoon_migratepage(struct balloon_dev_info *info, struct page *newpage,
				struct page *page, enum migrate_mode mode)
{
	struct vballoon_dev *vb = container_of(info, struct vballoon_dev, b_dev_info);

	/* Busy balloon: compaction puts the page back and tries again later. */
	if (!vballoon_core_migrate_page(vb->core, page_to_pfn(page), page_to_pfn(newpage)))
		return -EAGAIN;

	/* The new page took its place on the list (vb_os_balloon_list_replace()). */
	vb_balloon_migrated_release(page);
	return VB_MIGRATEPAGE_SUCCESS;
}
#endif

/* ---- debugfs ---------------------------------------------------------------------- */

static int vballoon_counters_show(struct seq_file *m, void *unused)
{
	struct vballoon_dev *vb = m->private;
	const char *name;
	unsigned int i;
	u64 value;

	seq_printf(m, "features 0x%llx\n", vb->vdev->features);
	seq_printf(m, "target_pfns %llu\n", vballoon_core_target_wire_pages(vb->core));
	seq_printf(m, "balloon_pfns %llu\n", vballoon_core_balloon_wire_pages(vb->core));
	seq_printf(m, "held_pages %lu\n", READ_ONCE(vb->nr_held_pages));
	seq_printf(m, "whole_block_pages %lu\n", READ_ONCE(vb->nr_whole_block_pages));
	seq_printf(m, "whole_blocks_freed %lu\n", READ_ONCE(vb->whole_blocks_freed));
	seq_printf(m, "whole_blocks_split %lu\n", READ_ONCE(vb->whole_blocks_split));
	for (i = 0; (name = vballoon_core_counter(vb->core, i, &value)); i++)
		seq_printf(m, "%s %llu\n", name, value);
	return 0;
}
DEFINE_SHOW_ATTRIBUTE(vballoon_counters);

/* ---- The virtio driver ------------------------------------------------------------ */

static int vballoon_validate(struct virtio_device *vdev)
{
	struct vballoon_guest_traits traits;
	u64 offered = vdev->features;
	u64 accepted;
	unsigned int bit;

	/*
	 * Legacy (pre-1.0) devices are refused, not driven: their interface differs in ways
	 * the core does not implement (guest-endian stats and command IDs, used lengths to
	 * ignore). spec/requirements.md, legacy rows. The in-tree virtio_balloon drives them.
	 */
	if (!virtio_has_feature(vdev, VIRTIO_F_VERSION_1)) {
		dev_err(&vdev->dev,
			"legacy virtio-balloon device (no VIRTIO_F_VERSION_1) refused: vballoon drives virtio 1.0+ devices only; use virtio_balloon, or a modern device (QEMU: disable-modern=off)\n");
		return -ENODEV;
	}

	vballoon_guest_traits(&traits);
	accepted = vballoon_accept_features(offered, &traits);
	/* The core rules on the device-specific bits; the transport bits are virtio's. */
	for (bit = 0; bit < VIRTIO_TRANSPORT_F_START; bit++) {
		if ((offered & BIT_ULL(bit)) && !(accepted & BIT_ULL(bit)))
			__virtio_clear_bit(vdev, bit);
	}
	/*
	 * As virtio_balloon: the device must see guest-physical addresses, and the balloon
	 * cannot work behind an IOMMU anyway.
	 */
	__virtio_clear_bit(vdev, VIRTIO_F_ACCESS_PLATFORM);
	return 0;
}

static int vballoon_probe(struct virtio_device *vdev)
{
	struct vballoon_guest_traits traits;
	struct vballoon_dev *vb;
	size_t core_size = vballoon_core_size();
	int err;

	if (!vdev->config->get) {
		dev_err(&vdev->dev, "config space access disabled\n");
		return -EINVAL;
	}

	vb = kzalloc(sizeof(*vb), GFP_KERNEL);
	if (!vb)
		return -ENOMEM;
	/* Only the CPU reads the core's page runs: vmalloc may back them. */
	vb->workspace_mem = kvzalloc(vballoon_core_workspace_size(), GFP_KERNEL);
	if (!vb->workspace_mem) {
		kfree(vb);
		return -ENOMEM;
	}
	vdev->priv = vb;
	vb->vdev = vdev;
	init_waitqueue_head(&vb->acked);
	mutex_init(&vb->balloon_lock);
	spin_lock_init(&vb->stop_lock);
	INIT_DELAYED_WORK(&vb->update_work, vballoon_update_func);
	INIT_WORK(&vb->stats_work, vballoon_stats_func);
	INIT_DELAYED_WORK(&vb->pressure_work, vballoon_pressure_func);
	balloon_devinfo_init(&vb->b_dev_info);
	INIT_LIST_HEAD(&vb->held_pages);
	vb->keep_blocks_whole = keep_blocks_whole;
	INIT_LIST_HEAD(&vb->whole_blocks);
#ifdef VB_BALLOON_MIGRATION
	vb->b_dev_info.migratepage = vballoon_migratepage;
#endif
	err = vballoon_free_pages_init(vb);
	if (err)
		goto out_free_vb;

	err = vballoon_init_vqs(vb);
	if (err)
		goto out_free_vb;
	err = vballoon_check_vqs(vb);
	if (err)
		goto out_del_vqs;

	/*
	 * kmalloc memory: the core holds the PFN and stats buffers the device reads (at most
	 * 8 KiB, checked in kernel_os.cpp). The core sizes its messages by the queues, so they
	 * exist first.
	 */
	vb->core_mem = kzalloc(core_size, GFP_KERNEL);
	if (!vb->core_mem) {
		err = -ENOMEM;
		goto out_del_vqs;
	}
	vballoon_guest_traits(&traits);
	vb->core = vballoon_core_init(vb->core_mem, core_size, vb->workspace_mem,
				      vballoon_core_workspace_size(), vb, vdev->features, &traits);
	if (WARN_ON(!vb->core)) {
		err = -EINVAL;
		goto out_free_core;
	}
	vballoon_core_set_max_chunk_order(vb->core, max_chunk_order);
	vb->pressure_governed =
		pressure_governor > 0 ||
		(pressure_governor < 0 && virtio_has_feature(vdev, VB_F_X_PRESSURE));
	vballoon_core_set_pressure_policy(vb->core, vb->pressure_governed,
					  (uint64_t)pressure_floor_mib << (20 - PAGE_SHIFT));

	/* Before DRIVER_OK: primes the stats queue and writes poison_val. */
	if (!vballoon_core_prepare(vb->core)) {
		err = -EIO;
		goto out_destroy_core;
	}

	err = vballoon_register_oom(vb);
	if (err < 0)
		goto out_destroy_core;

	vb->debugfs_dir = debugfs_create_dir(dev_name(&vdev->dev), vballoon_debugfs_root);
	debugfs_create_file("counters", 0444, vb->debugfs_dir, vb, &vballoon_counters_fops);
	vb_test_hooks_debugfs(vb, vb->debugfs_dir);

	virtio_device_ready(vdev);
	vballoon_core_start(vb->core);
	vballoon_free_pages_start(vb);
	/* Config changes before this point were not delivered; the device may want a balloon. */
	vballoon_queue_update(vb, 0);
	vballoon_queue_pressure_tick(vb);
	return 0;

out_destroy_core:
	vballoon_core_destroy(vb->core);
out_free_core:
	kfree(vb->core_mem);
out_del_vqs:
	vballoon_del_vqs(vb);
out_free_vb:
	vballoon_free_pages_destroy(vb);
	kvfree(vb->workspace_mem);
	kfree(vb);
	vdev->priv = NULL;
	return err;
}

/*
 * Remove and freeze: nothing may start a balloon operation any more (work, OOM notifier,
 * hinting, reporting), every page the host acknowledges goes back while the device still
 * listens, then the device is reset; held hint blocks and the rest of the balloon come back
 * without a message, and the queues are deleted. A device whose restore failed has no
 * queues left and an empty balloon: only the reset remains to do.
 */
static void vballoon_shut_down_device(struct vballoon_dev *vb)
{
	vballoon_unregister_oom(vb);
	vballoon_stop_work(vb);
	vballoon_free_pages_stop(vb);
	if (vb->vqs[VB_QUEUE_INFLATE])
		vballoon_core_release_all(vb->core);
	virtio_reset_device(vb->vdev);
	if (vb->vqs[VB_QUEUE_INFLATE]) {
		vballoon_free_pages_device_reset(vb);
		vballoon_release_after_reset(vb);
		vballoon_del_vqs(vb);
	}
}

static void vballoon_remove(struct virtio_device *vdev)
{
	struct vballoon_dev *vb = vdev->priv;

	vballoon_shut_down_device(vb);
	debugfs_remove_recursive(vb->debugfs_dir);

	vballoon_core_destroy(vb->core);
	vballoon_free_pages_destroy(vb);
	kfree(vb->core_mem);
	kvfree(vb->workspace_mem);
	kfree(vb);
}

#ifdef CONFIG_PM_SLEEP
static int vballoon_freeze(struct virtio_device *vdev)
{
	vballoon_shut_down_device(vdev->priv);
	return 0;
}

/*
 * The device comes back reset. Work and the OOM notifier start again only once the queues
 * are up and the core has primed them; if anything fails, the device stays as freeze left
 * it: no queues, an empty balloon, nothing that would inflate.
 */
static int vballoon_restore(struct virtio_device *vdev)
{
	struct vballoon_dev *vb = vdev->priv;
	int err;

	err = vballoon_init_vqs(vb);
	if (err)
		return err;
	err = vballoon_check_vqs(vb);
	if (err)
		goto out_reset;
	if (!vballoon_core_prepare(vb->core)) {
		err = -EIO;
		goto out_reset;
	}
	if (vb_test_hook_fail_restore(vb)) {
		err = -EIO;
		goto out_reset;
	}
	err = vballoon_register_oom(vb);
	if (err)
		goto out_reset;
	vballoon_start_work(vb);
	virtio_device_ready(vdev);
	vballoon_core_start(vb->core);
	vballoon_free_pages_start(vb);
	vballoon_queue_update(vb, 0);
	vballoon_queue_pressure_tick(vb);
	return 0;

out_reset:
	/* The device may hold the stats buffer prepare() gave it: reset before deleting. */
	virtio_reset_device(vdev);
	vballoon_del_vqs(vb);
	return err;
}
#endif

static unsigned int vballoon_features[] = {
	VIRTIO_BALLOON_F_MUST_TELL_HOST,
	VIRTIO_BALLOON_F_STATS_VQ,
	VIRTIO_BALLOON_F_DEFLATE_ON_OOM,
	VIRTIO_BALLOON_F_FREE_PAGE_HINT,
	VIRTIO_BALLOON_F_PAGE_POISON,
	VIRTIO_BALLOON_F_REPORTING,
	/* Experimental (spec/experimental.md); offered by no upstream host. */
	VB_F_X_CHUNKED,
	/* Only while the pressure governor may run (vballoon_validate() clears it otherwise). */
	VB_F_X_PRESSURE,
	/* Proposals, accepted only with device_init=1 (vballoon_validate() clears them). */
	VB_F_DEVICE_INIT_REPORTED,
	VB_F_DEVICE_INIT_ON_INFLATE,
};

static const struct virtio_device_id vballoon_id_table[] = {
	{ VIRTIO_ID_BALLOON, VIRTIO_DEV_ANY_ID },
	{ 0 },
};

static struct virtio_driver vballoon_driver = {
	.feature_table = vballoon_features,
	.feature_table_size = ARRAY_SIZE(vballoon_features),
	.driver.name = KBUILD_MODNAME,
	VB_VIRTIO_DRIVER_OWNER
	.id_table = vballoon_id_table,
	.validate = vballoon_validate,
	.probe = vballoon_probe,
	.remove = vballoon_remove,
	.config_changed = vballoon_changed,
#ifdef CONFIG_PM_SLEEP
	.freeze = vballoon_freeze,
	.restore = vballoon_restore,
#endif
};

static int __init vballoon_init(void)
{
	int err;

	vballoon_debugfs_root = debugfs_create_dir(KBUILD_MODNAME, NULL);
	err = register_virtio_driver(&vballoon_driver);
	if (err)
		debugfs_remove_recursive(vballoon_debugfs_root);
	return err;
}

static void __exit vballoon_exit(void)
{
	unregister_virtio_driver(&vballoon_driver);
	debugfs_remove_recursive(vballoon_debugfs_root);
}

module_init(vballoon_init);
module_exit(vballoon_exit);

MODULE_DEVICE_TABLE(virtio, vballoon_id_table);
MODULE_DESCRIPTION("Virtio balloon driver with a freestanding C++ core");
MODULE_LICENSE("GPL");
