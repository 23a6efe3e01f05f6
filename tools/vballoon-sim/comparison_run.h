// SPDX-License-Identifier: GPL-2.0
//
// One migration of a freshly built machine: the device offers what the strategy needs
// (free page hinting, free page reporting), the guest boots, the workload prepares its
// memory (and keeps running for `busy`), and the model migrates and verifies.
#ifndef VBALLOON_TOOLS_COMPARISON_RUN_H
#define VBALLOON_TOOLS_COMPARISON_RUN_H

#include <cstdint>

#include "comparison_report.h"
#include "migration/migration.h"
#include "migration/workload.h"

namespace vbsim
{

// The workloads' defaults are sized for a guest of several GiB; a smaller guest gets a
// working set of an eighth of its RAM and a busy footprint of a quarter at most.
migration::WorkloadConfig workload_for(migration::WorkloadKind kind, uint64_t ram_bytes);

// Never throws for a failed run: the row's result has verified = false and error set.
ComparisonRow run_one_migration(uint64_t ram_bytes, migration::WorkloadKind workload,
				const migration::MigrationConfig& config,
				const migration::ProgressCallback& progress);

} // namespace vbsim

#endif
