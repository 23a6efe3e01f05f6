// SPDX-License-Identifier: GPL-2.0
/*
 * Whole balloon blocks: inflate's blocks of a pageblock or more, kept as the allocator gave
 * them (one allocation, never split, unmovable) on a list of their own beside balloon
 * compaction's. Entering and leaving the balloon then costs one allocator call per block
 * instead of one per page, and a list operation per block instead of a locked enqueue or
 * dequeue per page, which is what deflate spent its time on (driver/linux/README.md,
 * "Whole blocks"). vmw_balloon and hv_balloon keep their 2 MiB pages the same way.
 *
 * What compaction loses: nothing it could use. A whole block fills its pageblocks, so it
 * splits no free range; compaction could only have moved its pages to empty those very
 * pageblocks, for memory the host holds anyway. The blocks are unmovable allocations, so
 * they never come from ZONE_MOVABLE or CMA, which must stay movable for memory offlining
 * and contiguous allocations; where only those have free blocks the allocation fails and
 * inflate falls back to split, movable pages (vb_os_alloc_pages()).
 *
 * Finding a block from any of its pages: the core hands back runs of pages, and a run may
 * start or end inside a block (a PFN message holds 256 pages, half of a 2 MiB block, and
 * the host acknowledges each message on its own). Every page of a whole block carries
 * VB_WHOLE_BLOCK_MARK | order in page->private, from allocation to the free or the split;
 * the driver's other pages have 0 there (the allocator clears it and balloon compaction's
 * dequeue does too), and only pages the driver owns are ever looked at. A block joins the
 * list once all its pages were inserted, in whatever order their parts came (each inserted
 * page carries VB_WHOLE_BLOCK_INSERTED until then). Leaving works the same way: a deflate's
 * messages acknowledge a block in parts too, and each part given back carries
 * VB_WHOLE_BLOCK_RELEASED until the last part frees the block in one piece (splitting it
 * at the first part would free 512 pages one by one, the cost whole blocks exist to
 * avoid). A block whose parts go different ways (some inserted, some freed: pages never
 * sent, a deflate the host refused in part) is split (split_page()) into order-0 pages:
 * its inserted ones go on balloon compaction's list, from then on ordinary balloon pages,
 * its released ones back to the allocator.
 *
 * PageOffline is set on a block's pages while the block is on the list, as balloon
 * compaction sets it on its pages, so dump tools skip memory the host holds.
 *
 * The list is guarded by the balloon lock, like the held pages.
 */
#include <linux/gfp.h>
#include <linux/list.h>
#include <linux/log2.h>
#include <linux/mm.h>

#include "vballoon_dev.h"

/* "vb" in the bits above the order: no kernel pointer and no order-0 page's value. */
#define VB_WHOLE_BLOCK_MARK 0x76620000UL
#define VB_WHOLE_BLOCK_INSERTED 0x100UL
#define VB_WHOLE_BLOCK_RELEASED 0x200UL
#define VB_WHOLE_BLOCK_PART_BITS (VB_WHOLE_BLOCK_INSERTED | VB_WHOLE_BLOCK_RELEASED)
#define VB_WHOLE_BLOCK_ORDER_MASK 0xffUL

/*
 * Taken only if free: no reclaim, compaction, retries, warning or reserves (as balloon
 * blocks are), and unmovable (see above).
 */
#define VB_WHOLE_BLOCK_GFP (__GFP_HIGHMEM | __GFP_NORETRY | __GFP_NOWARN | __GFP_NOMEMALLOC)

bool vb_whole_blocks_wanted(const struct vballoon_dev *vb, unsigned int order)
{
	return vb->keep_blocks_whole && order >= pageblock_order;
}

static void vb_whole_block_mark(struct page *first, uint64_t count, unsigned long mark)
{
	uint64_t i;

	for (i = 0; i < count; i++)
		set_page_private(first + i, mark);
}

/* Pages of a block (order `order`) that are in the balloon before the block is. */
static void vb_whole_block_mark_inserted(struct page *first, uint64_t count, unsigned int order)
{
	vb_whole_block_mark(first, count, VB_WHOLE_BLOCK_INSERTED | VB_WHOLE_BLOCK_MARK | order);
}

struct page *vb_whole_block_alloc(unsigned int order)
{
	struct page *head = alloc_pages(VB_WHOLE_BLOCK_GFP, order);

	if (head)
		vb_whole_block_mark(head, 1ULL << order, VB_WHOLE_BLOCK_MARK | order);
	return head;
}

/* The whole block a page the driver owns belongs to, or NULL. */
static struct page *vb_whole_block_of(struct page *page, unsigned int *order)
{
	unsigned long mark = page_private(page) & ~VB_WHOLE_BLOCK_PART_BITS;
	struct page *head;

	if ((mark & ~VB_WHOLE_BLOCK_ORDER_MASK) != VB_WHOLE_BLOCK_MARK)
		return NULL;
	*order = mark & VB_WHOLE_BLOCK_ORDER_MASK;
	if (WARN_ON_ONCE(*order > VB_MAX_PAGE_ORDER))
		return NULL;
	head = pfn_to_page(ALIGN_DOWN(page_to_pfn(page), 1UL << *order));
	/* A head without the same mark would be a page that is not ours: leave it alone. */
	if (WARN_ON_ONCE((page_private(head) & ~VB_WHOLE_BLOCK_PART_BITS) != mark))
		return NULL;
	return head;
}

/*
 * From here on the block's pages are order-0 pages with a reference each: those already
 * inserted go on balloon compaction's list, those already released back to the allocator,
 * and the others are the caller's.
 */
static void vb_whole_block_split(struct vballoon_dev *vb, struct page *head, unsigned int order)
{
	unsigned long i, inserted = 0;
	LIST_HEAD(pages);
	LIST_HEAD(released);

	for (i = 0; i < 1UL << order; i++) {
		if (page_private(head + i) & VB_WHOLE_BLOCK_INSERTED) {
			list_add_tail(&(head + i)->lru, &pages);
			inserted++;
		} else if (page_private(head + i) & VB_WHOLE_BLOCK_RELEASED) {
			list_add_tail(&(head + i)->lru, &released);
		}
		set_page_private(head + i, 0);
	}
	split_page(head, order);
	WRITE_ONCE(vb->whole_blocks_split, vb->whole_blocks_split + 1);
	if (inserted)
		balloon_page_list_enqueue(&vb->b_dev_info, &pages);
	while (!list_empty(&released)) {
		struct page *page = list_first_entry(&released, struct page, lru);

		list_del(&page->lru);
		put_page(page);
	}
}

/* The block's pages from `pfn` up to `end` or the block's end, whichever comes first. */
static uint64_t vb_whole_block_part(struct page *head, unsigned int order, uint64_t pfn,
				    uint64_t end)
{
	return min_t(u64, end, page_to_pfn(head) + (1ULL << order)) - pfn;
}

/* Onto the list: the block is the balloon's, whole. */
static void vb_whole_blocks_add(struct vballoon_dev *vb, struct page *head, unsigned int order)
{
	unsigned long i;

	for (i = 0; i < 1UL << order; i++) {
		set_page_private(head + i, VB_WHOLE_BLOCK_MARK | order);
		__SetPageOffline(head + i);
	}
	list_add(&head->lru, &vb->whole_blocks);
	vb->nr_whole_block_pages += 1UL << order;
	vb_balloon_count_off_list(head, 1L << order);
}

/*
 * Part of a block, `count` pages from `pfn`, went one way (`bit`: inserted into the balloon,
 * or released from it). True once the whole block has gone that way; a block whose parts
 * went different ways is split, and never will be.
 */
static bool vb_whole_block_part_went(struct vballoon_dev *vb, struct page *head, unsigned int order,
				     uint64_t pfn, uint64_t count, unsigned long bit)
{
	unsigned long i, same = 0;

	vb_whole_block_mark(pfn_to_page(pfn), count, bit | VB_WHOLE_BLOCK_MARK | order);
	for (i = 0; i < 1UL << order; i++) {
		unsigned long part = page_private(head + i) & VB_WHOLE_BLOCK_PART_BITS;

		if (part && part != bit) {
			vb_whole_block_split(vb, head, order);
			return false;
		}
		same += part == bit;
	}
	return same == 1UL << order;
}

uint64_t vb_whole_blocks_insert(struct vballoon_dev *vb, uint64_t pfn, uint64_t end)
{
	unsigned int order;
	struct page *head = vb_whole_block_of(pfn_to_page(pfn), &order);
	uint64_t count;

	if (!head)
		return 0;
	count = vb_whole_block_part(head, order, pfn, end);
	/* Part of the block: it joins the list once every part is in. */
	if (count < 1ULL << order &&
	    !vb_whole_block_part_went(vb, head, order, pfn, count, VB_WHOLE_BLOCK_INSERTED))
		return count;
	vb_whole_blocks_add(vb, head, order);
	return count;
}

uint64_t vb_whole_blocks_free(struct vballoon_dev *vb, uint64_t pfn, uint64_t end)
{
	unsigned int order;
	struct page *head = vb_whole_block_of(pfn_to_page(pfn), &order);
	uint64_t count;

	if (!head)
		return 0;
	count = vb_whole_block_part(head, order, pfn, end);
	/* Part of the block (a deflate message holds half of one): it goes back with the last. */
	if (count < 1ULL << order &&
	    !vb_whole_block_part_went(vb, head, order, pfn, count, VB_WHOLE_BLOCK_RELEASED))
		return count;
	vb_whole_block_mark(head, 1ULL << order, 0);
	__free_pages(head, order);
	WRITE_ONCE(vb->whole_blocks_freed, vb->whole_blocks_freed + 1);
	return count;
}

void vb_whole_block_break_up(struct vballoon_dev *vb, struct page *page)
{
	unsigned int order;
	struct page *head = vb_whole_block_of(page, &order);

	if (head)
		vb_whole_block_split(vb, head, order);
}

/* Off the list: the block is the caller's again, whole and still marked. */
static void vb_whole_blocks_remove(struct vballoon_dev *vb, struct page *head, unsigned int order)
{
	unsigned long i;

	list_del(&head->lru);
	for (i = 0; i < 1UL << order; i++)
		__ClearPageOffline(head + i);
	vb->nr_whole_block_pages -= 1UL << order;
	vb_balloon_count_off_list(head, -(1L << order));
}

size_t vb_whole_blocks_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			    size_t max_runs, uint64_t max_pages, uint64_t *taken)
{
	size_t nr_runs = 0;

	*taken = 0;
	while (*taken < max_pages && nr_runs < max_runs && !list_empty(&vb->whole_blocks)) {
		struct page *head = list_first_entry(&vb->whole_blocks, struct page, lru);
		unsigned int order = page_private(head) & VB_WHOLE_BLOCK_ORDER_MASK;
		uint64_t count = 1ULL << order;

		vb_whole_blocks_remove(vb, head, order);
		if (count > max_pages - *taken) {
			/*
			 * Asked for less than a block (the OOM notifier's 1 MiB, a target that
			 * is not a multiple of it): the rest stays ballooned as movable pages.
			 */
			uint64_t keep = max_pages - *taken;

			vb_whole_block_mark_inserted(head + keep, count - keep, order);
			vb_whole_block_split(vb, head, order);
			count = keep;
		}
		nr_runs = vb_os_add_range_to_runs(runs, nr_runs, page_to_pfn(head), count);
		*taken += count;
	}
	return nr_runs;
}
