// SPDX-License-Identifier: GPL-2.0
//
// Where hints pay: a run's total time at another link or on a host with other per-page
// costs, and the spread of a ratio over repeated runs.
//
// total_ms_at_link() keeps everything the run measured (pages and bytes per round, each
// round's CPU critical path, syncs, setup, VM stop) and recomputes only the pacing: each
// round takes max(its bytes over the new link, its CPU path) + its sync. For an idle guest
// that is what a run at that link would measure, but for two things: rounds take longer or
// shorter in model time, so hints land at other iteration boundaries (a slower link lets
// the first iteration send less before they land) and a busy guest dirties more or less
// between syncs (rounds and bytes would change). The crossover line says so. A run under
// max-bandwidth (MigrationConfig::round_rate()) keeps it: its live rounds go at no more than
// that, its stop-and-copy at the link.
#ifndef VBALLOON_TOOLS_CROSSOVER_H
#define VBALLOON_TOOLS_CROSSOVER_H

#include <vector>

#include "migration/migration.h"

namespace vbsim
{

double total_ms_at_link(const migration::MigrationResult& run, double link_bytes_per_second,
			double max_bandwidth_bytes_per_second = migration::kUnlimitedLink);

// A host's own per-page costs: what compare's costs line measured on it (MeasuredCosts,
// zero_check_ns_per_page and send_ns_per_page), or figures known otherwise.
struct HostCosts {
	double zero_check_ns_per_page = 0;
	double send_ns_per_page = 0;
};

// The run's total time on a host with those costs, at a link: each round's CPU critical path
// is scaled by what its pages (checked for zero, sent) cost there against what they cost in
// this run (the run's own per-page costs, over all its rounds), then paced as
// total_ms_at_link() does. Syncs, setup and the VM stop stay as measured, and so do when hints
// landed and what a busy guest dirtied: the same limits as the crossover line.
double total_ms_with_costs(const migration::MigrationResult& run, const HostCosts& costs,
			   double link_bytes_per_second,
			   double max_bandwidth_bytes_per_second = migration::kUnlimitedLink);

struct Spread {
	double median = 0;
	double min = 0;
	double max = 0;
	size_t count = 0;
};
// Median (the mean of the middle two for an even count), min and max; count 0 if empty.
Spread spread_of(std::vector<double> values);

// The links the crossover line shows, in bytes per second (the last one unlimited).
std::vector<double> crossover_links();

} // namespace vbsim

#endif
