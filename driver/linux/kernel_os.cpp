// SPDX-License-Identifier: GPL-2.0
//
// The kernel's implementation of the core's OS contract (vb::BalloonOs), and the core's
// entry points exported to the C glue.
//
// Every member of KernelOs is a direct call into a C function of vballoon_os.h: the
// decisions stay in the core, the kernel calls stay in C. This file must stay free of
// anything the kernel cannot run: no global with a dynamic constructor (CONFIG_CONSTRUCTORS
// is off, it would silently never run), no operator new/delete, no exceptions, no RTTI.
// check-cxx-object.sh enforces it on every C++ object of the module.
#include "vballoon/core/balloon.h"
#include "vballoon/core/features.h"
#include "vballoon_os.h"

// The placement form only: the kernel build has no <new>, and the core is constructed into
// memory the C side allocated (kmalloc, so the device can read the buffers inside it).
inline void* operator new(size_t, void* where) noexcept
{
	return where;
}

namespace {

// The C structs stand in for the core's types across the boundary (layouts checked below).
const vballoon_page_run* c_run(const vb::PageRun& run)
{
	return reinterpret_cast<const vballoon_page_run*>(&run);
}

const vballoon_segment* c_segments(const vb::Segment* segments)
{
	return reinterpret_cast<const vballoon_segment*>(segments);
}

struct KernelOs {
	vballoon_dev* dev;

	bool alloc_pages(unsigned order, vb::PageUse use, vb::Reclaim reclaim, uint64_t* pfn)
	{
		return vb_os_alloc_pages(dev, order, use == vb::PageUse::kHintBlock,
					 reclaim == vb::Reclaim::kLight, pfn);
	}
	void free_page_run(vb::PageRun run) { vb_os_free_page_run(dev, c_run(run)); }
	void balloon_list_insert(vb::PageRun run) { vb_os_balloon_list_insert(dev, c_run(run)); }
	size_t balloon_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		return vb_os_balloon_list_take(dev, reinterpret_cast<vballoon_page_run*>(runs),
					       max_runs, max_pages);
	}
	void balloon_list_mark_initialised(vb::PageRun run)
	{
		vb_os_balloon_list_mark_initialised(dev, c_run(run));
	}
	void balloon_hold(vb::PageRun run) { vb_os_balloon_hold(dev, c_run(run)); }
	size_t balloon_held_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		return vb_os_balloon_held_take(dev, reinterpret_cast<vballoon_page_run*>(runs),
					       max_runs, max_pages);
	}
	void balloon_list_replace(uint64_t old_pfn, uint64_t new_pfn)
	{
		vb_os_balloon_list_replace(dev, old_pfn, new_pfn);
	}
	void adjust_managed_pages(vb::PageRun run, bool add)
	{
		vb_os_adjust_managed_pages(dev, c_run(run), add);
	}
	void initialise_pages(vb::PageRun run) { vb_os_initialise_pages(dev, c_run(run)); }
	void hint_list_insert(vb::PageRun run) { vb_os_hint_list_insert(dev, c_run(run)); }
	size_t hint_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		return vb_os_hint_list_take(dev, reinterpret_cast<vballoon_page_run*>(runs),
					    max_runs, max_pages);
	}
	uint64_t free_pages_kept() { return vb_os_free_pages_kept(); }
	void pressure_sample(vb::PressureSample* sample)
	{
		vb_os_pressure_sample(reinterpret_cast<vballoon_pressure_sample*>(sample));
	}
	uint64_t phys_addr(const void* buffer) { return vb_os_phys_addr(buffer); }
	bool queue_add(vb::QueueKind queue, const vb::Segment* out, unsigned n_out,
		       const vb::Segment* in, unsigned n_in, void* token)
	{
		return vb_os_queue_add(dev, static_cast<unsigned>(queue), c_segments(out), n_out,
				       c_segments(in), n_in, token);
	}
	void queue_kick(vb::QueueKind queue)
	{
		vb_os_queue_kick(dev, static_cast<unsigned>(queue));
	}
	void* queue_get_used(vb::QueueKind queue, uint32_t* len)
	{
		return vb_os_queue_get_used(dev, static_cast<unsigned>(queue), len);
	}
	void* queue_wait_used(vb::QueueKind queue, uint32_t* len)
	{
		return vb_os_queue_wait_used(dev, static_cast<unsigned>(queue), len);
	}
	bool queue_broken(vb::QueueKind queue)
	{
		return vb_os_queue_broken(dev, static_cast<unsigned>(queue));
	}
	uint32_t queue_size(vb::QueueKind queue)
	{
		return vb_os_queue_size(dev, static_cast<unsigned>(queue));
	}
	uint32_t config_read32(uint32_t offset) { return vb_os_config_read32(dev, offset); }
	void config_write32(uint32_t offset, uint32_t value)
	{
		vb_os_config_write32(dev, offset, value);
	}
	void memory_stats(vb::MemoryStats* stats)
	{
		stats->present_mask = vb_os_memory_stats(dev, stats->value);
	}
	void lock() { vb_os_lock(dev); }
	void unlock() { vb_os_unlock(dev); }
	bool try_lock() { return vb_os_try_lock(dev); }
	void vlog(vb::LogLevel level, const char* fmt, va_list args)
	{
		vb_os_vlog(dev, static_cast<unsigned>(level), fmt, args);
	}
};

static_assert(vb::BalloonOs<KernelOs>);

// A change on either side of the boundary must fail here, not corrupt PFNs at run time.
static_assert(sizeof(vballoon_page_run) == sizeof(vb::PageRun) &&
	      __builtin_offsetof(vballoon_page_run, first_pfn) ==
		      __builtin_offsetof(vb::PageRun, first_pfn) &&
	      __builtin_offsetof(vballoon_page_run, count) ==
		      __builtin_offsetof(vb::PageRun, count) &&
	      __builtin_offsetof(vballoon_page_run, flags) ==
		      __builtin_offsetof(vb::PageRun, flags));
static_assert(vb::kPageRunWholeBlock == VB_OS_PAGE_RUN_WHOLE_BLOCK);
#define VB_SAME_FIELD(c, cxx, f) (__builtin_offsetof(c, f) == __builtin_offsetof(cxx, f))
static_assert(sizeof(vballoon_pressure_sample) == sizeof(vb::PressureSample) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, now_ms) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, reclaim_stolen) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, oom_kills) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, stall_us) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, has_stall_time) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, free_pages) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, mapped_file_pages) &&
	      VB_SAME_FIELD(vballoon_pressure_sample, vb::PressureSample, total_pages));
#undef VB_SAME_FIELD
static_assert(sizeof(vballoon_segment) == sizeof(vb::Segment) &&
	      __builtin_offsetof(vballoon_segment, phys_addr) ==
		      __builtin_offsetof(vb::Segment, phys_addr) &&
	      __builtin_offsetof(vballoon_segment, len) == __builtin_offsetof(vb::Segment, len));
static_assert(static_cast<unsigned>(vb::LogLevel::kError) == VB_OS_LOG_ERROR &&
	      static_cast<unsigned>(vb::LogLevel::kWarning) == VB_OS_LOG_WARNING &&
	      static_cast<unsigned>(vb::LogLevel::kInfo) == VB_OS_LOG_INFO &&
	      static_cast<unsigned>(vb::LogLevel::kDebug) == VB_OS_LOG_DEBUG);
static_assert(static_cast<int>(vb::StepResult::kSettled) == VB_OS_STEP_SETTLED &&
	      static_cast<int>(vb::StepResult::kMoreWork) == VB_OS_STEP_MORE_WORK &&
	      static_cast<int>(vb::StepResult::kStalled) == VB_OS_STEP_STALLED &&
	      static_cast<int>(vb::StepResult::kHeld) == VB_OS_STEP_HELD);

using KernelBalloon = vb::Balloon<KernelOs>;

// The longest chains the core builds: a chunked message plus its bitmap, and a report.
static_assert(KernelBalloon::kChunksPerMessageMax + 1 <= VB_OS_MAX_SEGMENTS);
static_assert(KernelBalloon::kReportRunsMax == VB_OS_REPORT_RUNS_MAX &&
	      VB_OS_REPORT_RUNS_MAX <= VB_OS_MAX_SEGMENTS);
// free_page_vq's chains, as long as a chain of hint blocks.
static_assert(vb::HintChainPacker::kBlocksPerChainMax == VB_OS_HINT_CHAIN_SEGMENTS_MAX);

// What lives in the C side's kmalloc allocation: the OS object first, since the balloon keeps
// a reference to it. The core's workspace (page runs, hint chain blocks) lives in a second
// allocation.
struct CoreStorage {
	KernelOs os;
	KernelBalloon balloon;

	CoreStorage(vballoon_dev* dev, uint64_t features, const vb::GuestTraits& traits,
		    KernelBalloon::Workspace& workspace)
	    : os{dev}, balloon(os, features, traits, workspace)
	{
	}
};

// kmalloc guarantees 8-byte alignment for any size (ARCH_KMALLOC_MINALIGN on x86-64).
static_assert(alignof(CoreStorage) <= 8 && alignof(KernelBalloon::Workspace) <= 8);
// The object must be physically contiguous (the device reads buffers inside it): keep it
// within an order-1 kmalloc, which probe gets even on a fragmented guest. The runs, which
// are most of the core's memory, may come from vmalloc.
static_assert(sizeof(CoreStorage) <= 8192);

vb::GuestTraits to_traits(const vballoon_guest_traits* traits)
{
	vb::GuestTraits out;

	out.page_shift = traits->page_shift;
	out.freed_pages_need_pattern = traits->freed_pages_need_pattern;
	out.free_page_pattern = traits->free_page_pattern;
	out.initialise_before_inflate = traits->initialise_before_inflate;
	out.max_alloc_order = traits->max_alloc_order;
	out.runs_free_page_hinting = traits->runs_free_page_hinting;
	out.runs_page_reporting = traits->runs_page_reporting;
	out.runs_pressure_governor = traits->runs_pressure_governor;
	out.accept_device_init = traits->accept_device_init;
	return out;
}

CoreStorage* storage(vballoon_core* core)
{
	return reinterpret_cast<CoreStorage*>(core);
}

const CoreStorage* storage(const vballoon_core* core)
{
	return reinterpret_cast<const CoreStorage*>(core);
}

KernelBalloon& balloon(vballoon_core* core)
{
	return storage(core)->balloon;
}

struct CounterName {
	const char* name;
	vb::Counter vb::BalloonCounters::*member;
};

// Constant-initialised (pointers to members are constants): no constructor runs.
constexpr CounterName kCounters[] = {
	{"inflate_messages", &vb::BalloonCounters::inflate_messages},
	{"deflate_messages", &vb::BalloonCounters::deflate_messages},
	{"pages_inflated", &vb::BalloonCounters::wire_pages_inflated},
	{"pages_deflated", &vb::BalloonCounters::wire_pages_deflated},
	{"alloc_failures", &vb::BalloonCounters::alloc_failures},
	{"oom_calls", &vb::BalloonCounters::oom_calls},
	{"oom_pages_freed", &vb::BalloonCounters::oom_wire_pages_freed},
	{"stats_reports", &vb::BalloonCounters::stats_reports},
	{"migrations", &vb::BalloonCounters::migrations},
	{"foreign_used_buffers", &vb::BalloonCounters::foreign_used_buffers},
	{"unreachable_pages", &vb::BalloonCounters::unreachable_wire_pages},
	{"queue_failures", &vb::BalloonCounters::queue_failures},
	{"pages_device_initialised", &vb::BalloonCounters::wire_pages_device_initialised},
	{"device_init_overclaims", &vb::BalloonCounters::device_init_overclaims},
	{"hint_rounds", &vb::BalloonCounters::hint_rounds},
	{"hint_ids_ignored", &vb::BalloonCounters::hint_ids_ignored},
	{"hint_blocks", &vb::BalloonCounters::hint_blocks},
	{"hint_pages", &vb::BalloonCounters::hint_wire_pages},
	{"hint_pages_returned", &vb::BalloonCounters::hint_wire_pages_returned},
	{"hint_pages_released_early", &vb::BalloonCounters::hint_wire_pages_released_early},
	{"reports", &vb::BalloonCounters::reports},
	{"pages_reported", &vb::BalloonCounters::wire_pages_reported},
	{"report_failures", &vb::BalloonCounters::report_failures},
	{"pages_reported_device_initialised",
	 &vb::BalloonCounters::wire_pages_reported_device_initialised},
	{"pressure_ticks", &vb::BalloonCounters::pressure_ticks},
	{"pressure_ticks_under_pressure", &vb::BalloonCounters::pressure_ticks_under_pressure},
	{"pressure_held_steps", &vb::BalloonCounters::pressure_held_steps},
	{"pressure_refused_wire_pages", &vb::BalloonCounters::pressure_refused_wire_pages},
	{"pressure_reclaim_wire_pages", &vb::BalloonCounters::pressure_reclaim_wire_pages},
	{"pressure_give_backs", &vb::BalloonCounters::pressure_give_backs},
	{"pressure_give_back_wire_pages", &vb::BalloonCounters::pressure_give_back_wire_pages},
	{"pressure_floor_pages", &vb::BalloonCounters::pressure_floor_pages},
};

// A counter added to the core must be added above, or debugfs would silently miss it.
static_assert(sizeof(vb::BalloonCounters) ==
	      sizeof(kCounters) / sizeof(kCounters[0]) * sizeof(vb::Counter));

} // namespace

extern "C" {

size_t vballoon_core_size(void)
{
	return sizeof(CoreStorage);
}

size_t vballoon_core_workspace_size(void)
{
	return sizeof(KernelBalloon::Workspace);
}

uint64_t vballoon_accept_features(uint64_t offered, const vballoon_guest_traits* traits)
{
	return vb::accept_features(offered, to_traits(traits));
}

vballoon_core* vballoon_core_init(void* mem, size_t size, void* workspace_mem,
				  size_t workspace_size, vballoon_dev* dev, uint64_t features,
				  const vballoon_guest_traits* traits)
{
	if (size < sizeof(CoreStorage) ||
	    reinterpret_cast<uintptr_t>(mem) % alignof(CoreStorage) != 0 ||
	    workspace_size < sizeof(KernelBalloon::Workspace) ||
	    reinterpret_cast<uintptr_t>(workspace_mem) % alignof(KernelBalloon::Workspace) != 0)
		return nullptr;
	auto* workspace = new (workspace_mem) KernelBalloon::Workspace;
	return reinterpret_cast<vballoon_core*>(
		new (mem) CoreStorage(dev, features, to_traits(traits), *workspace));
}

void vballoon_core_destroy(vballoon_core* core)
{
	storage(core)->~CoreStorage();
}

bool vballoon_core_prepare(vballoon_core* core)
{
	return balloon(core).prepare();
}

void vballoon_core_start(vballoon_core* core)
{
	balloon(core).start();
}

int vballoon_core_adjust(vballoon_core* core)
{
	return static_cast<int>(balloon(core).adjust_towards_target());
}

uint64_t vballoon_core_deflate_for_oom(vballoon_core* core)
{
	return balloon(core).deflate_for_oom();
}

void vballoon_core_handle_stats_request(vballoon_core* core)
{
	balloon(core).handle_stats_request();
}

bool vballoon_core_migrate_page(vballoon_core* core, uint64_t old_pfn, uint64_t new_pfn)
{
	return balloon(core).migrate_page(old_pfn, new_pfn);
}

void vballoon_core_release_all(vballoon_core* core)
{
	balloon(core).release_all();
}

void vballoon_core_release_after_reset(vballoon_core* core)
{
	balloon(core).release_after_reset();
}

uint64_t vballoon_core_target_wire_pages(vballoon_core* core)
{
	return balloon(core).target_wire_pages();
}

uint64_t vballoon_core_balloon_wire_pages(const vballoon_core* core)
{
	return storage(core)->balloon.balloon_wire_pages();
}

void vballoon_core_set_max_chunk_order(vballoon_core* core, unsigned int order)
{
	balloon(core).set_max_chunk_order(order);
}

void vballoon_core_set_pressure_policy(vballoon_core* core, bool enabled, uint64_t floor_pages)
{
	vb::PressurePolicy policy;

	policy.enabled = enabled;
	policy.floor_pages = floor_pages;
	balloon(core).set_pressure_policy(policy);
}

bool vballoon_core_pressure_tick(vballoon_core* core)
{
	return balloon(core).pressure_tick();
}

unsigned int vballoon_core_pressure_tick_ms(void)
{
	return KernelBalloon::kPressureTickMs;
}

bool vballoon_core_hint_config_changed(vballoon_core* core)
{
	return balloon(core).hint_config_changed();
}

void vballoon_core_handle_free_page_hint(vballoon_core* core)
{
	balloon(core).handle_free_page_hint();
}

uint64_t vballoon_core_hint_held_pages(const vballoon_core* core)
{
	return storage(core)->balloon.hint_held_pages();
}

uint64_t vballoon_core_hint_release(vballoon_core* core, uint64_t max_pages)
{
	return balloon(core).hint_release(max_pages);
}

void vballoon_core_hint_stop(vballoon_core* core)
{
	balloon(core).hint_stop();
}

bool vballoon_core_hint_stopping(const vballoon_core* core)
{
	return storage(core)->balloon.hint_stopping();
}

void vballoon_core_hint_device_reset(vballoon_core* core)
{
	balloon(core).hint_device_reset();
}

bool vballoon_core_report_free_pages(vballoon_core* core, const vballoon_page_run* runs,
				     size_t count)
{
	return balloon(core).report_free_pages(reinterpret_cast<const vb::PageRun*>(runs), count);
}

const char* vballoon_core_counter(const vballoon_core* core, unsigned int index, uint64_t* value)
{
	if (index >= vb::array_size(kCounters))
		return nullptr;
	*value = (storage(core)->balloon.counters().*kCounters[index].member).get();
	return kCounters[index].name;
}

} // extern "C"
