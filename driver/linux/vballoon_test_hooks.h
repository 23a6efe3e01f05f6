/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Fault injection for the guest suite (tests/guest), in test builds only.
 *
 * Four debugfs knobs in /sys/kernel/debug/vballoon/<device>/ let the suite reach paths a
 * well-behaved QEMU never takes: refuse_deflates (deflateq refuses every buffer),
 * misalign_next_inflate (the next inflate segment over 2 KiB goes 2 KiB short, once),
 * break_after_hint_blocks (the device is marked broken when a hint round is about to add
 * its Nth block, as a surprise removal does: the core asks whether free_page_vq is broken
 * before each block) and fail_next_restore (the next restore fails once its
 * queues are up). One of them breaks the device: a module users load must not carry them.
 * So they exist only when the build asks for them (Kbuild's VB_TEST_HOOKS=1, which
 * driver/linux/build-module.sh and CI set), as the kernel keeps should_fail() behind
 * CONFIG_FAULT_INJECTION; a plain make or a DKMS build gets the stubs below, which the
 * compiler folds away, and `modinfo -F test_hooks` says which kind of build a module is.
 */
#ifndef VBALLOON_LINUX_VBALLOON_TEST_HOOKS_H
#define VBALLOON_LINUX_VBALLOON_TEST_HOOKS_H

#include <linux/types.h>

struct dentry;
struct vballoon_dev;
struct vballoon_segment;

#ifdef VB_TEST_HOOKS

struct vballoon_test_hooks {
	bool fail_next_restore;
	bool refuse_deflates;
	bool misalign_next_inflate;
	u32 break_after_hint_blocks;
	u32 hint_blocks_added;
};

void vb_test_hooks_debugfs(struct vballoon_dev *vb, struct dentry *dir);
bool vb_test_hook_refuse_buffer(struct vballoon_dev *vb, unsigned int kind);
bool vb_test_hook_shorten_segment(struct vballoon_dev *vb, unsigned int kind,
				  const struct vballoon_segment *seg);
void vb_test_hook_queue_asked_if_broken(struct vballoon_dev *vb, unsigned int kind);
bool vb_test_hook_fail_restore(struct vballoon_dev *vb);

#else

struct vballoon_test_hooks {
};

static inline void vb_test_hooks_debugfs(struct vballoon_dev *vb, struct dentry *dir) {}

static inline bool vb_test_hook_refuse_buffer(struct vballoon_dev *vb, unsigned int kind)
{
	return false;
}

static inline bool vb_test_hook_shorten_segment(struct vballoon_dev *vb, unsigned int kind,
						const struct vballoon_segment *seg)
{
	return false;
}

static inline void vb_test_hook_queue_asked_if_broken(struct vballoon_dev *vb, unsigned int kind) {}

static inline bool vb_test_hook_fail_restore(struct vballoon_dev *vb)
{
	return false;
}

#endif /* VB_TEST_HOOKS */

#endif /* VBALLOON_LINUX_VBALLOON_TEST_HOOKS_H */
