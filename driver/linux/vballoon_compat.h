/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels vballoon.ko builds for, in one place. The C glue
 * calls the vb_* names below and never tests a kernel version itself.
 *
 * Each entry says the upstream version the change appeared in, and how it is detected:
 * a version test for mainline changes, a header probe by Kbuild (VB_HAVE_*, see the
 * "Kernel API probes" in the top-level Kbuild) where stable kernels backported a change
 * and the version says nothing. Built and tested: Debian's 6.1.y, 6.12.y and 7.x. The
 * other entries follow the upstream sources (driver/linux/README.md, "Kernel versions").
 *
 * A balloon API this header does not know stops the build with #error: silently
 * compiling out the migration callback would leave mm calling a NULL migratepage.
 */
#ifndef VBALLOON_LINUX_VBALLOON_COMPAT_H
#define VBALLOON_LINUX_VBALLOON_COMPAT_H

#include <linux/bug.h>
#include <linux/build_bug.h>
#include <linux/errno.h>
#include <linux/gfp.h>
#include <linux/migrate.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/page_reporting.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/stddef.h>
#include <linux/version.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>
#include <linux/vmstat.h>
#include <linux/workqueue.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "vballoon: needs Linux 6.1 or later (named shrinkers, balloon_page_list_dequeue(), virtio_reset_device())"
#endif

/* ---- The balloon page API ------------------------------------------------------------- */

/*
 * Two generations, told apart by Kbuild from the headers (VB_BALLOON_API_2026; Kbuild
 * refuses a kernel that has neither, both, or a <linux/balloon.h> of another shape):
 *
 *   2012 to 6.x:  <linux/balloon_compaction.h>; CONFIG_MEMORY_BALLOON, and
 *                 CONFIG_BALLOON_COMPACTION for movable balloon pages. The driver's
 *                 migratepage does the list work itself: it inserts the new page under
 *                 b_dev_info->pages_lock with a reference of its own, and finalizes and
 *                 puts the old one.
 *   7.0 (2026):   David Hildenbrand's rework. <linux/balloon.h>; CONFIG_BALLOON and
 *                 CONFIG_BALLOON_MIGRATION. One lock private to mm, no page lock, and
 *                 balloon_page_insert()/_finalize()/balloon_mapping_gfp_mask() private.
 *                 migratepage only tells the host and returns 0, -ENOENT (old page
 *                 deflated, new one not inflated) or an error; mm then takes the new
 *                 page's reference, inserts it, fixes isolated_pages, finalizes and puts
 *                 the old page. Doing any of that here as well would insert the new page
 *                 twice and underflow the old page's reference count.
 *                 Enqueue and dequeue also keep NR_BALLOON_PAGES (`Balloon:` in
 *                 /proc/meminfo; the counter itself appeared in 6.15).
 *
 * Both generations leave managed-page accounting to the driver by default (the 2026
 * b_dev_info.adjust_managed_page_count stays false): the core does it, and only when
 * DEFLATE_ON_OOM is off, as virtio_balloon does.
 */
#ifdef VB_BALLOON_API_2026
#if !__has_include(<linux/balloon.h>)
#error "vballoon: Kbuild found the 2026 balloon API but the compiler finds no <linux/balloon.h>; see driver/linux/README.md, Kernel versions"
#endif
#include <linux/balloon.h>
#if defined(CONFIG_BALLOON_MIGRATION)
#define VB_BALLOON_MIGRATION 1
#endif
#else
#if __has_include(<linux/balloon.h>) || defined(CONFIG_BALLOON_MIGRATION)
#error "vballoon: this kernel has the reworked balloon API (<linux/balloon.h>, CONFIG_BALLOON_MIGRATION) but Kbuild did not recognise it; see driver/linux/README.md, Kernel versions"
#endif
#if !__has_include(<linux/balloon_compaction.h>)
#error "vballoon: this kernel has no <linux/balloon_compaction.h>, the balloon page API vballoon is written for; see driver/linux/README.md, Kernel versions"
#endif
#include <linux/balloon_compaction.h>
#if defined(CONFIG_BALLOON_COMPACTION)
#define VB_BALLOON_MIGRATION 1
#endif
#endif

/*
 * With balloon page migration the driver must give mm a migratepage callback; Kbuild checks
 * that struct balloon_dev_info still has that member (VB_HAVE_BALLOON_MIGRATEPAGE).
 */
#if defined(VB_BALLOON_MIGRATION) && !defined(VB_HAVE_BALLOON_MIGRATEPAGE)
#error "vballoon: balloon page migration is configured but struct balloon_dev_info has no migratepage callback: an unknown balloon API; see driver/linux/README.md, Kernel versions"
#endif

/*
 * The allocation flags of a balloon page, for blocks larger than one (balloon_page_alloc()
 * takes single pages): movable exactly when balloon pages can migrate. The 2026 API made
 * balloon_mapping_gfp_mask() private; its rule is unchanged.
 */
static inline gfp_t vb_balloon_gfp_mask(void)
{
#ifdef VB_BALLOON_API_2026
	return IS_ENABLED(CONFIG_BALLOON_MIGRATION) ? GFP_HIGHUSER_MOVABLE : GFP_HIGHUSER;
#else
	return balloon_mapping_gfp_mask();
#endif
}

#if defined(VB_BALLOON_MIGRATION) && !defined(VB_BALLOON_API_2026)
/*
 * After a migration the old page stops being a balloon page. balloon_page_finalize()
 * replaced balloon_page_delete(), which also took the page off the list unless it was
 * isolated (the migrated page always is): in mainline with the 6.17 movable_ops rework, as
 * far as the patch series shows, and backported to later 6.1.y and 6.12.y. Probed by
 * Kbuild, since the stable kernels of one version differ.
 */
static inline void vb_balloon_page_finalize(struct page *page)
{
#ifdef VB_HAVE_BALLOON_PAGE_FINALIZE
	balloon_page_finalize(page);
#else
	balloon_page_delete(page);
#endif
}
#endif

#ifdef VB_BALLOON_MIGRATION

/*
 * The host holds the new page instead of the old one: the new page joins the balloon list.
 * Up to 6.x the driver does it, under the list's lock and with the balloon's own reference;
 * from 7.0 mm does it after migratepage returns.
 */
static inline void vb_balloon_migrated_insert(struct balloon_dev_info *info, struct page *newpage)
{
#ifndef VB_BALLOON_API_2026
	unsigned long flags;

	get_page(newpage);
	spin_lock_irqsave(&info->pages_lock, flags);
	balloon_page_insert(info, newpage);
	/* The old page was isolated by compaction and never returns to the list. */
	info->isolated_pages--;
	__count_vm_event(BALLOON_MIGRATE);
	spin_unlock_irqrestore(&info->pages_lock, flags);
#endif
}

/*
 * ... and the old page leaves it, for good: up to 6.x the driver finalizes it and drops the
 * balloon's reference; from 7.0 mm does both.
 */
static inline void vb_balloon_migrated_release(struct page *page)
{
#ifndef VB_BALLOON_API_2026
	vb_balloon_page_finalize(page);
	put_page(page);
#endif
}
#endif /* VB_BALLOON_MIGRATION */

/*
 * Pages the driver keeps out of the guest but off the balloon list (a deflate the host did
 * not acknowledge, vb_os_balloon_hold(); whole blocks, vballoon_whole_blocks.c) are still
 * ballooned: where the kernel counts
 * balloon pages (NR_BALLOON_PAGES, 6.15; kept by enqueue and dequeue), they are counted
 * here, so `Balloon:` in /proc/meminfo stays what the host holds. Probed by Kbuild
 * (VB_HAVE_NR_BALLOON_PAGES): it is an enum, and stable kernels may have backported it.
 */
static inline void vb_balloon_count_off_list(struct page *page, long delta)
{
#ifdef VB_HAVE_NR_BALLOON_PAGES
	mod_node_page_state(page_pgdat(page), NR_BALLOON_PAGES, delta);
#endif
}

/* 6.18: MIGRATEPAGE_SUCCESS removed, migration callbacks return 0 (its value before). */
#ifdef MIGRATEPAGE_SUCCESS
#define VB_MIGRATEPAGE_SUCCESS MIGRATEPAGE_SUCCESS
#else
#define VB_MIGRATEPAGE_SUCCESS 0
#endif

/* ---- Pages ---------------------------------------------------------------------------- */

/*
 * VB_MAX_PAGE_ORDER: the largest order the buddy allocator hands out (10 on x86: 4 MiB).
 *   up to 6.3: MAX_ORDER is one past it (exclusive);
 *   6.4:       MAX_ORDER becomes the largest order itself (inclusive);
 *   6.8:       MAX_ORDER renamed MAX_PAGE_ORDER.
 * On 6.4-6.7 "MAX_ORDER - 1" would compile and silently mean one order less.
 */
#if defined(MAX_PAGE_ORDER)
#define VB_MAX_PAGE_ORDER MAX_PAGE_ORDER
#elif LINUX_VERSION_CODE >= KERNEL_VERSION(6, 4, 0)
#define VB_MAX_PAGE_ORDER MAX_ORDER
#else
#define VB_MAX_PAGE_ORDER (MAX_ORDER - 1)
#endif
/* Checked against the allocator itself, whatever the version: one free list per order. */
static_assert(sizeof_field(struct zone, free_area) / sizeof(struct free_area) ==
	      VB_MAX_PAGE_ORDER + 1, "VB_MAX_PAGE_ORDER is not the buddy allocator's largest order");

/*
 * 6.18: nth_page() removed; the pages of one allocation (at most VB_MAX_PAGE_ORDER) are
 * contiguous in the memmap, so plain pointer arithmetic is what it reduced to there.
 */
#ifdef nth_page
#define vb_nth_page(page, n) nth_page(page, n)
#else
#define vb_nth_page(page, n) ((page) + (n))
#endif

/* ---- Shrinker ------------------------------------------------------------------------- */

/*
 * 6.7: register_shrinker()/unregister_shrinker() on a struct the driver embeds are gone;
 * shrinker_alloc(), shrinker_register(), shrinker_free() and ->private_data replace them.
 * Before 6.7 the struct is allocated here, so callers see one shape: a pointer, and the
 * private data back from vb_shrinker_private(). Returns NULL on failure.
 */
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 7, 0)
static inline struct shrinker *
vb_shrinker_create(unsigned long (*count)(struct shrinker *, struct shrink_control *),
		   unsigned long (*scan)(struct shrinker *, struct shrink_control *),
		   void *private_data, const char *name_prefix, const char *name)
{
	struct shrinker *s = shrinker_alloc(0, "%s%s", name_prefix, name);

	if (!s)
		return NULL;
	s->count_objects = count;
	s->scan_objects = scan;
	s->seeks = DEFAULT_SEEKS;
	s->private_data = private_data;
	shrinker_register(s);
	return s;
}

static inline void *vb_shrinker_private(struct shrinker *s)
{
	return s->private_data;
}

static inline void vb_shrinker_destroy(struct shrinker *s)
{
	shrinker_free(s);
}
#else
struct vb_compat_shrinker {
	struct shrinker shrinker;
	void *private_data;
};

static inline struct shrinker *
vb_shrinker_create(unsigned long (*count)(struct shrinker *, struct shrink_control *),
		   unsigned long (*scan)(struct shrinker *, struct shrink_control *),
		   void *private_data, const char *name_prefix, const char *name)
{
	struct vb_compat_shrinker *w = kzalloc(sizeof(*w), GFP_KERNEL);

	if (!w)
		return NULL;
	w->shrinker.count_objects = count;
	w->shrinker.scan_objects = scan;
	w->shrinker.seeks = DEFAULT_SEEKS;
	w->private_data = private_data;
	if (register_shrinker(&w->shrinker, "%s%s", name_prefix, name)) {
		kfree(w);
		return NULL;
	}
	return &w->shrinker;
}

static inline void *vb_shrinker_private(struct shrinker *s)
{
	return container_of(s, struct vb_compat_shrinker, shrinker)->private_data;
}

static inline void vb_shrinker_destroy(struct shrinker *s)
{
	if (!s)
		return;
	unregister_shrinker(s);
	kfree(container_of(s, struct vb_compat_shrinker, shrinker));
}
#endif

/* ---- virtio --------------------------------------------------------------------------- */

#define VB_COMPAT_MAX_VQS 8

/*
 * 6.11: virtio_find_vqs() takes one array of struct virtqueue_info (name, callback, ctx)
 * instead of parallel arrays of callbacks and names. In both, a NULL name skips a queue
 * and the others are numbered densely.
 */
static inline int vb_virtio_find_vqs(struct virtio_device *vdev, unsigned int nvqs,
				     struct virtqueue *vqs[], vq_callback_t *callbacks[],
				     const char *const names[])
{
#if LINUX_VERSION_CODE >= KERNEL_VERSION(6, 11, 0)
	struct virtqueue_info info[VB_COMPAT_MAX_VQS] = {};
	unsigned int i;

	if (WARN_ON_ONCE(nvqs > VB_COMPAT_MAX_VQS))
		return -EINVAL;
	for (i = 0; i < nvqs; i++) {
		info[i].name = names[i];
		info[i].callback = callbacks[i];
	}
	return virtio_find_vqs(vdev, nvqs, vqs, info, NULL);
#else
	return virtio_find_vqs(vdev, nvqs, vqs, callbacks, names, NULL);
#endif
}

/*
 * 6.10: register_virtio_driver() became a macro that records THIS_MODULE as the driver's
 * owner; setting .driver.owner as well is redundant there. Use in the initializer of
 * struct virtio_driver.
 */
#ifdef register_virtio_driver
#define VB_VIRTIO_DRIVER_OWNER
#else
#define VB_VIRTIO_DRIVER_OWNER .driver.owner = THIS_MODULE,
#endif

/* ---- Workqueues ----------------------------------------------------------------------- */

/*
 * 6.17: WQ_PERCPU, so that callers of alloc_workqueue() say per-CPU or WQ_UNBOUND before
 * unbound becomes the default. An enum value, so Kbuild probes for it (VB_HAVE_WQ_PERCPU);
 * before it, per-CPU is what no flag means.
 */
#ifdef VB_HAVE_WQ_PERCPU
#define VB_WQ_PERCPU WQ_PERCPU
#else
#define VB_WQ_PERCPU 0
#endif

/* ---- Reclaim counters ----------------------------------------------------------------- */

/*
 * 7.x (seen in 7.3.4): the reclaim counters (pgscan_*, pgsteal_*) moved from the vm events
 * (enum vm_event_item, all_vm_events()) to the node counters (enum node_stat_item, read
 * with global_node_page_state()), so that memory cgroups keep them per node. /proc/vmstat
 * keeps their names. Both are enums, so Kbuild probes mmzone.h for them
 * (VB_HAVE_NODE_RECLAIM_COUNTS). Indexing the events with the node item would compile and
 * read another counter.
 */
#ifdef VB_HAVE_NODE_RECLAIM_COUNTS
#define vb_reclaim_count(events, item) global_node_page_state(item)
#else
#define vb_reclaim_count(events, item) ((events)[item])
#endif

/* ---- Kernel configuration ------------------------------------------------------------- */

/*
 * Free page reporting exists only with CONFIG_PAGE_REPORTING (page_reporting_register()
 * is not exported otherwise, and modpost fails on it). Without it the module builds,
 * never accepts VIRTIO_BALLOON_F_REPORTING (vballoon_guest_traits()), and says so in the
 * build's feature line and in modinfo's kernel_features.
 */
static inline int vb_page_reporting_register(struct page_reporting_dev_info *prdev)
{
#ifdef CONFIG_PAGE_REPORTING
	return page_reporting_register(prdev);
#else
	return -EOPNOTSUPP;
#endif
}

static inline void vb_page_reporting_unregister(struct page_reporting_dev_info *prdev)
{
#ifdef CONFIG_PAGE_REPORTING
	page_reporting_unregister(prdev);
#endif
}

#endif /* VBALLOON_LINUX_VBALLOON_COMPAT_H */
