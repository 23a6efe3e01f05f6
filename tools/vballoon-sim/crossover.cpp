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
