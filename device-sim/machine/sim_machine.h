// SPDX-License-Identifier: GPL-2.0
//
// One simulated machine: guest RAM, the host's balloon device on its thread, and the
// simulated guest running the driver core, wired together the one way every user needs
// (the guest asks the device which pages the host owns, for MUST_TELL_HOST checks). The
// CLI, the benchmarks and the system tests all build their machines here, so a new piece
// of the host (hinting, a migration model) is wired once.
//
// Members are public on purpose: tests and tools drive the device and the guest directly,
// and the machine only owns them and keeps their construction order (RAM, then device,
// then guest; destruction in reverse, so the guest stops before the device it talks to).
#ifndef VBSIM_MACHINE_SIM_MACHINE_H
#define VBSIM_MACHINE_SIM_MACHINE_H

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "sim_guest.h"

namespace vbsim
{

struct MachineConfig {
	uint64_t ram_bytes = 64ull << 20; // small enough for a test; tools set their own
	PageBacking backing = PageBacking::kSmallPages;
	BalloonDeviceOptions device;
	SimGuestOptions guest;
	// Runs on guest RAM after it is mapped and before the device or the guest exist (a
	// benchmark making all of RAM resident, timed on its own).
	std::function<void(GuestMemory&)> prepare_memory;
};

class SimMachine
{
public:
	// Throws std::invalid_argument for a bad RAM size or an inconsistent device profile,
	// std::system_error when guest RAM cannot be mapped.
	explicit SimMachine(const MachineConfig& config);
	SimMachine(const SimMachine&) = delete;
	SimMachine& operator=(const SimMachine&) = delete;

	// Binds the driver. Empty on success, else why the device was refused.
	std::string boot();
	// Sets the balloon target and waits until the driver settled or stalled; nothing when
	// `timeout` passed first (a hung device or driver).
	std::optional<vb::StepResult> settle_at(uint32_t target_wire_pages,
						std::chrono::milliseconds timeout);

	uint64_t guest_pages() const { return guest.allocator().frame_count(); }
	uint64_t resident_mib() const { return memory.resident_bytes(0, memory.size()) >> 20; }
	// Inputs the device refused, over all rejection kinds, since the machine was built.
	uint64_t rejected_inputs() const;

	// What broke on the guest's side: its accounting, a page reused while the host owned
	// it, a bad page operation. Empty when all is well.
	std::vector<std::string> guest_problems() const;
	// What broke on the host's side: failed discards, refused inputs.
	std::vector<std::string> host_problems() const;

	const MachineConfig config;
	GuestMemory memory;
	BalloonDevice device;
	SimGuest guest;
};

} // namespace vbsim

#endif
