/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Every difference between the kernels vballoon.ko builds for, in one place. The C glue
 * calls the vb_* names below and never tests a kernel version itself.
 *
 * Each entry says the upstream version the change appeared in, and how it is detected:
 * a version test for mainline changes, a header probe by Kbuild (VB_HAVE_*, see the
 * "Kernel API probes" in the top-level Kbuild) where stable kernels backported a change
 * and the version says nothing. Built and tested: Debian's 6.1.y and 6.12.y. The other
 * entries follow the upstream sources (driver/linux/README.md, "Kernel versions").
 *
 * A balloon API this header does not know stops the build with #error: silently
 * compiling out the compaction callback would leave mm calling a NULL migratepage.
 */
#ifndef VBALLOON_LINUX_VBALLOON_COMPAT_H
#define VBALLOON_LINUX_VBALLOON_COMPAT_H

#include <linux/bug.h>
#include <linux/build_bug.h>
#include <linux/errno.h>
#include <linux/migrate.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/page_reporting.h>
#include <linux/shrinker.h>
#include <linux/slab.h>
#include <linux/stddef.h>
#include <linux/version.h>
#include <linux/virtio.h>
#include <linux/virtio_config.h>

#if LINUX_VERSION_CODE < KERNEL_VERSION(6, 1, 0)
#error "vballoon: needs Linux 6.1 or later (named shrinkers, balloon_page_list_dequeue(), virtio_reset_device())"
#endif

/* ---- The balloon page API ------------------------------------------------------------- */

/*
 * 2026 (the 7.0 merge window): mm/balloon rework. <linux/balloon.h> replaces
 * <linux/balloon_compaction.h>, CONFIG_BALLOON_MIGRATION replaces CONFIG_BALLOON_COMPACTION,
 * the pages lock and balloon_page_insert()/_finalize()/balloon_mapping_gfp_mask() become
 * private to mm, and migratepage only tells the host while mm moves the list entries.
 * vballoon's list handling (vballoon_os.c) is the old contract's: refuse to build.
 */
#if defined(CONFIG_BALLOON_MIGRATION) || __has_include(<linux/balloon.h>)
#error "vballoon: this kernel has the reworked balloon API (<linux/balloon.h>, CONFIG_BALLOON_MIGRATION), which vballoon does not support yet; see driver/linux/README.md, Kernel versions"
#endif
#if !__has_include(<linux/balloon_compaction.h>)
#error "vballoon: this kernel has no <linux/balloon_compaction.h>, the balloon page API vballoon is written for; see driver/linux/README.md, Kernel versions"
#endif
#include <linux/balloon_compaction.h>

/*
 * With compaction the driver must give mm a migratepage callback; Kbuild checks that
 * struct balloon_dev_info still has that member (VB_HAVE_BALLOON_MIGRATEPAGE).
 */
#if defined(CONFIG_BALLOON_COMPACTION) && !defined(VB_HAVE_BALLOON_MIGRATEPAGE)
#error "vballoon: CONFIG_BALLOON_COMPACTION is set but struct balloon_dev_info has no migratepage callback: an unknown balloon API; see driver/linux/README.md, Kernel versions"
#endif

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
