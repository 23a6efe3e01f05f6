// SPDX-License-Identifier: GPL-2.0
//
// The pre-copy engine: migrate() runs PreCopy's phases (precopy.h). See migration.h for the
// API and docs/migration-model.md for the model: what is measured, what is computed, and why.
#include <stdexcept>
#include <string>
#include <vector>

#include "memory/guest_memory.h"
#include "migration/migration.h"
#include "migration/precopy.h"
#include "migration/workload.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kWirePageBytes;

void check_machine(const MigrationMachine& machine, const MigrationConfig& config)
{
	if (machine.memory == nullptr)
		throw std::invalid_argument("migration: the machine has no guest RAM");
	if (!machine.pages_in_use && config.verify)
		throw std::invalid_argument("migration: verification needs pages_in_use");
	if (uses_hints(config.strategy) && (machine.hints == nullptr || !machine.set_free_page_observer))
		throw std::invalid_argument(std::string("migration: strategy ") +
					    strategy_name(config.strategy) +
					    " needs the device's free page hint controls");
	if (!(config.link_bytes_per_second > 0) || !(config.max_bandwidth_bytes_per_second > 0) ||
	    !(config.downtime_limit_ms > 0) || !(config.iteration_ms > 0) ||
	    config.sender_threads == 0 || config.zero_page_extra_bytes > 8)
		throw std::invalid_argument(
			"migration: link bandwidth, max-bandwidth, downtime limit, "
			"iteration time and sender threads must be positive");
	for (const PfnRun& range : machine.always_dirty)
		if (range.first_pfn + range.wire_pages > machine.memory->size() / kPage)
			throw std::invalid_argument("migration: an always-dirty range lies outside RAM");
}

// MigrationResult::sent_bytes_per_second from the round log.
void measure_send_rate(MigrationResult& result)
{
	const std::vector<RoundProgress>& log = result.round_log;
	uint64_t sent = 0;
	double sending_ms = 0;
	unsigned counted = 0;
	for (size_t k = log.size(); k-- > 1 && counted < MigrationResult::kRateRounds;) {
		if (log[k].stop_and_copy)
			continue;
		sent += log[k].bytes_sent;
		sending_ms += log[k].round_ms;
		counted++;
	}
	if (sending_ms > 0)
		result.sent_bytes_per_second = double(sent) * 1000.0 / sending_ms;
}

} // namespace

MigrationResult migrate(MigrationMachine& machine, const MigrationConfig& config, const ProgressCallback& progress)
{
	check_machine(machine, config);
	const uint64_t written_before =
		machine.workload ? machine.workload->stats().pages_written : 0;
	PreCopy precopy(machine, config);
	precopy.setup();
	for (unsigned round = 0;; round++) {
		const RoundProgress finished = precopy.run_round(round);
		if (progress)
			progress(finished);
		if (finished.stop_and_copy)
			break;
		// A guest that dirties faster than the link never converges: max_rounds forces the stop.
		if (precopy.converged(finished) || round + 1 >= config.max_rounds)
			precopy.stop_and_copy();
		else
			precopy.start_hint_round();
	}
	precopy.verify();
	MigrationResult result = precopy.finish();
	measure_send_rate(result);
	// The workload writes only while the guest runs (it is paused for stop-and-copy).
	const double running_ms = result.total_ms - result.downtime_ms;
	if (machine.workload && running_ms > 0)
		result.dirty_bytes_per_second =
			double((machine.workload->stats().pages_written - written_before) * kPage) *
			1000.0 / running_ms;
	return result;
}

} // namespace vbsim::migration
