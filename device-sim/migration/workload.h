// SPDX-License-Identifier: GPL-2.0
//
// What the guest does before and while it migrates: the workload generator
// (workload_generator.h, plain C shared with the guest binary tests/guest/vbwork.c) run on
// the simulated guest's memory. It runs a description (vbw_params: memory written and held, a
// hot set and its rate, arenas churned, a page cache rewritten, memory written and freed
// before migrating, the guest's init_on_free/init_on_alloc); the three named workloads are
// presets of it (workload_for_ram):
//  - fresh: a booted guest with a small working set; most of RAM was never touched (seed
//    000's idle guest: zero pages cost the source a full scan but few bytes);
//  - freed: idle after writing most of RAM and freeing it again: the free pages are not
//    zero, so zero detection cannot help and only hints or reports can;
//  - busy: fresh plus a compile's memory traffic (the v36 hinting thread's make -j4): a hot set rewritten,
//    page cache rewritten slowly, arenas allocated, written and freed at random and reused;
//    warmed up in model time before the migration and paced by the model clock during it.
// A description that writes while migrating runs as busy does.
// Anonymous memory is written through a DirtyMarker, page cache through GuestMemory's plain
// write (its range marking): every page through exactly one marking path, so a bug in
// either path leaves a stale page at the destination.
#ifndef VBSIM_MIGRATION_WORKLOAD_H
#define VBSIM_MIGRATION_WORKLOAD_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "migration/migration.h"
#include "migration/workload_generator.h"

namespace vbsim
{

class GuestMemory;
class BuddyAllocator;
class SimGuest;

namespace migration
{

// The guest's page allocator as a user program sees it. Writes go through ram().
class GuestUserMemory
{
public:
	virtual ~GuestUserMemory() = default;
	virtual GuestMemory& ram() = 0;
	// Up to `pages` pages in runs; fewer when the guest is out of memory. Not written yet.
	virtual std::vector<PfnRun> allocate(uint64_t pages) = 0;
	virtual void free(const std::vector<PfnRun>& runs) = 0;
	// Shuffles the guest's free lists (page_alloc.shuffle=1).
	virtual void shuffle_free_memory(uint64_t seed) = 0;
	// Orders them top of RAM first, as a guest kernel before 5.10 boots.
	virtual void order_free_memory_top_first() = 0;
};

// GuestUserMemory over a buddy allocator (the simulated guest's own, or a bare one in tests).
std::unique_ptr<GuestUserMemory> make_allocator_user_memory(GuestMemory& ram,
							      BuddyAllocator& allocator);
// GuestUserMemory of a running simulated guest: allocations go through its memory
// pressure path (the free page hint shrinker, then the OOM notifier), as user programs'
// page faults would.
std::unique_ptr<GuestUserMemory> make_sim_guest_user_memory(GuestMemory& ram, SimGuest& guest);
// Free page reporting in the simulated guest waits report_delay (SimGuestOptions: 2 ms of
// real time, where Linux waits 2 s) before each pass. Instead of modelling Linux's wait, a
// run waits, before it migrates, until the guest's reporting has run every pass it was
// asked for (SimGuest::reporting_idle(): blocks split off reported ones stay unreported,
// as in Linux), as the real-QEMU runs (tests/guest) wait for QEMU's RSS to settle. False
// on timeout.
bool wait_for_reporting_to_settle(SimGuest& guest, std::chrono::milliseconds timeout);

enum class WorkloadKind : uint8_t { kFresh, kFreed, kBusy };
const char* workload_name(WorkloadKind kind);
std::optional<WorkloadKind> parse_workload(std::string_view name);
// The generator's name for a preset.
vbw_kind preset_of(WorkloadKind kind);

struct WorkloadConfig {
	// What the tables call it: a preset's name, or the description's.
	std::string name = "fresh";
	// The description: sizes and rates (bytes per second of the model clock); fresh's by default.
	vbw_params params = vbw_preset(VBW_FRESH);
	// The guest booted with its free lists shuffled (Linux: page_alloc.shuffle=1), before
	// prepare() allocates: the working set and the free memory then lie all over RAM, so
	// a hint that lands after the bulk pass started saves only what lies ahead of it.
	// Off by default, as on Debian 12's kernel without that parameter.
	bool shuffle_free_list = false;
	// The guest's kernel predates Linux 5.10 (the 2018 guests of the free page hinting threads): its free memory is
	// taken from the top of RAM down, the untouched memory lies at the bottom, where the
	// bulk pass starts. Off: Linux 6.1's order, from the bottom up.
	bool pre_5_10_free_order = false;
	// What the booted guest itself holds before any workload runs (kernel image, its page
	// structures, the unpacked initramfs, slab, the shell): written once before the
	// workload's own memory and held. Not the generator's: the real guest has it already
	// (vbwork does not allocate it). 0 here; workload_for_ram() (compare) gives the
	// calibration guest's, kBootedTestGuestBytes.
	uint64_t booted_guest_bytes = 0;
	// What else the booted guest holds that reads as zero (zeroed kernel allocations: hash
	// tables, page tables, bss): held from the start, never written, so a host scans it as
	// zero pages and no hint covers it. 0 here; workload_for_ram() gives
	// kBootedTestGuestZeroBytes.
	uint64_t booted_guest_zero_bytes = 0;
	// busy: between steps of its work the guest's vCPU stays runnable on a host CPU, as a
	// vCPU does while its guest computes (a compile; or any guest under TCG, whose
	// emulated writes keep its thread on a CPU), instead of sleeping as a halted vCPU
	// does. It matters on a host whose idle CPUs halt: there, while the guest runs, the
	// hand-offs between the migration thread and the stream's reader find a CPU awake.
	bool vcpu_stays_on_cpu = false;
};

// Measured on the calibration guest (docs/migration-model.md, "Calibration"): real QEMU's
// normal pages for `fresh` less vbwork's working set, what the booted 2 GiB busybox test
// guest holds. A Debian guest with its daemons holds more.
inline constexpr uint64_t kBootedTestGuestBytes = 97ull << 20;
// The same guest before vbwork holds 122 MiB in all: MemTotal - MemFree = 41.4 MiB and the
// 81 MiB of RAM outside MemTotal (kernel image, struct pages, reserved; 2048 MiB - MemTotal
// 2014152 kB), read from its /proc/meminfo on 2026-12-01. Less the 97 MiB it writes
// non-zero and the model's 4 MiB kernel area, 21 MiB of it is zero.
inline constexpr uint64_t kBootedTestGuestZeroBytes = 21ull << 20;

// A preset (vbw_preset), shrunk for a small guest: the working set at most 1/8 of RAM, the
// busy footprint (hot set, cache, arenas) at most 1/4; and the booted guest's own memory
// (kBootedTestGuestBytes, at most 1/16 of RAM).
WorkloadConfig workload_for_ram(WorkloadKind kind, uint64_t ram_bytes);
// A described workload as compare runs it: the description as given (nothing shrunk; it must
// fit, vbw_check_params), on the booted guest of the presets, its vCPU kept on a host CPU
// when it writes while migrating (as busy's).
WorkloadConfig described_workload(const std::string& name, const vbw_params& params,
				  uint64_t ram_bytes);

struct WorkloadStats {
	uint64_t pages_written = 0;
	uint64_t pages_freed = 0;
	uint64_t allocations = 0;
};

class Workload
{
public:
	virtual ~Workload() = default;
	// The guest's state before migration (fresh: the working set; freed: also writes and
	// frees most of RAM). Call once, before start().
	virtual void prepare() = 0;
	// busy: runs its warm-up (params.warmup_ms of workload time, at once: the model clock
	// is not running yet) and starts its thread, which then stands still until a clock is
	// set; the others do nothing while migrating.
	virtual void start() = 0;
	// Returns once the workload has done every write it owes at the clock's present time
	// and stands still (no write in flight) / lets it go on.
	virtual void pause() = 0;
	virtual void resume() = 0;
	virtual void stop() = 0;
	// The clock the workload paces itself by, in ms (busy: bytes = rate x elapsed). The
	// migration model sets its own model clock while it runs, so the guest dirties pages at
	// the configured rates in model time however loaded the host is. Workload time goes on
	// from where it stood (after the warm-up, or the last clock); empty: it stands still.
	virtual void set_clock(std::function<double()> now_ms) = 0;
	// Pages the workload holds; call while paused or stopped.
	virtual std::vector<PfnRun> pages_in_use() const = 0;
	virtual WorkloadStats stats() const = 0;
};

std::unique_ptr<Workload> make_workload(const WorkloadConfig& config, GuestUserMemory& memory);

} // namespace migration
} // namespace vbsim

#endif
