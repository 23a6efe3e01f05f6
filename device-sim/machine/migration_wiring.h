// SPDX-License-Identifier: GPL-2.0
//
// What the migration model (device-sim/migration/) sees of a SimMachine: its RAM, the
// kernel area the guest writes behind the dirty log's back, the pages a workload holds (to
// verify after the run), and the workload to pause at stop-and-copy.
//
// Not described yet: pausing the guest itself (the model pauses the workload; the guest's
// other writers, the driver's worker and the device's used rings, touch only the kernel
// area and stand still unless the host changes the target or asks for stats), the device's
// free page hint controls and its event observer (they come with the device's hinting),
// and the guest's CPU time spent hinting or reporting.
#ifndef VBSIM_MACHINE_MIGRATION_WIRING_H
#define VBSIM_MACHINE_MIGRATION_WIRING_H

#include "machine/sim_machine.h"
#include "migration/migration.h"
#include "migration/workload.h"

namespace vbsim
{

// `workload` may be null (nothing to verify but the kernel area's transfer). The machine
// and the workload must outlive the returned description.
migration::MigrationMachine describe_for_migration(SimMachine& machine,
						   migration::Workload* workload);

} // namespace vbsim

#endif
