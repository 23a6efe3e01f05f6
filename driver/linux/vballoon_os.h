/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The only boundary between the module's C glue and its C++ code.
 *
 * Valid as kernel C, as kernel C++ and as userspace C++: it includes no kernel header, so
 * the C++ side never sees one (kernel headers are not C++). Types are fixed-width, as in
 * spec/include/vballoon/spec/virtio_balloon.h.
 *
 *   vb_os_*         implemented in C (vballoon_os.c; the hint list in
 *                   vballoon_free_pages.c), called by the C++ adapter (kernel_os.cpp): what
 *                   the core needs from the kernel (the vb::BalloonOs contract)
 *   vballoon_core_* implemented in C++ (kernel_os.cpp), called by the C glue
 *                   (vballoon_main.c, vballoon_free_pages.c, vballoon_os.c): the core's
 *                   entry points, wrapped so that C can hold the core as an opaque pointer
 */
#ifndef VBALLOON_LINUX_VBALLOON_OS_H
#define VBALLOON_LINUX_VBALLOON_OS_H

#if defined(__KERNEL__) && !defined(__cplusplus)
#include <linux/types.h>
#include <linux/stdarg.h>
#else
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#endif

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The C side's per-device state; opaque to C++. The C files call it `vb` (as
 * virtio_balloon.c its struct virtio_balloon); kernel_os.cpp, where vb is the core's
 * namespace, calls it `dev`.
 */
struct vballoon_dev;
/* The C++ core object; opaque to C. */
struct vballoon_core;

/* Layout-compatible with vb::PageRun (checked in kernel_os.cpp). */
struct vballoon_page_run {
	uint64_t first_pfn;
	uint64_t count;
	uint32_t flags; /* vb::kPageRun* */
};

/* vb::kPageRunWholeBlock: one block as allocated, to be freed in one piece. */
#define VB_OS_PAGE_RUN_WHOLE_BLOCK 2u

/* Layout-compatible with vb::Segment (checked in kernel_os.cpp). */
struct vballoon_segment {
	uint64_t phys_addr;
	uint32_t len;
};

/* Layout-compatible with vb::PressureSample (checked in kernel_os.cpp). */
struct vballoon_pressure_sample {
	uint64_t now_ms;
	uint64_t alloc_stalls;
	uint64_t direct_scans;
	uint64_t reclaim_scanned;
	uint64_t reclaim_stolen;
	uint64_t refaults;
	uint64_t major_faults;
	uint64_t oom_kills;
	uint64_t stall_us;
	bool has_stall_time;
	uint64_t free_pages;
	uint64_t available_pages;
	uint64_t file_pages;
	uint64_t file_lru_pages;
	uint64_t mapped_file_pages;
	uint64_t total_pages;
};

/* vb::GuestTraits, spelled with C types. */
struct vballoon_guest_traits {
	uint32_t page_shift;
	uint32_t free_page_pattern;
	uint32_t max_alloc_order;
	bool freed_pages_need_pattern;
	/* Zero (or poison) pages as they enter the balloon (module parameter zero_on_inflate). */
	bool initialise_before_inflate;
	/* The glue runs the hint work item and shrinker (vballoon_free_pages.c). */
	bool runs_free_page_hinting;
	/* The glue registers with the kernel's page_reporting (CONFIG_PAGE_REPORTING). */
	bool runs_page_reporting;
	bool runs_pressure_governor;
	/* The device_init module parameter: bits 6 and 7 may be taken. */
	bool accept_device_init;
};

/* vb::LogLevel values (checked in kernel_os.cpp). */
#define VB_OS_LOG_ERROR 0u
#define VB_OS_LOG_WARNING 1u
#define VB_OS_LOG_INFO 2u
#define VB_OS_LOG_DEBUG 3u

/*
 * Segments one descriptor chain may carry (vb_os_queue_add()); kernel_os.cpp checks that
 * the core never sends more.
 */
#define VB_OS_MAX_SEGMENTS 40
/* ...except on free_page_vq, where a chain carries up to 512 hint blocks (kernel_os.cpp). */
#define VB_OS_HINT_CHAIN_SEGMENTS_MAX 512

/* vb::StepResult values (checked in kernel_os.cpp). */
#define VB_OS_STEP_SETTLED 0
#define VB_OS_STEP_MORE_WORK 1
#define VB_OS_STEP_STALLED 2
#define VB_OS_STEP_HELD 3

/*
 * Queues are named by their spec kind (VB_QUEUE_* of the spec header), never by transport
 * index: the C side maps kinds onto the dense indices virtio_find_vqs() created.
 */

/* ---- Implemented in C: the kernel services behind vb::BalloonOs ---------------------- */

/*
 * hint_block: vb::PageUse::kHintBlock (whole, unmovable), else balloon pages (split, movable).
 * reclaim: vb::Reclaim::kLight, else only memory free now.
 */
bool vb_os_alloc_pages(struct vballoon_dev *vb, unsigned int order, bool hint_block, bool reclaim,
		       uint64_t *pfn);
void vb_os_free_page_run(struct vballoon_dev *vb, const struct vballoon_page_run *run);
void vb_os_balloon_list_insert(struct vballoon_dev *vb, const struct vballoon_page_run *run);
size_t vb_os_balloon_list_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			       size_t max_runs, uint64_t max_pages);
void vb_os_balloon_list_mark_initialised(struct vballoon_dev *vb,
					 const struct vballoon_page_run *run);
void vb_os_balloon_list_replace(struct vballoon_dev *vb, uint64_t old_pfn, uint64_t new_pfn);
/* Dequeued pages whose deflate the host did not acknowledge, on a private list. */
void vb_os_balloon_hold(struct vballoon_dev *vb, const struct vballoon_page_run *run);
size_t vb_os_balloon_held_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			       size_t max_runs, uint64_t max_pages);
void vb_os_adjust_managed_pages(struct vballoon_dev *vb, const struct vballoon_page_run *run,
				bool add);
void vb_os_initialise_pages(struct vballoon_dev *vb, const struct vballoon_page_run *run);
/* The blocks held as free page hints (vballoon_free_pages.c), under their own spinlock. */
void vb_os_hint_list_insert(struct vballoon_dev *vb, const struct vballoon_page_run *run);
size_t vb_os_hint_list_take(struct vballoon_dev *vb, struct vballoon_page_run *runs,
			    size_t max_runs, uint64_t max_pages);
/* What the page allocator keeps free for itself: a hinting round leaves it. */
uint64_t vb_os_free_pages_kept(void);
void vb_os_pressure_sample(struct vballoon_pressure_sample *sample);
uint64_t vb_os_phys_addr(const void *buffer);
bool vb_os_queue_add(struct vballoon_dev *vb, unsigned int kind, const struct vballoon_segment *out,
		     unsigned int n_out, const struct vballoon_segment *in, unsigned int n_in,
		     void *token);
void vb_os_queue_kick(struct vballoon_dev *vb, unsigned int kind);
void *vb_os_queue_get_used(struct vballoon_dev *vb, unsigned int kind, uint32_t *len);
void *vb_os_queue_wait_used(struct vballoon_dev *vb, unsigned int kind, uint32_t *len);
bool vb_os_queue_broken(struct vballoon_dev *vb, unsigned int kind);
uint32_t vb_os_queue_size(struct vballoon_dev *vb, unsigned int kind);
uint32_t vb_os_config_read32(struct vballoon_dev *vb, uint32_t offset);
void vb_os_config_write32(struct vballoon_dev *vb, uint32_t offset, uint32_t value);
/* Fills values[tag] (VB_S_NR entries) and returns the mask of tags it can report. */
uint32_t vb_os_memory_stats(struct vballoon_dev *vb, uint64_t *values);
void vb_os_lock(struct vballoon_dev *vb);
void vb_os_unlock(struct vballoon_dev *vb);
bool vb_os_try_lock(struct vballoon_dev *vb);
void vb_os_vlog(struct vballoon_dev *vb, unsigned int level, const char *fmt, va_list args);
/* VB_INVARIANT() (driver/support/include/vballoon/support/invariant.h): a core accounting
 * rule broke. Warns once, with the rule and where it is, and returns. */
void vb_invariant_failed(const char *condition, const char *file, int line);

/* ---- Implemented in C++: the core, behind an opaque pointer ---------------------------- */

/*
 * The memory vballoon_core_init() needs (8-byte alignment is enough for both): the core
 * object (at most 8 KiB, physically contiguous: kmalloc) and its workspace (page runs and
 * hint chain blocks, read only by the CPU: kvmalloc will do).
 */
size_t vballoon_core_size(void);
size_t vballoon_core_workspace_size(void);

/* What to accept of the device-specific feature bits (0-23) `offered`. */
uint64_t vballoon_accept_features(uint64_t offered, const struct vballoon_guest_traits *traits);

/*
 * Constructs the core in `mem` (vballoon_core_size() bytes of kmalloc memory: the core
 * holds the buffers the device reads, so virt_to_phys() must work on it), with its
 * workspace in `workspace_mem` (vballoon_core_workspace_size() bytes, any kernel memory;
 * both must outlive the core). Returns NULL if either is too small or misaligned.
 */
struct vballoon_core *vballoon_core_init(void *mem, size_t size, void *workspace_mem,
					 size_t workspace_size, struct vballoon_dev *vb,
					 uint64_t features,
					 const struct vballoon_guest_traits *traits);
void vballoon_core_destroy(struct vballoon_core *core);

bool vballoon_core_prepare(struct vballoon_core *core);
void vballoon_core_start(struct vballoon_core *core);
int vballoon_core_adjust(struct vballoon_core *core);
/* Returns the wire pages (4 KiB) freed: the OOM notifier converts them to pages. */
uint64_t vballoon_core_deflate_for_oom(struct vballoon_core *core);
void vballoon_core_handle_stats_request(struct vballoon_core *core);
bool vballoon_core_migrate_page(struct vballoon_core *core, uint64_t old_pfn, uint64_t new_pfn);
void vballoon_core_release_all(struct vballoon_core *core);
/* After the device was reset: every page still ballooned goes back, without a message. */
void vballoon_core_release_after_reset(struct vballoon_core *core);
/* In wire pages (4 KiB, VB_PFN_SHIFT): the host's target and what the balloon holds. */
uint64_t vballoon_core_target_wire_pages(struct vballoon_core *core);
uint64_t vballoon_core_balloon_wire_pages(const struct vballoon_core *core);
void vballoon_core_set_max_chunk_order(struct vballoon_core *core, unsigned int order);
/* Before start(): the pressure governor on or off, and its floor in pages (0: derived). */
void vballoon_core_set_pressure_policy(struct vballoon_core *core, bool enabled,
				       uint64_t floor_pages);
/* About every vballoon_core_pressure_tick_ms(); true: run vballoon_core_adjust() again. */
bool vballoon_core_pressure_tick(struct vballoon_core *core);
unsigned int vballoon_core_pressure_tick_ms(void);

/* Free page hinting; hint_config_changed() may be called in any context. */
bool vballoon_core_hint_config_changed(struct vballoon_core *core);
void vballoon_core_handle_free_page_hint(struct vballoon_core *core);
uint64_t vballoon_core_hint_held_pages(const struct vballoon_core *core);
uint64_t vballoon_core_hint_release(struct vballoon_core *core, uint64_t max_pages);
void vballoon_core_hint_stop(struct vballoon_core *core);
/* Between hint_stop() and the reset (or restore): a wait on free_page_vq ends. */
bool vballoon_core_hint_stopping(const struct vballoon_core *core);
void vballoon_core_hint_device_reset(struct vballoon_core *core);

/* Free page reporting: at most VB_OS_REPORT_RUNS_MAX runs; true once the device acked. */
#define VB_OS_REPORT_RUNS_MAX 32
bool vballoon_core_report_free_pages(struct vballoon_core *core,
				     const struct vballoon_page_run *runs, size_t count);

/* The core's counters by index, for debugfs: the name, or NULL past the last one. */
const char *vballoon_core_counter(const struct vballoon_core *core, unsigned int index,
				  uint64_t *value);

#ifdef __cplusplus
}
#endif

#endif /* VBALLOON_LINUX_VBALLOON_OS_H */
