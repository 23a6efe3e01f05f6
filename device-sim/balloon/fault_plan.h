// SPDX-License-Identifier: GPL-2.0
//
// Faults the simulated balloon device injects on purpose, for the system tests of the
// driver's failure paths (tests/system/fault_injection_test.cpp). A plan is part of
// BalloonDeviceOptions; the default plan injects nothing.
//
// Per queue (indexed by vb_queue_kind, so every queue the device grows gets them too):
//   stall_per_chain       a slow host: the device thread sleeps this long before each chain
//   drop_interrupt_every  every Nth used-buffer notification is lost (the driver must look
//                         at the used ring again on its own)
//   ignore_kick_every     every Nth notification from the driver is lost (the driver must
//                         kick again when nothing comes back)
//   break_after_chains    after N chains the device refuses to go on: the next chain is
//                         taken and never returned, and the device sets DEVICE_NEEDS_RESET
//                         (virtio 2.1.2). On the deflateq this is a reset during deflate;
//                         on VB_QUEUE_FREE_PAGE it will be a reset during hinting once the
//                         device handles hints (handle_chain()'s free-page case).
//   vanish_after_chains   after N chains the device is surprise-removed: nothing more is
//                         returned on any queue and the transport reports it gone
// Whole device:
//   retarget              after N inflate chains the host changes num_pages (a config
//                         change while the driver inflates)
#ifndef VBSIM_BALLOON_FAULT_PLAN_H
#define VBSIM_BALLOON_FAULT_PLAN_H

#include <array>
#include <chrono>
#include <cstdint>

#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

struct QueueFaults {
	std::chrono::milliseconds stall_per_chain{0};
	uint32_t drop_interrupt_every = 0; // 0: none
	uint32_t ignore_kick_every = 0;	   // 0: none
	uint32_t break_after_chains = 0;   // 0: never
	uint32_t vanish_after_chains = 0;  // 0: never
};

struct TargetChangeFault {
	uint32_t after_inflate_chains = 0; // 0: never
	uint32_t new_target_wire_pages = 0;
};

struct FaultPlan {
	std::array<QueueFaults, VB_QUEUE_KIND_COUNT> queues{};
	TargetChangeFault retarget;

	QueueFaults& on(vb_queue_kind kind) { return queues[kind]; }
	const QueueFaults& on(vb_queue_kind kind) const { return queues[kind]; }
};

} // namespace vbsim

#endif
