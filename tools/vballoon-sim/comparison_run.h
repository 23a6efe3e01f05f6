// SPDX-License-Identifier: GPL-2.0
//
// Migrations of a freshly built machine: the device offers what the strategy needs (free
// page hinting, free page reporting), the guest boots, the workload prepares its memory
// (and keeps running for `busy`, paced by one model clock from its start), and the model
// migrates and verifies, as many times as asked.
#ifndef VBALLOON_TOOLS_COMPARISON_RUN_H
#define VBALLOON_TOOLS_COMPARISON_RUN_H

#include <cstdint>
#include <functional>
#include <vector>

#include "comparison_report.h"
#include "migration/migration.h"
#include "migration/workload.h"

namespace vbsim
{

// The workloads' defaults are sized for a guest of several GiB; a smaller guest gets a
// working set of an eighth of its RAM and a busy footprint of a quarter at most.
migration::WorkloadConfig workload_for(migration::WorkloadKind kind, uint64_t ram_bytes);

// Migrations of one prepared machine (the guest after a migration is the guest before it):
// `runs_per_strategy` runs of each strategy, the strategies taking turns, one row each (named
// workload.name). The strategies must need the same device features (hinting, reporting).
// The guest zeroes pages it frees or hands out as the description's init_on_free and
// init_on_alloc say. Never throws for a failed run: its row has verified = false and error
// set. `starting_run` (optional) is told each run before it starts.
// `shuffle_free_list`: the guest's free lists are shuffled before the workload prepares
// (WorkloadConfig::shuffle_free_list).
std::vector<ComparisonRow>
run_migrations(uint64_t ram_bytes, const migration::WorkloadConfig& workload,
	       const std::vector<migration::Strategy>& strategies,
	       const migration::MigrationConfig& base_config, unsigned runs_per_strategy,
	       const std::function<void(migration::Strategy, unsigned)>& starting_run,
	       const migration::ProgressCallback& progress, bool shuffle_free_list = false,
	       bool pre_5_10_free_order = false);

} // namespace vbsim

#endif
