// SPDX-License-Identifier: GPL-2.0
#include "machine/migration_wiring.h"

namespace vbsim
{

migration::MigrationMachine describe_for_migration(SimMachine& machine,
						   migration::Workload* workload)
{
	migration::MigrationMachine described;
	described.memory = &machine.memory;
	// The rings and the core object live there and are written directly (sim_guest.h).
	described.always_dirty = {{0, machine.config.guest.kernel_bytes / GuestMemory::kPageBytes}};
	described.pages_in_use = [workload] {
		return workload ? workload->pages_in_use() : std::vector<migration::PageRange>{};
	};
	described.workload = workload;
	return described;
}

} // namespace vbsim
