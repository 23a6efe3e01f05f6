// SPDX-License-Identifier: GPL-2.0
//
// What `vballoon-sim compare` prints and writes: one row per workload and strategy, shown
// as a table per workload (with ratios against `none` measured in the same run), as JSON
// ({"results": [...]}, the fields tools/plot_comparison.py and the tests read) and as CSV.
#ifndef VBALLOON_TOOLS_COMPARISON_REPORT_H
#define VBALLOON_TOOLS_COMPARISON_REPORT_H

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "migration/migration.h"

namespace vbsim
{

struct ComparisonRow {
	std::string workload; // "fresh", "freed", "busy"
	std::string strategy; // "none", "zero-detect", ... (migration::strategy_name)
	migration::MigrationResult result;
};

// How the run was set up, for the header and the JSON.
struct ComparisonSetup {
	uint64_t ram_mib = 0;
	double link_bytes_per_second = 0;
	unsigned sender_threads = 0;
	double downtime_limit_ms = 0;
};

// One table per workload, rows in the order given.
std::string comparison_tables(const ComparisonSetup& setup, const std::vector<ComparisonRow>& rows);
// {"setup": {...}, "results": [{"workload", "strategy", "bytes_sent", "pages_sent",
// "host_cpu_ms", "guest_cpu_ms", "rounds", "total_ms", "downtime_ms", "verified"}, ...]}
nlohmann::ordered_json comparison_json(const ComparisonSetup& setup,
				       const std::vector<ComparisonRow>& rows);
// The same fields as the JSON's results, a header line and one line per row.
std::string comparison_csv(const std::vector<ComparisonRow>& rows);

} // namespace vbsim

#endif
