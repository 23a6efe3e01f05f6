// SPDX-License-Identifier: GPL-2.0
#include "comparison_run.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <memory>

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

ComparisonRow run_one_migration(uint64_t ram_bytes, migration::WorkloadKind workload,
				const migration::MigrationConfig& config,
				const migration::ProgressCallback& progress)
{
	ComparisonRow row;
	row.workload = migration::workload_name(workload);
	row.strategy = migration::strategy_name(config.strategy);
	row.result.strategy = config.strategy;
	row.result.ram_bytes = ram_bytes;
	try {
		// QEMU is the host that migrates; it offers hinting and reporting on request.
		MachineBuilder builder;
		builder.ram_bytes(ram_bytes).backing(PageBacking::kTransparentHugePages).profile("qemu-7.2");
		if (migration::uses_hints(config.strategy))
			builder.free_page_hinting();
		if (migration::uses_reports(config.strategy))
			builder.page_reporting();
		std::unique_ptr<SimMachine> machine = builder.build();
		if (std::string refused = machine->boot(); !refused.empty())
			return failed(row, "the driver could not bind: " + refused);

		// User programs allocate through the guest's pressure path (the hint shrinker, then
		// the OOM notifier), as their page faults would.
		std::unique_ptr<migration::GuestUserMemory> user =
			migration::make_sim_guest_user_memory(machine->memory, machine->guest);
		std::unique_ptr<migration::Workload> load =
			migration::make_workload(workload_for(workload, ram_bytes), *user);
		load->prepare();
		MachineForMigration described(*machine, load.get());
		{
			load->start();
			if (migration::uses_reports(config.strategy) &&
			    !migration::wait_for_reporting_to_settle(machine->guest, std::chrono::seconds(60)))
				return failed(row, "free page reporting did not settle within 60 s");
			// The busy workload's thread stops even when the model throws.
			struct StopOnExit {
				migration::Workload& workload;
				~StopOnExit() { workload.stop(); }
			} stop_on_exit{*load};
			row.result = migration::migrate(described.described(), config, progress);
		}
		machine->guest.remove();
		if (std::vector<std::string> problems = machine->guest_problems(); !problems.empty())
			return failed(row, problems.front());
	} catch (const std::exception& error) {
		return failed(row, error.what());
	}
	return row;
}

} // namespace vbsim
