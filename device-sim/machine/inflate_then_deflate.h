// SPDX-License-Identifier: GPL-2.0
//
// The inflate-then-deflate scenario, run one way for everyone who runs it (`vballoon-sim
// inflate`, bench/inflate): with the driver bound, set the balloon target and time until the
// driver settles, then set it to 0 and time the deflate. Every counter the device, the
// transport, the guest's OS and the driver core keep is read before and after each phase
// (outside the timed part), so each user takes the differences it reports. What a user does
// around the phases (dirtying guest memory, pinning threads, its own checks) goes in hooks.
#ifndef VBSIM_MACHINE_INFLATE_THEN_DEFLATE_H
#define VBSIM_MACHINE_INFLATE_THEN_DEFLATE_H

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim_machine.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

// Every counter a phase is measured by, read at one moment. Counters are cumulative over
// the machine's life; a phase is the difference of two readings.
struct MachineCounters {
	// The device (BalloonDeviceCounters).
	uint64_t inflate_requests = 0, deflate_requests = 0, wire_pages_inflated = 0,
		 wire_pages_deflated = 0, wire_pages_discarded = 0, discard_calls = 0,
		 discard_failures = 0, translate_ns = 0, discard_ns = 0;
	uint64_t rejected = 0; // over all rejection kinds
	// The transport, by queue kind (zero for a queue that does not exist).
	std::array<uint64_t, VB_QUEUE_KIND_COUNT> kicks{}, interrupts{}, interrupt_ns{}, chains{};
	// The guest's OS (SimOsCounters).
	uint64_t alloc_ns = 0, guest_init_ns = 0, pages_initialised_by_guest = 0,
		 pages_skipped_initialising = 0;
	// The driver core (vb::BalloonCounters).
	uint64_t inflate_messages = 0, deflate_messages = 0, wire_pages_device_initialised = 0;

	static MachineCounters read(const SimMachine& machine);
	// Kicks and interrupts over every queue.
	uint64_t all_kicks() const;
	uint64_t all_interrupts() const;
};

// One direction: the target set, the wall time until the driver settled (or the timeout),
// and the counters on either side of it.
struct BalloonPhase {
	uint32_t target_wire_pages = 0;
	double ms = 0;
	std::optional<vb::StepResult> settled; // nothing: the timeout passed first
	MachineCounters before;
	MachineCounters after;
};

// Each hook may be empty; returning false stops the run there (it failed, and the hook said
// why to its caller).
struct InflateThenDeflateHooks {
	// The driver bound; the inflate's counters are read next.
	std::function<bool(SimMachine&)> booted;
	std::function<bool(SimMachine&, const BalloonPhase&)> inflated;
	std::function<bool(SimMachine&, const BalloonPhase&)> deflated;
};

struct InflateThenDeflateRun {
	std::string refused;	// why the driver could not bind; empty when it did
	bool completed = false; // both phases ran and no hook stopped the run
	BalloonPhase inflate;
	BalloonPhase deflate;
	// What broke on the guest's side (SimMachine::guest_problems), once completed; the
	// guest is removed after it is read.
	std::vector<std::string> guest_problems;
};

// Boots `machine`, inflates to `target_wire_pages`, deflates to 0, each phase waiting at most
// `settle_timeout` for the driver.
InflateThenDeflateRun inflate_then_deflate(SimMachine& machine, uint32_t target_wire_pages,
					   std::chrono::milliseconds settle_timeout,
					   const InflateThenDeflateHooks& hooks = {});

} // namespace vbsim

#endif
