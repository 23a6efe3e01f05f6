// SPDX-License-Identifier: GPL-2.0
#include "comparison_run.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <exception>
#include <functional>
#include <memory>
#include <stdexcept>

#include "machine/machine_builder.h"
#include "machine/migration_wiring.h"

namespace vbsim
{

namespace
{

ComparisonRow failed(ComparisonRow row, const std::string& why)
{
	row.result.verified = false;
	row.result.error = why;
	return row;
}

} // namespace

migration::WorkloadConfig workload_for(migration::WorkloadKind kind, uint64_t ram_bytes)
{
	return migration::workload_for_ram(kind, ram_bytes);
}

std::vector<ComparisonRow>
run_migrations(uint64_t ram_bytes, const migration::WorkloadConfig& workload,
	       const std::vector<migration::Strategy>& strategies,
	       const migration::MigrationConfig& base_config, unsigned runs_per_strategy,
	       const std::function<void(migration::Strategy, unsigned)>& starting_run,
	       const migration::ProgressCallback& progress, bool shuffle_free_list,
	       bool pre_5_10_free_order)
{
	std::vector<ComparisonRow> rows;
	if (strategies.empty())
		return rows;
	auto row_for = [&](migration::Strategy strategy, unsigned run) {
		ComparisonRow row;
		row.workload = workload.name;
		row.strategy = migration::strategy_name(strategy);
		row.run = run;
		row.result.strategy = strategy;
		row.result.ram_bytes = ram_bytes;
		return row;
	};
	// Every run gets a row: the ones that could not run say why.
	auto fail_rest = [&](const std::string& why) {
		for (unsigned run = 0; run < runs_per_strategy; run++)
			for (migration::Strategy strategy : strategies) {
				const bool done = std::any_of(rows.begin(), rows.end(), [&](const ComparisonRow& r) {
					return r.run == run && r.result.strategy == strategy;
				});
				if (!done)
					rows.push_back(failed(row_for(strategy, run), why));
			}
		return rows;
	};
	const bool hinting = migration::uses_hints(strategies.front());
	const bool reporting = migration::uses_reports(strategies.front());
	for (migration::Strategy strategy : strategies)
		if (migration::uses_hints(strategy) != hinting || migration::uses_reports(strategy) != reporting)
			throw std::invalid_argument("run_migrations: strategies that need different devices");
	try {
		// QEMU is the host that migrates; it offers hinting and reporting on request.
		MachineBuilder builder;
		builder.ram_bytes(ram_bytes).backing(PageBacking::kTransparentHugePages).profile("qemu-7.2");
		// Its guest keeps Linux's min watermark: the free pages a hint round cannot take.
		builder.min_free_pages(linux_min_free_pages(ram_bytes));
		if (hinting)
			builder.free_page_hinting();
		if (reporting)
			builder.page_reporting().hold_reporting();
		// The guest kernel's init_on_free (freed pages zeroed, as the balloon's deflated
		// ones) and init_on_alloc (user memory handed out zeroed).
		if (workload.params.init_on_free)
			builder.guest_zeroes_pages(false);
		builder.config().guest.zero_on_alloc = workload.params.init_on_alloc != 0;
		std::unique_ptr<SimMachine> machine = builder.build();
		if (std::string refused = machine->boot(); !refused.empty())
			return fail_rest("the driver could not bind: " + refused);

		// User programs allocate through the guest's pressure path (the hint shrinker, then
		// the OOM notifier), as their page faults would.
		std::unique_ptr<migration::GuestUserMemory> user =
			migration::make_sim_guest_user_memory(machine->memory, machine->guest);
		migration::WorkloadConfig workload_config = workload;
		workload_config.shuffle_free_list = shuffle_free_list;
		workload_config.pre_5_10_free_order = pre_5_10_free_order;
		std::unique_ptr<migration::Workload> load = migration::make_workload(workload_config, *user);
		// One clock from before the workload starts: the workload paces itself by it
		// throughout, the migrations drive it while they run.
		migration::ModelClock clock;
		load->set_clock([&clock] { return clock.now_ms(); });
		load->prepare();
		// The guest's reporting begins once the workload holds its memory, as in a guest
		// whose program starts at boot: Linux reports a sixteenth of a list every 2 s, so
		// that program allocates from memory in the order boot left it (SimGuestOptions::
		// hold_reporting). The runs below wait until reporting has settled.
		if (reporting)
			machine->guest.release_reporting();
		MachineForMigration described(*machine, load.get());
		described.described().clock = &clock;
		{
			load->start();
			// The busy workload's thread stops even when the model throws.
			struct StopOnExit {
				migration::Workload& workload;
				~StopOnExit() { workload.stop(); }
			} stop_on_exit{*load};
			// The guest after a migration is the guest before it (an idle guest got its
			// hinted pages back at DONE; busy went on): the runs share one prepared guest,
			// the strategies taking turns so that they see the same host conditions.
			for (unsigned run = 0; run < runs_per_strategy; run++) {
				for (migration::Strategy strategy : strategies) {
					if (starting_run)
						starting_run(strategy, run);
					// The run waits for reporting to settle (as the real-QEMU runs wait
					// for QEMU's RSS), instead of modelling Linux's 2 s delay.
					if (reporting && !migration::wait_for_reporting_to_settle(
								 machine->guest, std::chrono::seconds(60)))
						throw std::runtime_error("free page reporting did not settle within 60 s");
					migration::MigrationConfig config = base_config;
					config.strategy = strategy;
					ComparisonRow row = row_for(strategy, run);
					row.result = migration::migrate(described.described(), config, progress);
					rows.push_back(std::move(row));
				}
			}
		}
		machine->guest.remove();
		if (std::vector<std::string> problems = machine->guest_problems(); !problems.empty()) {
			for (ComparisonRow& r : rows)
				r = failed(r, problems.front());
			return rows;
		}
	} catch (const std::exception& error) {
		return fail_rest(error.what());
	}
	return rows;
}

} // namespace vbsim
