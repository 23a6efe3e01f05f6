// SPDX-License-Identifier: GPL-2.0
/*
 * What `modinfo vballoon` shows besides the description, licence and parameters (those
 * sit next to what they describe in vballoon_main.c): the version, and the kernel
 * facilities this build uses. A file of its own so that a new version, which Kbuild
 * passes as VBALLOON_VERSION, recompiles only this.
 */
#include <linux/module.h>

#ifndef VBALLOON_VERSION
#error "Kbuild passes VBALLOON_VERSION (driver/linux/module-version.sh)"
#endif

/* Each is used when the kernel has it; the module builds and works without. */
#if defined(CONFIG_BALLOON_COMPACTION)
#define VB_KF_COMPACTION "balloon_compaction "
#elif defined(CONFIG_BALLOON_MIGRATION)
#define VB_KF_COMPACTION "balloon_migration "
#else
#define VB_KF_COMPACTION ""
#endif
#ifdef CONFIG_PAGE_REPORTING
#define VB_KF_REPORTING "page_reporting "
#else
#define VB_KF_REPORTING ""
#endif
#ifdef CONFIG_DEBUG_FS
#define VB_KF_DEBUGFS "debugfs "
#else
#define VB_KF_DEBUGFS ""
#endif
#ifdef CONFIG_PM_SLEEP
#define VB_KF_PM_SLEEP "pm_sleep "
#else
#define VB_KF_PM_SLEEP ""
#endif
#ifdef CONFIG_PAGE_POISONING
#define VB_KF_POISON "page_poisoning "
#else
#define VB_KF_POISON ""
#endif

MODULE_VERSION(VBALLOON_VERSION);
/* Always: the balloon pages' movable allocations and managed-page accounting, the OOM
 * notifier (deflate-on-OOM) and init_on_free; the rest as configured. */
MODULE_INFO(kernel_features, "balloon_pages managed_pages oom_notifier init_on_free "
	    VB_KF_COMPACTION VB_KF_REPORTING VB_KF_DEBUGFS VB_KF_PM_SLEEP VB_KF_POISON
	    "c++20_freestanding_core");
