// SPDX-License-Identifier: GPL-2.0
//
// The workloads of the migration tests, scaled down to a few MiB so a busy guest dirties,
// frees and rewrites within a test's short run.
#ifndef VB_TESTS_MIGRATION_SMALL_WORKLOAD_H
#define VB_TESTS_MIGRATION_SMALL_WORKLOAD_H

#include "migration/workload.h"

namespace vbsim::migration::testing
{

inline WorkloadConfig small_workload(WorkloadKind kind, double churn_mib_per_second)
{
	WorkloadConfig config;
	config.name = workload_name(kind);
	config.params = vbw_default_params();
	config.params.working_set_bytes = 4ull << 20;
	config.params.live_bytes = 4ull << 20;
	config.params.arena_bytes = 256ull << 10;
	config.params.churn_bytes_per_second = churn_mib_per_second * (1 << 20);
	config.params.hot_bytes = 1ull << 20;
	config.params.hot_bytes_per_second = 32.0 * (1 << 20);
	config.params.cache_bytes = 1ull << 20;
	config.params.cache_bytes_per_second = 4.0 * (1 << 20);
	config.params.warmup_ms = 100;
	vbw_keep_preset_parts(preset_of(kind), &config.params);
	return config;
}

} // namespace vbsim::migration::testing

#endif
