// SPDX-License-Identifier: GPL-2.0
#include "crossover.h"

#include <algorithm>

namespace vbsim
{

double total_ms_at_link(const migration::MigrationResult& run, double link_bytes_per_second,
			double max_bandwidth_bytes_per_second)
{
	migration::MigrationConfig pacing;
	pacing.link_bytes_per_second = link_bytes_per_second;
	pacing.max_bandwidth_bytes_per_second = max_bandwidth_bytes_per_second;
	double total = run.total_ms;
	for (const migration::RoundProgress& round : run.round_log) {
		const double rate = pacing.round_rate(round.stop_and_copy);
		total -= std::max(round.network_ms, round.critical_cpu_ms);
		total +=
			std::max(migration::link_ms(round.bytes_sent, rate), round.critical_cpu_ms);
	}
	return total;
}

double total_ms_with_costs(const migration::MigrationResult& run, const HostCosts& costs,
			   double link_bytes_per_second, double max_bandwidth_bytes_per_second)
{
	// The run's own costs, as compare's costs line measures them: zero checks per page
	// checked (only where the run checked), the rest of the host's CPU per page sent with
	// the hand-off to a pipe's reader.
	const uint64_t checked = run.zero_scan_cpu_ms > 0 ? run.pages_sent + run.zero_pages : 0;
	const double own_zero_ns = checked ? run.zero_scan_cpu_ms * 1e6 / double(checked) : 0;
	const double rest_ms =
		std::max(0.0, run.host_cpu_ms - run.zero_scan_cpu_ms - run.hint_cpu_ms) +
		run.handoff_ms;
	const double own_send_ns = run.pages_sent ? rest_ms * 1e6 / double(run.pages_sent) : 0;
	migration::MigrationConfig pacing;
	pacing.link_bytes_per_second = link_bytes_per_second;
	pacing.max_bandwidth_bytes_per_second = max_bandwidth_bytes_per_second;
	double total = run.total_ms;
	for (const migration::RoundProgress& round : run.round_log) {
		const double round_checked =
			checked ? double(round.pages_sent + round.zero_pages) : 0;
		const double own =
			round_checked * own_zero_ns + double(round.pages_sent) * own_send_ns;
		const double given = round_checked * costs.zero_check_ns_per_page +
				     double(round.pages_sent) * costs.send_ns_per_page;
		const double cpu =
			own > 0 ? round.critical_cpu_ms * given / own : round.critical_cpu_ms;
		const double rate = pacing.round_rate(round.stop_and_copy);
		total -= std::max(round.network_ms, round.critical_cpu_ms);
		total += std::max(migration::link_ms(round.bytes_sent, rate), cpu);
	}
	return total;
}

Spread spread_of(std::vector<double> values)
{
	Spread s;
	s.count = values.size();
	if (values.empty())
		return s;
	std::sort(values.begin(), values.end());
	const size_t n = values.size();
	s.median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
	s.min = values.front();
	s.max = values.back();
	return s;
}

std::vector<double> crossover_links()
{
	return {1e9 / 8, 10e9 / 8, 25e9 / 8, 100e9 / 8, migration::kUnlimitedLink};
}

} // namespace vbsim
