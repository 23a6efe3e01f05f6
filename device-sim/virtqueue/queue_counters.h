// SPDX-License-Identifier: GPL-2.0
//
// What one device-side queue has seen. Written by the device thread, read by tests from
// any thread; they outlive the DeviceQueue (the transport keeps them across resets).
#ifndef VBSIM_VIRTQUEUE_QUEUE_COUNTERS_H
#define VBSIM_VIRTQUEUE_QUEUE_COUNTERS_H

#include <array>
#include <atomic>
#include <cstdint>

#include "virtqueue/ring_rejection.h"

namespace vbsim
{

struct QueueCounters {
	std::atomic<uint64_t> chains_popped{0}; // valid chains handed to the device
	std::atomic<uint64_t> used_pushed{0};	// used entries written (incl. rejected chains)
	// Batches of used entries the driver asked not to be interrupted for (event index or
	// VRING_AVAIL_F_NO_INTERRUPT).
	std::atomic<uint64_t> interrupts_suppressed{0};
	std::array<std::atomic<uint64_t>, kRingRejectionCount> rejected{};

	uint64_t rejected_by(RingRejection reason) const
	{
		return rejected[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
	}

	uint64_t rejected_total() const
	{
		uint64_t total = 0;
		for (const auto& count : rejected)
			total += count.load(std::memory_order_relaxed);
		return total;
	}
};

} // namespace vbsim

#endif
