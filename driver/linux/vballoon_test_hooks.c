// SPDX-License-Identifier: GPL-2.0
/*
 * The fault injection of test builds (vballoon_test_hooks.h says why it is kept out of
 * the others). Each hook is the rule it breaks, called where that rule is kept; debugfs is
 * the only way to arm one.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/debugfs.h>
#include <linux/module.h>
#include <linux/sizes.h>
#include <linux/virtio.h>

#include "vballoon_dev.h"

MODULE_INFO(test_hooks,
	    "refuse_deflates misalign_next_inflate break_after_hint_blocks fail_next_restore");

void vb_test_hooks_debugfs(struct vballoon_dev *vb, struct dentry *dir)
{
	struct vballoon_test_hooks *hooks = &vb->test_hooks;

	debugfs_create_bool("fail_next_restore", 0600, dir, &hooks->fail_next_restore);
	debugfs_create_bool("refuse_deflates", 0600, dir, &hooks->refuse_deflates);
	debugfs_create_bool("misalign_next_inflate", 0600, dir, &hooks->misalign_next_inflate);
	debugfs_create_u32("break_after_hint_blocks", 0600, dir, &hooks->break_after_hint_blocks);
}

/* refuse_deflates: the host refuses every deflate, so the pages stay ballooned. */
bool vb_test_hook_refuse_buffer(struct vballoon_dev *vb, unsigned int kind)
{
	return kind == VB_QUEUE_DEFLATE && READ_ONCE(vb->test_hooks.refuse_deflates);
}

/* misalign_next_inflate: once, on an inflate segment long enough to shorten. */
bool vb_test_hook_shorten_segment(struct vballoon_dev *vb, unsigned int kind,
				  const struct vballoon_segment *seg)
{
	if (kind != VB_QUEUE_INFLATE || seg->len <= SZ_2K ||
	    !READ_ONCE(vb->test_hooks.misalign_next_inflate))
		return false;
	WRITE_ONCE(vb->test_hooks.misalign_next_inflate, false);
	dev_info(&vb->vdev->dev, "inflate segment sent 2 KiB short, as asked (debugfs)\n");
	return true;
}

/*
 * break_after_hint_blocks: the Nth block of a round breaks the device; the core asks
 * whether free_page_vq is broken as it takes each block (vb::FreePageHinter).
 */
void vb_test_hook_queue_asked_if_broken(struct vballoon_dev *vb, unsigned int kind)
{
	struct vballoon_test_hooks *hooks = &vb->test_hooks;
	u32 after = READ_ONCE(hooks->break_after_hint_blocks);

	if (kind != VB_QUEUE_FREE_PAGE)
		return;
	if (after && ++hooks->hint_blocks_added == after) {
		dev_info(&vb->vdev->dev, "device broken after %u hint blocks, as asked (debugfs)\n",
			 hooks->hint_blocks_added);
		virtio_break_device(vb->vdev);
	}
}

/* fail_next_restore: the latest point a restore can fail, with the queues up. */
bool vb_test_hook_fail_restore(struct vballoon_dev *vb)
{
	if (!vb->test_hooks.fail_next_restore)
		return false;
	vb->test_hooks.fail_next_restore = false;
	dev_info(&vb->vdev->dev, "restore fails as asked (debugfs fail_next_restore)\n");
	return true;
}
