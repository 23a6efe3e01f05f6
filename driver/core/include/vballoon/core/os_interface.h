// SPDX-License-Identifier: GPL-2.0
//
// The one narrow contract between the balloon core and the OS it runs in. It is implemented
// twice: by the Linux module (driver/linux/) and by the simulator's guest (device-sim/guest/).
// The core is a template over the OS type, so every call below is a direct call.
//
// Units: a "page" is a guest page of (1 << GuestTraits::page_shift) bytes and a PFN counts
// guest pages. The wire unit (4 KiB, a "wire page") appears only inside the messenger's
// message builders (messenger.h, pfn_packer.h) and in counts the core names `*_wire_pages`
// (the target, `actual`, the step sizes); nothing in this contract counts wire pages.
#ifndef VBALLOON_CORE_OS_INTERFACE_H
#define VBALLOON_CORE_OS_INTERFACE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "vballoon/spec/virtio_balloon.h"

namespace vb {

// Contiguous guest pages: the one page range type of the core and of its OS contract.
// Two other types describe ranges, each for a reason of its own:
// - RunSpan (host_reply.h) is a range of positions in an array of PageRuns (from a run
//   index and an offset, so many pages across many runs), which is how a message and an
//   outcome name their pages without copying them;
// - Segment (below) is a range of guest-physical bytes as a virtqueue descriptor carries
//   it, the wire's view.
// The simulated host's frame range, vbsim::PfnRun (device-sim/memory/pfn_run.h), counts
// wire pages and has no flags; this one counts guest pages, so the two stay apart.
struct PageRun {
	uint64_t first_pfn;
	uint64_t count;
	// kPageRunDeviceInitialised: the device promised these pages read back as zero (or
	// poison_val), so the guest need not initialise them when it takes them back.
	// kPageRunWholeBlock: the run is one block exactly as alloc_pages() gave
	// it to a free page hint round (never split, never joined), so the OS may free it in
	// one piece without looking at its pages.
	uint32_t flags = 0;
};

inline constexpr uint32_t kPageRunDeviceInitialised = 1;
inline constexpr uint32_t kPageRunWholeBlock = 2;

// How far an allocation may push the guest to find a page.
enum class Reclaim : uint8_t {
	// Only memory free now: no direct reclaim, no waking of background reclaim. Below the
	// allocator's watermarks it fails, and the guest's page cache and working set are left
	// alone.
	kNone,
	// One light direct-reclaim pass when free memory runs short, no retries (Linux's
	// __GFP_NORETRY, what its balloon_page_alloc() does): the allocation then succeeds by
	// evicting page cache, which is the guest's working set once the cold cache is gone.
	kLight,
};

// What a block from alloc_pages() is for, which decides how the OS takes it.
enum class PageUse : uint8_t {
	// Balloon pages: each page is enqueued, migrated and freed on its own (Linux splits
	// the block into order-0 pages) and stays movable, as balloon compaction wants.
	kBalloon,
	// A free page hint block: kept whole (never split, freed in one piece with
	// kPageRunWholeBlock) and not movable, since nothing can migrate it while it is held
	// (a movable one would pin ZONE_MOVABLE or CMA for a whole migration).
	kHintBlock,
};

// A guest-physical buffer handed to a virtqueue.
struct Segment {
	uint64_t phys_addr;
	uint32_t len;
};

enum class QueueKind : uint8_t {
	kInflate = VB_QUEUE_INFLATE,
	kDeflate = VB_QUEUE_DEFLATE,
	kStats = VB_QUEUE_STATS,
	kFreePage = VB_QUEUE_FREE_PAGE,
	kReporting = VB_QUEUE_REPORTING,
};

enum class LogLevel : uint8_t { kError, kWarning, kInfo, kDebug };

// What the OS knows about its memory right now, indexed by stats tag. `present_mask` has
// bit `tag` set for every tag this OS can report at all; it must not change while the
// driver is bound (the statsq must carry the same subset of tags every time).
struct MemoryStats {
	uint64_t value[VB_S_NR];
	uint32_t present_mask;
};

// The guest's memory pressure as its OS sees it at one moment. Counters are cumulative
// since boot (whoever reads them works on the difference between two samples, so they may
// wrap only as uint64_t does); levels are in guest pages.
struct PressureSample {
	uint64_t now_ms;       // a monotonic clock
	uint64_t alloc_stalls; // allocations that had to reclaim directly (Linux's allocstall_*)
	uint64_t direct_scans; // pages scanned by direct reclaim (pgscan_direct)
	// All page reclaim, by kswapd and direct: pages looked at (pgscan_*) and pages it freed
	// (pgsteal_*). Scanning many to free few means the pages were in use (referenced):
	// the cache left is working set (Linux's vmpressure reads the same ratio).
	uint64_t reclaim_scanned;
	uint64_t reclaim_stolen;
	uint64_t refaults;     // evicted pages faulted back in (workingset_refault_anon + _file)
	uint64_t major_faults; // faults that waited for I/O (pgmajfault)
	uint64_t oom_kills;    // processes the OOM killer killed (oom_kill)
	// Time some task stalled on memory, in microseconds (PSI's memory "some" total): only
	// where the OS can give it (has_stall_time); Linux does not export it to modules.
	uint64_t stall_us;
	bool has_stall_time;
	uint64_t free_pages;	  // free now
	uint64_t available_pages; // what it could hand out without swapping (MemAvailable)
	uint64_t file_pages;	  // page cache (Cached), reclaimable or not
	// The page cache reclaim can evict (Active(file) + Inactive(file): no shmem, no ramfs),
	// and the page cache mapped into some process's address space (Mapped).
	uint64_t file_lru_pages;
	uint64_t mapped_file_pages;
	uint64_t total_pages;	  // usable memory now, the balloon's pages excluded (MemTotal)
};

// Facts about the guest that shape negotiation and the page paths.
struct GuestTraits {
	unsigned page_shift = 12;
	// Freed pages must hold a pattern (init_on_free or page poisoning): deflated pages then
	// need the device's promise (PAGE_POISON) or the guest's own initialisation.
	bool freed_pages_need_pattern = false;
	uint32_t free_page_pattern = 0;
	// Largest block order the OS allocator hands out (MAX_ORDER - 1 in Linux 6.1).
	unsigned max_alloc_order = 10;
	// The OS opted into the DEVICE_INIT proposals (bits 6 and 7: DEVICE_INIT_REPORTED and
	// DEVICE_INIT_ON_INFLATE). Off by default: bit 6 is claimed by other proposals too, so
	// a driver that took it from any device offering it could misread that device.
	bool accept_device_init = false;
	// Initialise pages as they enter the balloon (what Linux did in 2017 to hand ballooned
	// pages back clean), unless the device promises to (VB_F_X_INIT_ON_INFLATE).
	bool initialise_before_inflate = false;
	// The OS runs the free page hint work item (handle_free_page_hint) and the shrinker
	// (hint_held_pages/hint_release): the driver may then accept FREE_PAGE_HINT.
	bool runs_free_page_hinting = false;
	// The OS runs a free page reporting pass (report_free_pages): the driver may then
	// accept PAGE_REPORTING.
	bool runs_page_reporting = false;
	// The OS may run the pressure governor (calls pressure_tick()): the driver may then
	// accept VB_F_X_PRESSURE, which tells the device the guest may stop short of its target.
	bool runs_pressure_governor = false;
};

// Spelled without <concepts>, which a freestanding kernel build does not have.
template <class T, class U> concept same_type = __is_same(T, U);

// The contract, checked at compile time where the core is instantiated.
//
// Pages
//   alloc_pages(order, use, reclaim, &pfn): a naturally aligned block of 2^order free
//     pages for `use` (PageUse), pushing the guest no further than `reclaim` (Reclaim) and
//     never with retries, warnings or emergency reserves; false when none is free. The
//     block's pages belong to the caller afterwards.
//   free_page_run(run): give pages back to the guest allocator. Unless run.flags has
//     kPageRunDeviceInitialised, a guest that hands out initialised pages (init_on_free,
//     poisoning) initialises them first.
//   balloon_list_insert(run): the pages now belong to the balloon (in Linux: balloon
//     compaction's list, so they stay movable).
//   balloon_list_take(runs, max_runs, max_pages): take up to max_pages pages off the
//     balloon list, most recently inserted first, written as coalesced runs into
//     runs[0..max_runs) (pages of one run share their flags); stops early when the runs
//     are full. Returns the number of runs.
//   balloon_list_mark_initialised(run): the device initialised these balloon pages.
//   balloon_hold(run): pages balloon_list_take() gave out whose deflate the host did not
//     acknowledge. They stay in the balloon (the core counts them) but never go back on
//     the balloon list: in Linux a dequeued page still looks movable, compaction may hold
//     its lock at any moment, and balloon_page_enqueue() would BUG_ON(!trylock_page()).
//     The OS keeps them on a private list, out of compaction's reach. Balloon lock held.
//   balloon_held_take(runs, max_runs, max_pages): as balloon_list_take(), from the pages
//     balloon_hold() kept (in any order). A page taken off either list goes back to the
//     guest (free_page_run) or to balloon_hold(), never to balloon_list_insert().
//   balloon_list_replace(old_pfn, new_pfn): compaction moved a ballooned page; the new
//     page takes the old one's place on the balloon list.
//   initialise_pages(run): write the guest's free-page pattern (zero or poison) into pages
//     the caller owns.
//   adjust_managed_pages(run, add): add the run's pages to (or remove them from) what the
//     guest counts as its memory; per run, because Linux accounts them per zone.
// Free page hinting (only called when FREE_PAGE_HINT is negotiated)
//   hint_list_insert(run): the driver holds this block (allocated with
//     alloc_pages) because it was hinted to the device. The hint list is the
//     OS's, guarded by its own lock inside these two calls (a spinlock in Linux), never the
//     balloon lock: the shrinker reaches it while a hinting round runs.
//   hint_list_take(runs, max_runs, max_pages): take whole blocks off the hint list, most
//     recently inserted first, each exactly as inserted (never split or merged), until
//     max_runs blocks or at least max_pages pages are taken. Returns the number of blocks.
//     The pages belong to the caller afterwards.
//   free_pages_kept(): how many pages the guest allocator keeps free for itself, below
//     which an allocation reclaims (in Linux the zones' high watermarks, boost included);
//     a round leaves them free. 0 when it keeps none.
// Memory pressure
//   pressure_sample(&sample): the guest's pressure signals now (PressureSample). Cheap
//     enough to call before every inflate batch and once a second; any context that may
//     sleep, no lock held.
// Buffers and queues
//   phys_addr(p): guest-physical address of a core buffer (the core lives in memory the
//     device can read: kmalloc in Linux, guest RAM in the simulator).
//   queue_add(kind, out, n_out, in, n_in, token): one descriptor chain; false when full.
//   queue_kick(kind); queue_get_used(kind, &len) (nullptr when none);
//   queue_wait_used(kind, &len): blocks until the device returns a buffer.
//   queue_broken(kind): true once the device will never use a buffer of this queue again
//     (surprise removal, a device that needs a reset). Cheap: asked before every hint block.
//   queue_size(kind).
// Config space: config_read32(offset), config_write32(offset, value).
// Memory statistics: memory_stats(&stats).
// Locking: lock(), unlock(), try_lock() for the balloon lock (a sleeping lock).
// Logging: vlog(level, fmt, args) with printf formats common to printk and libc
//   (%s %u %d %x %llu %llx). Messages carry no prefix: the OS says whose they are (in
//   Linux dev_err() and friends name the driver and the device).
template <class Os>
concept BalloonOs = requires(Os& os, const void* buffer, uint64_t* pfn_out, PageRun run,
			     PageRun* runs, const Segment* segments, uint32_t* len,
			     MemoryStats* stats, PressureSample* sample, va_list args)
{
	{
		os.alloc_pages(0u, PageUse::kBalloon, Reclaim::kNone, pfn_out)
		} -> same_type<bool>;
	os.free_page_run(run);
	os.balloon_list_insert(run);
	{ os.balloon_list_take(runs, size_t{1}, uint64_t{1}) } -> same_type<size_t>;
	os.balloon_list_replace(uint64_t{0}, uint64_t{1});
	os.balloon_list_mark_initialised(run);
	os.balloon_hold(run);
	{ os.balloon_held_take(runs, size_t{1}, uint64_t{1}) } -> same_type<size_t>;
	os.adjust_managed_pages(run, true);
	os.hint_list_insert(run);
	{ os.hint_list_take(runs, size_t{1}, uint64_t{1}) } -> same_type<size_t>;
	{ os.free_pages_kept() } -> same_type<uint64_t>;
	os.pressure_sample(sample);
	os.initialise_pages(run);
	{ os.phys_addr(buffer) } -> same_type<uint64_t>;
	{ os.queue_add(QueueKind::kInflate, segments, 1u, segments, 0u, nullptr) } -> same_type<bool>;
	os.queue_kick(QueueKind::kInflate);
	{ os.queue_get_used(QueueKind::kInflate, len) } -> same_type<void*>;
	{ os.queue_wait_used(QueueKind::kInflate, len) } -> same_type<void*>;
	{
		os.queue_broken(QueueKind::kInflate)
		} -> same_type<bool>;
	{ os.queue_size(QueueKind::kInflate) } -> same_type<uint32_t>;
	{ os.config_read32(0u) } -> same_type<uint32_t>;
	os.config_write32(0u, 0u);
	os.memory_stats(stats);
	os.lock();
	os.unlock();
	{ os.try_lock() } -> same_type<bool>;
	os.vlog(LogLevel::kInfo, "", args);
};

} // namespace vb

#endif
