// SPDX-License-Identifier: GPL-2.0
#include "machine/migration_wiring.h"

#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

MachineForMigration::MachineForMigration(SimMachine& machine, migration::Workload* workload)
	: hints_(machine.device)
{
	described_.memory = &machine.memory;
	// The rings and the core object live there and are written directly (sim_guest.h).
	described_.always_dirty = {
		{0, machine.config.guest.kernel_bytes / GuestMemory::kWirePageBytes}};
	described_.pages_in_use = [workload] {
		return workload ? workload->pages_in_use() : std::vector<PfnRun>{};
	};
	described_.workload = workload;
	if (machine.device.profile().offered_features & VB_FEATURE(VB_F_FREE_PAGE_HINT)) {
		described_.hints = &hints_;
		BalloonDevice* device = &machine.device;
		described_.set_free_page_observer = [device](FreePageEvents* observer) {
			device->set_free_page_events(observer);
		};
		described_.device_free_page_cpu_ms = [device] { return device->free_page_queue_cpu_ms(); };
	}
	SimGuest* guest = &machine.guest;
	// A stopped VM: its vCPUs first (their work items may wait on the device), then the
	// device, whose thread would otherwise still write the rings the verifier compares.
	Transport* transport = &machine.device.transport();
	described_.pause_guest = [guest, transport] {
		guest->pause();
		transport->pause_device();
	};
	described_.resume_guest = [guest, transport] {
		transport->resume_device();
		guest->resume();
	};
	described_.guest_cpu_ms = [guest] { return guest->free_page_cpu_ms(); };
	described_.guest_hint_pages_released_early = [guest]() -> uint64_t {
		return guest->core()
			       ? guest->core()->counters().hint_wire_pages_released_early.get()
			       : 0;
	};
}

} // namespace vbsim
