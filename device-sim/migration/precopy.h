// SPDX-License-Identifier: GPL-2.0
#ifndef VBSIM_MIGRATION_PRECOPY_H
#define VBSIM_MIGRATION_PRECOPY_H

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "migration/convergence_window.h"
#include "migration/destination_image.h"
#include "migration/dirty_log.h"
#include "migration/free_page_tracker.h"
#include "migration/migration.h"
#include "migration/model_time.h"
#include "migration/page_bitmap.h"
#include "migration/residency.h"
#include "migration/senders.h"

namespace vbsim::migration
{

// One pre-copy migration, in the phases QEMU's migration thread goes through: setup, then
// rounds of iterations with a bitmap sync at the end of each pass, the convergence rule
// after each round, stop-and-copy, and (the model's own) verification of the destination.
// migrate() drives it; it is used once.
class PreCopy
{
public:
	PreCopy(MigrationMachine& machine, const MigrationConfig& config);

	// QEMU's ram_save_setup: dirty logging on, every page to send, the first bitmap sync.
	void setup();
	// One pass over the to-send bitmap, iteration by iteration, and the bitmap sync that
	// ends it while the guest runs. Returns the round as it finished.
	RoundProgress run_round(unsigned round);
	// After a round while the guest runs: may the VM stop now? Sets result.converged.
	bool converged(const RoundProgress& round);
	// The VM stops and the last harvest takes what it wrote; the next round is the last.
	void stop_and_copy();
	// QEMU's balloon starts a hint round after each bitmap sync while the guest runs.
	void start_hint_round();
	// With the VM still stopped: is the destination the source?
	void verify();
	// Hands the machine back (DONE, clocks, the guest resumed) and totals the costs.
	MigrationResult finish();

private:
	// The migration thread's own CPU in a round, outside the senders.
	struct RoundCost {
		uint64_t sync_ns = 0;
		uint64_t residency_ns = 0;
	};
	// Where the running QEMU iteration began: the round's model time, CPU critical path and
	// bytes sent at that moment.
	struct IterationStart {
		double model_ms = 0;
		double cpu_ms = 0;
		uint64_t bytes = 0;
	};
	enum class Guest { kRunning, kStopped };

	// Returns true when QEMU's rule stopped the VM before the pass was done.
	bool send_pass(unsigned round, RoundProgress& progress, RoundCost& cost);
	bool iteration_time_up() const;
	// Between two iterations; true when the VM must stop mid-pass.
	bool iteration_boundary(unsigned round, RoundCost& cost);
	void end_round(unsigned round, RoundProgress& progress, RoundCost& cost);
	void sync_while_running(unsigned round);
	// QEMU's migration_bitmap_sync: the dirty log's harvest into the to-send bitmap.
	void bitmap_sync(Guest guest, bool keep_harvest);
	uint64_t pending_logged() const;
	double qemu_expected_downtime_ms();
	double whole_page_expected_downtime_ms(const RoundProgress& round) const;
	void stop_hint_round();
	void land_hints();
	void compare_destination();
	void pause_machine();
	void resume_machine();

	MigrationMachine& machine_;
	const MigrationConfig& config_;
	const bool hints_;
	const bool deferred_hints_;
	const bool qemu_convergence_;
	// QEMU's ram_save_iterate runs iterations of iteration_ms of model time, between which
	// the hints that arrived meanwhile land. Stop-and-copy is one iteration.
	const bool iterates_;
	// Under QEMU's own rate limit (max-bandwidth below the link) an iteration ends at
	// MAX_WAIT of sending or once it has sent the budget of the 100 ms rate window; the
	// migration thread then sleeps to the window's end (migration_rate_limit) and runs the
	// next iteration, and its convergence check, only in the next window. A slower link
	// instead blocks the sends, and MAX_WAIT, wall time, ends the iteration.
	const bool rate_limited_iterations_;

	MigrationResult result_;
	const double guest_cpu_start_ms_;
	const double device_cpu_start_ms_;
	const uint64_t released_early_start_;

	DirtyLog log_;
	PageBitmap to_send_;
	DestinationImage destination_;
	Residency residency_;
	FreePageTracker tracker_;
	std::vector<uint64_t> harvested_;
	RoundCounters counters_;
	ModelTime time_;
	ConvergenceWindow window_;
	std::unique_ptr<Senders> senders_;

	double elapsed_ms_ = 0;
	uint64_t bitmap_ns_ = 0;
	bool stopping_ = false;
	uint64_t cleared_counted_ = 0;
	IterationStart iteration_;
	const std::function<bool()> iteration_over_;
};

} // namespace vbsim::migration

#endif
