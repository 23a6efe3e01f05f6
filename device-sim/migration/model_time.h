// SPDX-License-Identifier: GPL-2.0
#ifndef VBSIM_MIGRATION_MODEL_TIME_H
#define VBSIM_MIGRATION_MODEL_TIME_H

#include <atomic>
#include <cstdint>

#include "migration/senders.h"

namespace vbsim::migration
{

// One migration's model time: the rounds it has finished, plus the running round's pacing.
// The workload and the free page tracker read it from their own threads while the senders
// run (ModelClock hands it to the workload), so what changes during a round is atomic.
class ModelTime
{
public:
	// origin_ms: where the caller's clock stood when the migration started. With the zero
	// scan in the migration thread, that one thread checks every page: it can be the
	// round's critical path rather than the busiest sender.
	ModelTime(double origin_ms, const RoundCounters& counters,
		  bool zero_scan_in_migration_thread)
	    : origin_ms_(origin_ms), counters_(counters),
	      zero_scan_in_migration_thread_(zero_scan_in_migration_thread)
	{
	}

	// The senders exist only after setup, whose time is measured, not paced.
	void pace_by(const Senders& senders) { senders_ = &senders; }

	// rate: what paces the round (MigrationConfig::round_rate()).
	void begin_round(double rate_bytes_per_second);
	void end_round();
	// Where finished rounds (and fixed costs) have brought the migration, since its start.
	void advance_to(double migration_ms);

	// The running round's CPU critical path.
	double round_cpu_ms() const;
	// The running round's model time: the link's pacing of the bytes sent so far, or the
	// CPU critical path if longer; 0 between rounds.
	double in_round_ms() const;
	double migration_now_ms() const;
	double model_now_ms() const { return origin_ms_ + migration_now_ms(); }

private:
	const double origin_ms_;
	const RoundCounters& counters_;
	const bool zero_scan_in_migration_thread_;
	const Senders* senders_ = nullptr;
	std::atomic<double> base_ms_{0};
	std::atomic<bool> round_running_{false};
	std::atomic<double> round_rate_{0};
};

} // namespace vbsim::migration

#endif
