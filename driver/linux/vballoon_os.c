// SPDX-License-Identifier: GPL-2.0
/*
 * The kernel services behind the core's OS contract (vb::BalloonOs in
 * driver/core/include/vballoon/core/os_interface.h): pages, the balloon page list,
 * virtqueues, config space, memory statistics, the balloon lock and the log.
 *
 * Each function does what the core asks, in the kernel's terms; none of them decides
 * anything about the balloon.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/gfp.h>
#include <linux/highmem.h>
#include <linux/log2.h>
#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/mmzone.h>
#include <linux/poison.h>
#include <linux/printk.h>
#include <linux/scatterlist.h>
#include <linux/sizes.h>
#include <linux/string.h>
#include <linux/virtio.h>
#include <linux/virtio_balloon.h>
#include <linux/virtio_config.h>
#include <linux/vmstat.h>

#include "vballoon_dev.h"

/*
 * Blocks larger than a page are taken only if the allocator has them free: no reclaim or
 * compaction on their behalf (the core falls back to smaller orders instead), no retries,
 * no warning when there is none, no emergency reserves. Movable, like balloon_page_alloc(),
 * so the pages stay where compaction can move them.
 */
#define VB_OS_GFP_BLOCK                                                                            \
	((vb_balloon_gfp_mask() & ~__GFP_RECLAIM) | __GFP_NORETRY | __GFP_NOWARN | __GFP_NOMEMALLOC)
/*
 * A free page hint block, as virtio_balloon takes one (get_free_page_and_send()): no
 * reclaim, no retries, no warning, no reserves, and unmovable: nothing can migrate it while
 * the driver holds it, so it must not sit in ZONE_MOVABLE or CMA for a whole migration.
 */
#define VB_OS_GFP_HINT (__GFP_NORETRY | __GFP_NOWARN | __GFP_NOMEMALLOC)

/* How often a waiter looks whether the device broke (surprise removal wakes no one). */
#define VB_OS_BROKEN_POLL_JIFFIES HZ

bool vb_os_alloc_pages(struct vballoon_dev *vb, unsigned int order, bool hint_block, bool reclaim,
		       uint64_t *pfn)
{
	struct page *page;

	if (order > VB_MAX_PAGE_ORDER)
		return false;
	if (hint_block) {
		/*
		 * Stays whole: it only ever goes back in one piece (vb_os_free_page_run()), and
		 * splitting 1024 pages would cost the round time in its race with the migration.
		 */
		page = alloc_pages(VB_OS_GFP_HINT, order);
	} else if (order == 0) {
		/* balloon_page_alloc() reclaims lightly (__GFP_NORETRY); without it, only free pages. */
		page = reclaim ? balloon_page_alloc() : alloc_page(VB_OS_GFP_BLOCK);
	} else if (vb_whole_blocks_wanted(vb, order) && (page = vb_whole_block_alloc(order))) {
		/* Kept whole until it leaves the balloon (vballoon_whole_blocks.c). */
	} else {
		/*
		 * Smaller than a pageblock, or no unmovable block free (only ZONE_MOVABLE or
		 * CMA has one): split into movable pages.
		 */
		page = alloc_pages(VB_OS_GFP_BLOCK, order);
		/*
		 * Every page of a balloon block is enqueued, migrated and freed on its own, so
		 * it needs its own reference count.
		 */
		if (page)
			split_page(page, order);
	}
	if (!page)
		return false;
	*pfn = page_to_pfn(page);
	return true;
}

/*
 * A block allocated whole (a hint block), as the core says: only its first page holds a
 * reference. The core's word is checked against the block's shape, which costs nothing;
 * a misshapen run would free pages that are not ours.
 */
static bool vb_os_whole_block(const struct vballoon_page_run *run)
{
	if (!(run->flags & VB_OS_PAGE_RUN_WHOLE_BLOCK))
		return false;
	return !WARN_ON_ONCE(!is_power_of_2(run->count) || ilog2(run->count) > VB_MAX_PAGE_ORDER ||
			     !IS_ALIGNED(run->first_pfn, run->count));
}

void vb_os_free_page_run(struct vballoon_dev *vb, const struct vballoon_page_run *run)
{
	uint64_t i;

	/* A hint block goes back as it was allocated: one block, one reference. */
	if (vb_os_whole_block(run)) {
		__free_pages(pfn_to_page(run->first_pfn), ilog2(run->count));
		return;
	}

	/*
	 * A whole balloon block goes back in one piece too, with the last of its parts (a
	 * deflate's messages hold half a block each; vb_whole_blocks_free()). Every other
	 * page was split from its block when allocated and holds its own reference (the balloon's, or just its allocation's for pages the core never
	 * enqueued): as virtio_balloon's release_pages_balloon(), each reference is dropped on
	 * its own with put_page(), and the allocator merges the buddies itself (an order-0
	 * free goes to the per-CPU lists, so batching through release_pages() would save
	 * little and cost 128 bytes of array on the OOM notifier's stack, which
	 * deflate_for_oom() reaches this from). Never re-joined into higher-order blocks by hand: mm does not allow
	 * it (from 6.17 every joined tail page is a "Bad page state"). The allocator applies
	 * init_on_free or poisoning to every page it gets back, device initialised or not:
	 * the kernel has no way to skip that for a page.
	 */
	for (i = 0; i < run->count;) {
		uint64_t n =
			vb_whole_blocks_free(vb, run->first_pfn + i, run->first_pfn + run->count);

		if (!n) {
			put_page(pfn_to_page(run->first_pfn + i));
			n = 1;
		}
		i += n;
	}
}

/*
 * Pages per balloon_page_list_enqueue() call: it holds the balloon list's lock with
 * interrupts off for the whole list, and a chunked run may be 262144 pages (1 GiB).
 */
#define VB_OS_ENQUEUE_BATCH 512

/* Whole blocks go on their own list; every other page on balloon compaction's. */
void vb_os_balloon_list_insert(struct vballoon_dev *vb, const struct vballoon_page_run *run)
{
	uint64_t done = 0;

	while (done < run->count) {
		size_t batched = 0;
		LIST_HEAD(pages);

		/* balloon_page_list_enqueue() keeps the list's order: ascending PFNs. */
		while (done < run->count && batched < VB_OS_ENQUEUE_BATCH) {
			uint64_t n = vb_whole_blocks_insert(vb, run->first_pfn + done,
							    run->first_pfn + run->count);

			if (!n) {
				list_add_tail(&pfn_to_page(run->first_pfn + done)->lru, &pages);
				batched++;
				n = 1;
			}
			done += n;
		}
		if (batched)
			balloon_page_list_enqueue(&vb->b_dev_info, &pages);
		cond_resched();
	}
}

/*
 * The pages of a deflate the host did not acknowledge stay ballooned, but not on the
 * balloon list: balloon_page_list_enqueue() is for fresh pages only. A dequeued page keeps
 * its movable marker in page->mapping, so compaction's isolate path may hold a reference
 * and the page lock at any moment (it finds the page no longer movable and lets go), and
 * balloon_page_enqueue_one() BUG()s when its trylock_page() fails. Off every list the
 * page is out of compaction's reach; the next deflate asks the host for it again, and after
 * a reset it goes back to the guest (release_after_reset()). Called under the balloon lock.
 */
void vb_os_balloon_hold(struct vballoon_dev *vb, const struct vballoon_page_run *run)
{
	uint64_t i;

	for (i = 0; i < run->count; i++) {
		struct page *page = pfn_to_page(run->first_pfn + i);

		/* Held page by page, as compaction's pages are: a whole block is split. */
		vb_whole_block_break_up(vb, page);
		list_add_tail(&page->lru, &vb->held_pages);
		vb_balloon_count_off_list(page, 1);
	}
	vb->nr_held_pages += run->count;
}

static size_t vb_os_add_to_runs(struct vballoon_page_run *runs, size_t nr_runs, uint64_t pfn);

size_t vb_os_balloon_held_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			       size_t max_runs, uint64_t max_pages)
{
	struct page *page, *next;
	uint64_t taken = 0;
	size_t nr_runs = 0;

	list_for_each_entry_safe(page, next, &vb->held_pages, lru) {
		uint64_t pfn = page_to_pfn(page);
		struct vballoon_page_run *last = nr_runs ? &runs[nr_runs - 1] : NULL;

		if (taken == max_pages)
			break;
		/* A page that starts a run needs a free run slot. */
		if (nr_runs == max_runs && !(last->first_pfn + last->count == pfn ||
					     pfn + 1 == last->first_pfn))
			break;
		list_del(&page->lru);
		vb_balloon_count_off_list(page, -1);
		nr_runs = vb_os_add_to_runs(runs, nr_runs, pfn);
		taken++;
	}
	vb->nr_held_pages -= taken;
	return nr_runs;
}

/* Adds pages to the last run when they extend it at either end, else starts a run. */
size_t vb_os_add_range_to_runs(struct vballoon_page_run *runs, size_t nr_runs, uint64_t pfn,
			       uint64_t count)
{
	struct vballoon_page_run *last = nr_runs ? &runs[nr_runs - 1] : NULL;

	if (last && last->first_pfn + last->count == pfn) {
		last->count += count;
		return nr_runs;
	}
	if (last && pfn + count == last->first_pfn) {
		last->first_pfn = pfn;
		last->count += count;
		return nr_runs;
	}
	runs[nr_runs].first_pfn = pfn;
	runs[nr_runs].count = count;
	runs[nr_runs].flags = 0;
	return nr_runs + 1;
}

static size_t vb_os_add_to_runs(struct vballoon_page_run *runs, size_t nr_runs, uint64_t pfn)
{
	return vb_os_add_range_to_runs(runs, nr_runs, pfn, 1);
}

size_t vb_os_balloon_list_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			       size_t max_runs, uint64_t max_pages)
{
	uint64_t taken;
	size_t nr_runs;

	/*
	 * Whole blocks first, newest first, then balloon compaction's pages, newest first: a
	 * block back costs the allocator one call, and the pages compaction may move stay.
	 */
	nr_runs = vb_whole_blocks_take(vb, runs, max_runs, max_pages, &taken);
	/*
	 * Never more pages at once than there are free runs left, so every page taken has a
	 * run to go to, however scattered the pages are.
	 */
	while (taken < max_pages && nr_runs < max_runs) {
		size_t batch = min_t(u64, max_pages - taken, max_runs - nr_runs);
		struct page *page, *next;
		LIST_HEAD(pages);
		size_t n;

		/* Skips pages compaction has isolated: fewer than asked is not "empty". */
		n = balloon_page_list_dequeue(&vb->b_dev_info, &pages, batch);
		if (!n)
			break;
		taken += n;
		/*
		 * The dequeue walks the balloon list newest first and pushes each page on the
		 * head of ours: ours is walked from the tail to hand out the newest first.
		 */
		list_for_each_entry_safe_reverse(page, next, &pages, lru) {
			list_del(&page->lru);
			nr_runs = vb_os_add_to_runs(runs, nr_runs, page_to_pfn(page));
		}
	}
	return nr_runs;
}

void vb_os_balloon_list_mark_initialised(struct vballoon_dev *vb,
					 const struct vballoon_page_run *run)
{
	/*
	 * Nothing to record: the allocator initialises every page freed to it (see
	 * vb_os_free_page_run()), so the device's promise saves no work in this kernel, and
	 * the runs taken off the balloon list carry no flags.
	 */
}

void vb_os_balloon_list_replace(struct vballoon_dev *vb, uint64_t old_pfn, uint64_t new_pfn)
{
#ifdef VB_BALLOON_MIGRATION
	/*
	 * The managed page count follows in the core (adjust_managed_pages); the old page
	 * leaves the balloon once migratepage returns (vballoon_migratepage()).
	 */
	vb_balloon_migrated_insert(&vb->b_dev_info, pfn_to_page(new_pfn));
#else
	/* Only the migration callback moves pages, and it exists only with migration. */
	WARN_ON_ONCE(1);
#endif
}

void vb_os_adjust_managed_pages(struct vballoon_dev *vb, const struct vballoon_page_run *run,
				bool add)
{
	uint64_t done = 0;

	/* Managed pages are counted per zone, and a run of PFNs may cross a zone boundary. */
	while (done < run->count) {
		struct page *page = pfn_to_page(run->first_pfn + done);
		struct zone *zone = page_zone(page);
		long n = 1;

		while (done + n < run->count &&
		       page_zone(pfn_to_page(run->first_pfn + done + n)) == zone)
			n++;
		adjust_managed_page_count(page, add ? n : -n);
		done += n;
	}
}

void vb_os_initialise_pages(struct vballoon_dev *vb, const struct vballoon_page_run *run)
{
	/*
	 * Asked for by zero_on_inflate: zero, or the poison page poisoning expects of a free
	 * page (what the allocator itself would write).
	 */
	uint8_t byte = !want_init_on_free() && page_poisoning_enabled_static() ? PAGE_POISON : 0;
	uint64_t i;

	for (i = 0; i < run->count; i++) {
		void *address = kmap_local_page(pfn_to_page(run->first_pfn + i));

		memset(address, byte, PAGE_SIZE);
		kunmap_local(address);
	}
}

uint64_t vb_os_phys_addr(const void *buffer)
{
	/* Only the linear map (kmalloc memory, where the core lives) has a physical address. */
	WARN_ON_ONCE(!virt_addr_valid(buffer));
	return virt_to_phys((void *)buffer);
}

static struct virtqueue *vb_os_vq(struct vballoon_dev *vb, unsigned int kind)
{
	if (WARN_ON_ONCE(kind >= VB_QUEUE_KIND_COUNT || !vb->vqs[kind]))
		return NULL;
	return vb->vqs[kind];
}

/*
 * virtqueue_add_sgs()'s scatterlists for `kind`, as many entries as the core's longest chain
 * on it: virtqueue users already serialise their calls per queue, so one set per queue will
 * do. free_page_vq's chains of hint blocks are far longer than the others', so its set is
 * allocated apart (vballoon_free_pages_init()). Returns how many entries there are.
 */
static unsigned int vb_os_queue_scratch(struct vballoon_dev *vb, unsigned int kind,
					struct scatterlist **sg, struct scatterlist ***sgs)
{
	if (kind == VB_QUEUE_FREE_PAGE) {
		if (WARN_ON_ONCE(!vb->hint_sg))
			return 0;
		*sg = vb->hint_sg->sg;
		*sgs = vb->hint_sg->sgs;
		return VB_OS_HINT_CHAIN_SEGMENTS_MAX;
	}
	*sg = vb->sg[kind];
	*sgs = vb->sgs[kind];
	return VB_OS_MAX_SEGMENTS;
}

bool vb_os_queue_add(struct vballoon_dev *vb, unsigned int kind, const struct vballoon_segment *out,
		     unsigned int n_out, const struct vballoon_segment *in, unsigned int n_in,
		     void *token)
{
	struct virtqueue *vq = vb_os_vq(vb, kind);
	struct scatterlist *sg, **sgs;
	unsigned int i, max_segments;
	gfp_t gfp;

	if (!vq)
		return false;
	max_segments = vb_os_queue_scratch(vb, kind, &sg, &sgs);
	if (WARN_ON_ONCE(n_out + n_in == 0 || n_out + n_in > max_segments))
		return false;
	if (vb_test_hook_refuse_buffer(vb, kind))
		return false;

	for (i = 0; i < n_out + n_in; i++) {
		const struct vballoon_segment *seg = i < n_out ? &out[i] : &in[i - n_out];
		uint32_t len = seg->len;

		if (i == 0 && vb_test_hook_shorten_segment(vb, kind, seg))
			len -= SZ_2K;
		/* The core's buffers are kmalloc memory: physically contiguous across pages. */
		sg_init_table(&sg[i], 1);
		sg_set_page(&sg[i], pfn_to_page(PHYS_PFN(seg->phys_addr)), len,
			    offset_in_page(seg->phys_addr));
		sgs[i] = &sg[i];
	}

	/*
	 * Never reclaim here: deflate_for_oom() comes through this from the OOM notifier, and
	 * every caller holds the balloon lock that the notifier takes. The only allocation
	 * virtio_ring makes is an indirect table for chains of more than one segment, and when
	 * it fails it uses direct descriptors instead; the core's one-segment messages never
	 * allocate at all. free_page_vq alone may sleep: only the hint work item adds to it,
	 * without the balloon lock, and a chain of hint blocks (up to 8 KiB of table) would
	 * otherwise take a descriptor per segment whenever memory is short. The core counts one
	 * descriptor per block, so it fits either way.
	 */
	gfp = kind == VB_QUEUE_FREE_PAGE ? GFP_KERNEL : GFP_NOWAIT | __GFP_NOWARN;
	return virtqueue_add_sgs(vq, sgs, n_out, n_in, token, gfp) == 0;
}

void vb_os_queue_kick(struct vballoon_dev *vb, unsigned int kind)
{
	struct virtqueue *vq = vb_os_vq(vb, kind);

	if (vq)
		virtqueue_kick(vq);
}

void *vb_os_queue_get_used(struct vballoon_dev *vb, unsigned int kind, uint32_t *len)
{
	struct virtqueue *vq = vb_os_vq(vb, kind);
	unsigned int used_len = 0;
	void *token;

	if (!vq)
		return NULL;
	token = virtqueue_get_buf(vq, &used_len);
	*len = used_len;
	return token;
}

void *vb_os_queue_wait_used(struct vballoon_dev *vb, unsigned int kind, uint32_t *len)
{
	struct virtqueue *vq = vb_os_vq(vb, kind);
	unsigned int used_len = 0;
	void *token = NULL;

	if (!vq)
		return NULL;
	/* The free page queue interrupts only while someone waits (vballoon_init_vqs()). */
	if (kind == VB_QUEUE_FREE_PAGE)
		virtqueue_enable_cb(vq);
	for (;;) {
		/* The queue's callback wakes `acked` (vballoon_ack). */
		wait_event_timeout(vb->acked, (token = virtqueue_get_buf(vq, &used_len)),
				   VB_OS_BROKEN_POLL_JIFFIES);
		if (token)
			break;
		/* A broken queue (the device went away) will never return the buffer. */
		if (virtqueue_is_broken(vq))
			break;
		/*
		 * Remove and freeze stop a hint round that may already sleep here
		 * (vb::FreePageHinter::hint_stopping()); the core checks before it waits.
		 */
		if (kind == VB_QUEUE_FREE_PAGE && vballoon_core_hint_stopping(vb->core))
			break;
	}
	if (kind == VB_QUEUE_FREE_PAGE)
		virtqueue_disable_cb(vq);
	if (!token)
		return NULL;
	*len = used_len;
	return token;
}

bool vb_os_queue_broken(struct vballoon_dev *vb, unsigned int kind)
{
	struct virtqueue *vq = vb_os_vq(vb, kind);

	vb_test_hook_queue_asked_if_broken(vb, kind);
	return !vq || virtqueue_is_broken(vq);
}

uint32_t vb_os_queue_size(struct vballoon_dev *vb, unsigned int kind)
{
	struct virtqueue *vq = vb_os_vq(vb, kind);

	return vq ? virtqueue_get_vring_size(vq) : 0;
}

/*
 * The core names config fields by their offsets in the spec's layout (static_asserts in
 * vballoon_main.c tie them to struct virtio_balloon_config); virtio's accessors name them
 * by member, and do the little-endian conversion and the one 4-byte access the spec asks
 * for, even on legacy devices.
 */
uint32_t vb_os_config_read32(struct vballoon_dev *vb, uint32_t offset)
{
	u32 value = 0;

	switch (offset) {
	case offsetof(struct virtio_balloon_config, num_pages):
		virtio_cread_le(vb->vdev, struct virtio_balloon_config, num_pages, &value);
		break;
	case offsetof(struct virtio_balloon_config, actual):
		virtio_cread_le(vb->vdev, struct virtio_balloon_config, actual, &value);
		break;
	case offsetof(struct virtio_balloon_config, free_page_hint_cmd_id):
		virtio_cread_le(vb->vdev, struct virtio_balloon_config, free_page_hint_cmd_id,
				&value);
		break;
	case offsetof(struct virtio_balloon_config, poison_val):
		virtio_cread_le(vb->vdev, struct virtio_balloon_config, poison_val, &value);
		break;
	default:
		WARN_ONCE(1, "vballoon: config read at unknown offset %u\n", offset);
	}
	return value;
}

void vb_os_config_write32(struct vballoon_dev *vb, uint32_t offset, uint32_t value)
{
	u32 v = value;

	switch (offset) {
	case offsetof(struct virtio_balloon_config, num_pages):
		virtio_cwrite_le(vb->vdev, struct virtio_balloon_config, num_pages, &v);
		break;
	case offsetof(struct virtio_balloon_config, actual):
		virtio_cwrite_le(vb->vdev, struct virtio_balloon_config, actual, &v);
		break;
	case offsetof(struct virtio_balloon_config, free_page_hint_cmd_id):
		virtio_cwrite_le(vb->vdev, struct virtio_balloon_config, free_page_hint_cmd_id, &v);
		break;
	case offsetof(struct virtio_balloon_config, poison_val):
		virtio_cwrite_le(vb->vdev, struct virtio_balloon_config, poison_val, &v);
		break;
	default:
		WARN_ONCE(1, "vballoon: config write at unknown offset %u\n", offset);
	}
}

static uint64_t pages_to_bytes(unsigned long pages)
{
	return (uint64_t)pages << PAGE_SHIFT;
}

/*
 * Every populated zone's high watermark (boost included) and the most it holds back from
 * allocations of higher zones (lowmem_reserve), at most what it manages: the sum the
 * kernel keeps as totalreserve_pages (calculate_totalreserve_pages()). Free memory below it
 * makes the next allocation wake kswapd, or below the min watermark reclaim directly.
 *
 * No exported interface gives that sum: totalreserve_pages is not exported, and
 * si_mem_available() or nr_free_buffer_pages() fold it into other figures. So it is derived
 * here from what is: node_data and the node masks (both exported) and the zones' own
 * fields, the same ones mm's helpers read. Its limits: mm updates these fields under its
 * own locks (watermark boosts under the zone lock, reserves and watermarks under the
 * sysctl path), so each is read once (READ_ONCE, no lock) and the sum may mix values from
 * before and after an update; it is a free page hinting reserve, where a stale boost only
 * moves where a round stops by that boost, never a correctness rule.
 */
uint64_t vb_os_free_pages_kept(void)
{
	uint64_t kept = 0;
	int nid;

	for_each_online_node(nid) {
		pg_data_t *pgdat = NODE_DATA(nid);
		int zid, j;

		for (zid = 0; zid < MAX_NR_ZONES; zid++) {
			struct zone *zone = &pgdat->node_zones[zid];
			unsigned long reserve = 0, high;

			if (!populated_zone(zone))
				continue;
			for (j = zid; j < MAX_NR_ZONES; j++)
				reserve = max(reserve,
					      (unsigned long)READ_ONCE(zone->lowmem_reserve[j]));
			high = READ_ONCE(zone->_watermark[WMARK_HIGH]) +
			       READ_ONCE(zone->watermark_boost);
			kept += min(high + reserve, zone_managed_pages(zone));
		}
	}
	return kept;
}

/*
 * The pressure governor's signals, all through exported interfaces: the vm event counters
 * (all_vm_events()), the node counters behind /proc/vmstat and si_mem_available(). PSI's
 * system totals (psi_system) are not exported, so stall time is left out (has_stall_time
 * false); allocation stalls and refaults stand in for it.
 */
void vb_os_pressure_sample(struct vballoon_pressure_sample *sample)
{
	struct sysinfo info;

	memset(sample, 0, sizeof(*sample));
	sample->now_ms = ktime_get_ns() / NSEC_PER_MSEC;
#ifdef CONFIG_VM_EVENT_COUNTERS
	{
		unsigned long events[NR_VM_EVENT_ITEMS];
		int zid;

		all_vm_events(events);
		for (zid = 0; zid < MAX_NR_ZONES; zid++)
			sample->alloc_stalls += events[ALLOCSTALL_NORMAL - ZONE_NORMAL + zid];
		sample->direct_scans = vb_reclaim_count(events, PGSCAN_DIRECT);
		sample->reclaim_scanned = vb_reclaim_count(events, PGSCAN_KSWAPD) +
					  vb_reclaim_count(events, PGSCAN_DIRECT);
		sample->reclaim_stolen = vb_reclaim_count(events, PGSTEAL_KSWAPD) +
					 vb_reclaim_count(events, PGSTEAL_DIRECT);
		sample->major_faults = events[PGMAJFAULT];
		sample->oom_kills = events[OOM_KILL];
	}
#endif
	sample->refaults = global_node_page_state(WORKINGSET_REFAULT_ANON) +
			   global_node_page_state(WORKINGSET_REFAULT_FILE);
	si_meminfo(&info);
	sample->free_pages = info.freeram;
	sample->total_pages = info.totalram;
	sample->available_pages = si_mem_available();
	sample->file_pages = global_node_page_state(NR_FILE_PAGES);
	sample->file_lru_pages =
		global_node_page_state(NR_ACTIVE_FILE) + global_node_page_state(NR_INACTIVE_FILE);
	sample->mapped_file_pages = global_node_page_state(NR_FILE_MAPPED);
}

/*
 * The tags Linux 6.1's virtio_balloon reports, plus the 6.12 ones (10-15) that the same
 * event counters already give. The set depends only on the kernel's configuration, so it
 * never changes while the module is loaded, as the spec requires of the stats buffer.
 */
uint32_t vb_os_memory_stats(struct vballoon_dev *vb, uint64_t *values)
{
	struct sysinfo info;
	uint32_t mask = 0;

#ifdef CONFIG_VM_EVENT_COUNTERS
	{
		unsigned long events[NR_VM_EVENT_ITEMS];
		unsigned long stalls = 0;
		int zid;

		all_vm_events(events);
		values[VB_S_SWAP_IN] = pages_to_bytes(events[PSWPIN]);
		values[VB_S_SWAP_OUT] = pages_to_bytes(events[PSWPOUT]);
		values[VB_S_MAJFLT] = events[PGMAJFAULT];
		values[VB_S_MINFLT] = events[PGFAULT];
		mask |= BIT(VB_S_SWAP_IN) | BIT(VB_S_SWAP_OUT) | BIT(VB_S_MAJFLT) |
			BIT(VB_S_MINFLT);
#ifdef CONFIG_HUGETLB_PAGE
		values[VB_S_HTLB_PGALLOC] = events[HTLB_BUDDY_PGALLOC];
		values[VB_S_HTLB_PGFAIL] = events[HTLB_BUDDY_PGALLOC_FAIL];
		mask |= BIT(VB_S_HTLB_PGALLOC) | BIT(VB_S_HTLB_PGFAIL);
#endif
		/* ALLOCSTALL_* is one counter per zone, in zone order. */
		for (zid = 0; zid < MAX_NR_ZONES; zid++)
			stalls += events[ALLOCSTALL_NORMAL - ZONE_NORMAL + zid];
		values[VB_S_OOM_KILL] = events[OOM_KILL];
		values[VB_S_ALLOC_STALL] = stalls;
		values[VB_S_ASYNC_SCAN] = pages_to_bytes(vb_reclaim_count(events, PGSCAN_KSWAPD));
		values[VB_S_DIRECT_SCAN] = pages_to_bytes(vb_reclaim_count(events, PGSCAN_DIRECT));
		values[VB_S_ASYNC_RECLAIM] =
			pages_to_bytes(vb_reclaim_count(events, PGSTEAL_KSWAPD));
		values[VB_S_DIRECT_RECLAIM] =
			pages_to_bytes(vb_reclaim_count(events, PGSTEAL_DIRECT));
		mask |= BIT(VB_S_OOM_KILL) | BIT(VB_S_ALLOC_STALL) | BIT(VB_S_ASYNC_SCAN) |
			BIT(VB_S_DIRECT_SCAN) | BIT(VB_S_ASYNC_RECLAIM) | BIT(VB_S_DIRECT_RECLAIM);
	}
#endif
	si_meminfo(&info);
	values[VB_S_MEMFREE] = pages_to_bytes(info.freeram);
	values[VB_S_MEMTOT] = pages_to_bytes(info.totalram);
	values[VB_S_AVAIL] = pages_to_bytes(si_mem_available());
	values[VB_S_CACHES] = pages_to_bytes(global_node_page_state(NR_FILE_PAGES));
	mask |= BIT(VB_S_MEMFREE) | BIT(VB_S_MEMTOT) | BIT(VB_S_AVAIL) | BIT(VB_S_CACHES);
	/*
	 * Issue 247's tags, which the core sends only with VB_F_X_PRESSURE. Its PSI totals
	 * (23-26) are left out: psi_system is not exported to modules.
	 */
	values[VB_S_DIRTY] = pages_to_bytes(global_node_page_state(NR_FILE_DIRTY));
	values[VB_S_WRITEBACK] = pages_to_bytes(global_node_page_state(NR_WRITEBACK));
	values[VB_S_ANON] = pages_to_bytes(global_node_page_state(NR_ANON_MAPPED));
	values[VB_S_INACTIVE_FILE] = pages_to_bytes(global_node_page_state(NR_INACTIVE_FILE));
	values[VB_S_SLAB_RECLAIM] =
		pages_to_bytes(global_node_page_state_pages(NR_SLAB_RECLAIMABLE_B));
	values[VB_S_WS_REFAULT_ANON] = global_node_page_state(WORKINGSET_REFAULT_ANON);
	values[VB_S_WS_REFAULT_FILE] = global_node_page_state(WORKINGSET_REFAULT_FILE);
	mask |= BIT(VB_S_DIRTY) | BIT(VB_S_WRITEBACK) | BIT(VB_S_ANON) | BIT(VB_S_INACTIVE_FILE) |
		BIT(VB_S_SLAB_RECLAIM) | BIT(VB_S_WS_REFAULT_ANON) | BIT(VB_S_WS_REFAULT_FILE);
	return mask;
}

void vb_os_lock(struct vballoon_dev *vb)
{
	mutex_lock(&vb->balloon_lock);
}

void vb_os_unlock(struct vballoon_dev *vb)
{
	mutex_unlock(&vb->balloon_lock);
}

bool vb_os_try_lock(struct vballoon_dev *vb)
{
	return mutex_trylock(&vb->balloon_lock);
}

/*
 * The core's messages, as the device's own: dev_err() and friends, which put the driver's
 * and the device's names in front (the core's messages carry no prefix of their own), and
 * debug messages through dev_dbg(), which dynamic debug switches on
 * (echo 'module vballoon +p' > /sys/kernel/debug/dynamic_debug/control).
 */
void vb_os_vlog(struct vballoon_dev *vb, unsigned int level, const char *fmt, va_list args)
{
	struct device *device = &vb->vdev->dev;
	struct va_format vaf;
	va_list copy;

	/* A va_list parameter is a pointer in disguise on x86-64: %pV needs a real one. */
	va_copy(copy, args);
	vaf.fmt = fmt;
	vaf.va = &copy;
	switch (level) {
	case VB_OS_LOG_ERROR:
		dev_err(device, "%pV", &vaf);
		break;
	case VB_OS_LOG_WARNING:
		dev_warn(device, "%pV", &vaf);
		break;
	case VB_OS_LOG_INFO:
		dev_info(device, "%pV", &vaf);
		break;
	default:
		dev_dbg(device, "%pV", &vaf);
		break;
	}
	va_end(copy);
}

void vb_invariant_failed(const char *condition, const char *file, int line)
{
	WARN_ONCE(1, KBUILD_MODNAME ": invariant failed: %s (%s:%d)\n", condition, file, line);
}
