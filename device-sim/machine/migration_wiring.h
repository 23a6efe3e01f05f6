// SPDX-License-Identifier: GPL-2.0
//
// What the migration model (device-sim/migration/) sees of a SimMachine: its RAM, the
// kernel area the guest writes behind the dirty log's back, the pages a workload holds (to
// verify after the run), the workload to pause at stop-and-copy, the balloon device's free
// page hint controls and events (the real virtqueue path: the host writes a command id, the
// driver hints on free_page_vq, the device tells the model), and the guest's CPU time spent
// hinting and reporting, and pausing the guest at stop-and-copy (SimGuest::pause: its
// threads stand still, so a DONE written before verification is handled only afterwards).
// Reports reach the model as discarded pages (residency).
#ifndef VBSIM_MACHINE_MIGRATION_WIRING_H
#define VBSIM_MACHINE_MIGRATION_WIRING_H

#include "machine/sim_machine.h"
#include "migration/migration.h"
#include "migration/workload.h"

namespace vbsim
{

class MachineForMigration
{
public:
	// `workload` may be null (then only the kernel area is verified). The machine and the
	// workload must outlive this object.
	MachineForMigration(SimMachine& machine, migration::Workload* workload);
	MachineForMigration(const MachineForMigration&) = delete;
	MachineForMigration& operator=(const MachineForMigration&) = delete;

	migration::MigrationMachine& described() { return described_; }

private:
	// The host's side of free page hinting, as QEMU's migration notifiers drive it.
	class DeviceHintControl final : public migration::FreePageHintControl
	{
	public:
		explicit DeviceHintControl(BalloonDevice& device) : device_(device) {}
		uint32_t start_hint_round() override { return device_.start_hint_round(); }
		void stop_hint_round() override { device_.stop_hint_round(); }
		void finish_hinting() override { device_.finish_hinting(); }

	private:
		BalloonDevice& device_;
	};

	DeviceHintControl hints_;
	migration::MigrationMachine described_;
};

} // namespace vbsim

#endif
