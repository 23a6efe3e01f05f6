// SPDX-License-Identifier: GPL-2.0
//
// What `vballoon-sim compare` prints and writes: one row per workload, strategy and run,
// shown as a table per workload (the median run of each strategy, with ratios against
// `none` measured in the same series), then the figure users come for: hint+zero-detect
// against zero-detect (time, host CPU, bytes; median and min-max over the runs) and the
// crossover line (that time ratio at 1, 10, 25, 100 Gbit/s and unlimited, crossover.h).
// The same as JSON ({"setup", "results": [...], "summary": [...]}, the fields
// tools/plot_comparison.py and the tests read) and as CSV.
#ifndef VBALLOON_TOOLS_COMPARISON_REPORT_H
#define VBALLOON_TOOLS_COMPARISON_REPORT_H

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "crossover.h"
#include "migration/migration.h"

namespace vbsim
{

struct ComparisonRow {
	std::string workload; // "fresh", "freed", "busy"
	std::string strategy; // "none", "zero-detect", ... (migration::strategy_name)
	unsigned run = 0;     // 0 .. repeat-1
	migration::MigrationResult result;
};

// How the run was set up, for the header and the JSON.
struct ComparisonSetup {
	uint64_t ram_mib = 0;
	std::string host;	 // host profile name
	std::string host_models; // what it stands for
	double link_bytes_per_second = 0; // migration::kUnlimitedLink allowed
	unsigned sender_threads = 0;
	// How the channels go: "exec:cat's pipe", "loopback TCP", "a socket pair", with
	// "multifd, zero-page-detection ..." where multifd is on; empty: not said.
	std::string channels{};
	double downtime_limit_ms = 0;
	std::string untouched; // "populated" or "shared-zero"
	unsigned repeat = 1;
	// While the guest runs (QEMU's max-bandwidth); migration::kUnlimitedLink: none.
	double max_bandwidth_bytes_per_second = migration::kUnlimitedLink;
	// MigrationConfig::max_rounds: where a migration that does not converge is stopped.
	unsigned max_rounds = migration::MigrationConfig{}.max_rounds;
	// A host's own per-page costs to answer for (compare --host-costs), and where they came
	// from; none: only this machine's answer.
	std::optional<HostCosts> host_costs{};
	std::string host_costs_from{};
};

// What drove a workload's figures on the machine that ran them: the per-page costs measured in
// the base's median run (the zero check per page checked, the rest of the sending host's CPU
// per page sent with the hand-off to a pipe's reader, the fixed costs) and, in the hinted median
// run, when the first hints landed against the bulk pass. A faster or slower host moves the
// base's time with these, and the hinted run's much less: how a ratio follows its machine.
struct MeasuredCosts {
	std::string base;	    // the strategy the costs are from ("zero-detect", "none")
	uint64_t pages_checked = 0; // pages the base checked for zero (sent + zero)
	double zero_check_ns_per_page = 0; // 0: the base checks nothing (none)
	// Host CPU less zero checks and hints, and the hand-off to a pipe's reader, per page sent.
	double send_ns_per_page = 0;
	double handoff_ns_per_page = 0;	    // of send_ns_per_page: the pipe's hand-off (0: sockets)
	double reader_copy_ns_per_page = 0; // of handoff_ns_per_page: the reader's copy
	double fixed_ms = 0;	     // setup, bitmap syncs, VM stop
	bool hinted = false;	     // the figures below are from a hinted run
	double first_hint_ms = -1;   // -1: no hint landed
	double bulk_pass_end_ms = 0; // when the hinted run's first round ended
	uint64_t bulk_pass_pages_hinted = 0; // pages its first round skipped because hinted
};

// The costs of one workload's runs; empty base when it has no verified base run with pages
// sent.
MeasuredCosts measured_costs(const std::vector<ComparisonRow>& rows, const std::string& workload);

// One table per workload, rows in the order given; then a line of the costs measured here, then each workload's hint+zero-detect
// against zero-detect and its crossover line, over the pairs that both converged. A run that did
// not converge says so in its row, with the guest's dirty rate against the rate sent; its
// total is the time until the model stopped it (">"), and it has no downtime: QEMU would
// still be iterating.
std::string comparison_tables(const ComparisonSetup& setup, const std::vector<ComparisonRow>& rows);
// {"setup": {...}, "results": [{"workload", "strategy", "run", "bytes_sent", "pages_sent",
// "zero_pages", "host_cpu_ms", "zero_scan_cpu_ms", "hint_cpu_ms", "guest_cpu_ms",
// "receiver_cpu_ms", "reader_copy_ms", "handoff_ms", "rounds", "bitmap_syncs", "converged",
// "dirty_bytes_per_second", "pending_bytes", "threshold_bytes", "sent_bytes_per_second", "total_ms",
// "downtime_ms", "fixed_ms", "first_hint_ms", "verified"}, ...], "summary": [{"workload", "runs", "time_ratio",
// "host_cpu_ratio", "bytes_ratio", "crossover": [{"link_gbit", "time_ratio"}]}]} (over the
// pairs whose runs both converged; none: no summary; with host costs also
// "time_ratio_with_host_costs" at the runs' link); a ratio is {"median", "min", "max"};
// an unlimited link is null; "costs": [{"workload", and MeasuredCosts' fields}] for each
// workload with a base run.
nlohmann::ordered_json comparison_json(const ComparisonSetup& setup,
				       const std::vector<ComparisonRow>& rows);
// The results' main fields, a header line and one line per row.
std::string comparison_csv(const std::vector<ComparisonRow>& rows);

} // namespace vbsim

#endif
