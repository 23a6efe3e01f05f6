// SPDX-License-Identifier: GPL-2.0
#include "comparison_report.h"

#include <fmt/core.h>

#include <algorithm>

namespace vbsim
{

namespace
{

std::string human_bytes(uint64_t bytes)
{
	if (bytes >= (1ull << 30))
		return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
	if (bytes >= (1ull << 20))
		return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
	return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
}

// "0.25x" of the baseline; "-" without one (no `none` row, or a zero baseline).
std::string ratio(double value, const migration::MigrationResult* baseline, double base_value)
{
	if (!baseline || base_value <= 0)
		return "-";
	return fmt::format("{:.3f}x", value / base_value);
}

std::vector<std::string> workloads_in_order(const std::vector<ComparisonRow>& rows)
{
	std::vector<std::string> names;
	for (const ComparisonRow& row : rows) {
		if (std::find(names.begin(), names.end(), row.workload) == names.end())
			names.push_back(row.workload);
	}
	return names;
}

} // namespace

std::string comparison_tables(const ComparisonSetup& setup, const std::vector<ComparisonRow>& rows)
{
	std::string out = fmt::format(
		"live migration of a {} MiB guest: link {:.1f} Gbit/s, {} sender threads, "
		"downtime limit {:.0f} ms\n",
		setup.ram_mib, setup.link_bytes_per_second * 8 / 1e9, setup.sender_threads,
		setup.downtime_limit_ms);
	out += "host CPU: zero scans, copies, dirty bitmap and hint handling on the source "
	       "(of it: zero scans, hints); guest CPU: hinting or reporting.\n";
	out += "ratios are against `none` in the same run.\n";
	for (const std::string& workload : workloads_in_order(rows)) {
		const migration::MigrationResult* baseline = nullptr;
		for (const ComparisonRow& row : rows) {
			if (row.workload == workload && row.strategy == "none")
				baseline = &row.result;
		}
		out += fmt::format("\nworkload {}\n", workload);
		out += fmt::format("{:<19} {:>10} {:>11} {:>8} {:>9} {:>8} {:>8} {:>8} {:>6} {:>9} "
				   "{:>8} {:>9}  {}\n",
				   "strategy", "pages sent", "bytes sent", "vs none", "host CPU",
				   "zero scan", "hints", "guest CPU", "rounds", "total ms", "vs none",
				   "downtime", "verified");
		for (const ComparisonRow& row : rows) {
			if (row.workload != workload)
				continue;
			const migration::MigrationResult& r = row.result;
			if (!r.verified) {
				// A run that failed is an error, never a figure.
				out += fmt::format("{:<19} {:>10} {:>11} {:>8} {:>9} {:>8} {:>8} {:>9} "
						   "{:>6} {:>9} {:>8} {:>9}  NO: {}\n",
						   row.strategy, "-", "-", "-", "-", "-", "-", "-", "-",
						   "-", "-", "-", r.error);
				continue;
			}
			std::string verdict = r.converged ? "yes" : "yes (did not converge)";
			out += fmt::format(
				"{:<19} {:>10} {:>11} {:>8} {:>9.1f} {:>8.1f} {:>8.1f} {:>9.1f} {:>6} "
				"{:>9.1f} {:>8} {:>9.1f}  {}\n",
				row.strategy, r.pages_sent, human_bytes(r.bytes_sent),
				ratio(static_cast<double>(r.bytes_sent), baseline,
				      baseline ? static_cast<double>(baseline->bytes_sent) : 0),
				r.host_cpu_ms, r.zero_scan_cpu_ms, r.hint_cpu_ms, r.guest_cpu_ms,
				r.rounds, r.total_ms,
				ratio(r.total_ms, baseline, baseline ? baseline->total_ms : 0),
				r.downtime_ms, verdict);
		}
	}
	return out;
}

nlohmann::ordered_json comparison_json(const ComparisonSetup& setup,
				       const std::vector<ComparisonRow>& rows)
{
	nlohmann::ordered_json results = nlohmann::ordered_json::array();
	for (const ComparisonRow& row : rows) {
		const migration::MigrationResult& r = row.result;
		results.push_back({{"workload", row.workload},
				   {"strategy", row.strategy},
				   {"bytes_sent", r.bytes_sent},
				   {"pages_sent", r.pages_sent},
				   {"host_cpu_ms", r.host_cpu_ms},
				   {"guest_cpu_ms", r.guest_cpu_ms},
				   {"rounds", r.rounds},
				   {"total_ms", r.total_ms},
				   {"downtime_ms", r.downtime_ms},
				   {"verified", r.verified}});
	}
	return {{"setup",
		 {{"ram_mib", setup.ram_mib},
		  {"link_bytes_per_second", setup.link_bytes_per_second},
		  {"sender_threads", setup.sender_threads},
		  {"downtime_limit_ms", setup.downtime_limit_ms}}},
		{"results", results}};
}

std::string comparison_csv(const std::vector<ComparisonRow>& rows)
{
	std::string out = "workload,strategy,bytes_sent,pages_sent,host_cpu_ms,guest_cpu_ms,rounds,"
			  "total_ms,downtime_ms,verified\n";
	for (const ComparisonRow& row : rows) {
		const migration::MigrationResult& r = row.result;
		out += fmt::format("{},{},{},{},{:.3f},{:.3f},{},{:.3f},{:.3f},{}\n", row.workload,
				   row.strategy, r.bytes_sent, r.pages_sent, r.host_cpu_ms,
				   r.guest_cpu_ms, r.rounds, r.total_ms, r.downtime_ms,
				   r.verified ? "true" : "false");
	}
	return out;
}

} // namespace vbsim
