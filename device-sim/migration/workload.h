// SPDX-License-Identifier: GPL-2.0
//
// What the guest does before and while it migrates. Three workloads, each with its knobs:
//  - fresh: a booted guest with a small working set; most of RAM was never touched (seed
//    000's idle guest: zero pages cost the source a full scan but few bytes);
//  - freed: idle after writing most of RAM and freeing it again: the free pages are not
//    zero, so zero detection cannot help and only hints or reports can;
//  - busy: fresh plus a compile-like loop that allocates, writes and frees pages at a set
//    rate while the migration runs (seed 001's make -j4).
// Every page a workload allocates is written whole, with contents unique to the page and
// the write, so the verifier catches any page sent stale.
#ifndef VBSIM_MIGRATION_WORKLOAD_H
#define VBSIM_MIGRATION_WORKLOAD_H

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "migration/migration.h"

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
	virtual std::vector<PageRange> allocate(uint64_t pages) = 0;
	virtual void free(const std::vector<PageRange>& runs) = 0;
};

// GuestUserMemory over a buddy allocator (the simulated guest's own, or a bare one in tests).
std::unique_ptr<GuestUserMemory> make_allocator_user_memory(GuestMemory& ram,
							      BuddyAllocator& allocator);
// GuestUserMemory of a running simulated guest: allocations go through its memory
// pressure path (the free page hint shrinker, then the OOM notifier), as user programs'
// page faults would.
std::unique_ptr<GuestUserMemory> make_sim_guest_user_memory(GuestMemory& ram, SimGuest& guest);

enum class WorkloadKind : uint8_t { kFresh, kFreed, kBusy };
const char* workload_name(WorkloadKind kind);
std::optional<WorkloadKind> parse_workload(std::string_view name);

struct WorkloadConfig {
	WorkloadKind kind = WorkloadKind::kFresh;
	// All workloads: what the booted guest wrote and keeps in use (kernel data, page cache,
	// daemons). A booted idle Debian guest holds 150-300 MiB; the default is in that range.
	uint64_t working_set_bytes = 192ull << 20;
	// freed: the share of RAM (beyond the working set) written and then freed before the
	// migration starts.
	double freed_fraction = 0.75;
	// busy: the compile's footprint (allocated at any moment, on top of the working set),
	// how fast it turns over (bytes allocated + written and freed per second), and the size
	// of one allocation (a compiler process's arena).
	uint64_t busy_live_bytes = 512ull << 20;
	double busy_bytes_per_second = 400.0 * (1 << 20);
	uint64_t busy_allocation_bytes = 2ull << 20;
	uint64_t seed = 1; // for the busy workload's choices
};

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
	// busy starts its thread; the others do nothing while migrating.
	virtual void start() = 0;
	// Returns once the workload stands still (no write in flight) / lets it go on.
	virtual void pause() = 0;
	virtual void resume() = 0;
	virtual void stop() = 0;
	// The clock the workload paces itself by, in ms (busy: bytes = rate x elapsed). The
	// migration model sets its own model clock while it runs, so the guest dirties pages at
	// the configured rate in model time however loaded the host is; empty: real time.
	virtual void set_clock(std::function<double()> now_ms) = 0;
	// Pages the workload holds; call while paused or stopped.
	virtual std::vector<PageRange> pages_in_use() const = 0;
	virtual WorkloadStats stats() const = 0;
};

std::unique_ptr<Workload> make_workload(const WorkloadConfig& config, GuestUserMemory& memory);

} // namespace migration
} // namespace vbsim

#endif
