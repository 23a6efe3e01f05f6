// SPDX-License-Identifier: GPL-2.0
//
// What the transport has seen. Atomic: written on the guest and device threads, read by
// tests on theirs.
#ifndef VBSIM_TRANSPORT_TRANSPORT_COUNTERS_H
#define VBSIM_TRANSPORT_TRANSPORT_COUNTERS_H

#include <array>
#include <atomic>
#include <cstdint>

#include "transport/device_status.h"

namespace vbsim
{

enum class QueueSetupError : uint8_t {
	kNone,
	kNoSuchQueue,  // index beyond the device's queues, or absent under the features
	kWrongPhase,   // not between FEATURES_OK (DRIVER for legacy) and DRIVER_OK
	kSizeInvalid,  // zero or not a power of two
	kSizeTooLarge, // above the device's maximum for that queue
	kMisaligned,   // an area below its required alignment
	kOutsideRam,   // an area not fully inside guest RAM
	kOverlapping,  // the used ring overlaps the descriptor table or the available ring
	kCount
};

inline constexpr size_t kQueueSetupErrorCount = static_cast<size_t>(QueueSetupError::kCount);

struct TransportCounters {
	std::atomic<uint64_t> resets{0};
	std::array<std::atomic<uint64_t>, kStatusViolationCount> status_writes_rejected{};
	std::atomic<uint64_t> features_ok_refused{0};
	std::atomic<uint64_t> legacy_driver_ok_refused{0}; // features a legacy driver cannot have
	std::atomic<uint64_t> driver_feature_writes_rejected{0}; // outside DRIVER..FEATURES_OK
	std::array<std::atomic<uint64_t>, kQueueSetupErrorCount> queue_setups_rejected{};
	std::atomic<uint64_t> config_reads_out_of_range{0};
	std::atomic<uint64_t> config_writes_rejected{0};
	std::atomic<uint64_t> config_interrupts{0};
	std::atomic<uint64_t> needs_reset_raised{0};
	// Notifications the device did not act on: the queue was not live, or not yet activated
	// (then the activation pass serves what they announced).
	std::atomic<uint64_t> kicks_ignored{0};
	std::atomic<uint64_t> notifications_out_of_range{
		0}; // guest notified a queue index that does not exist

	uint64_t status_rejected(StatusViolation violation) const
	{
		return status_writes_rejected[static_cast<size_t>(violation)].load();
	}
	uint64_t queue_setup_rejected(QueueSetupError error) const
	{
		return queue_setups_rejected[static_cast<size_t>(error)].load();
	}
};

// Per transport queue: notifications in both directions.
struct NotificationCounters {
	std::atomic<uint64_t> kicks_received{0};  // guest -> device, summed eventfd counts
	std::atomic<uint64_t> interrupts_sent{0}; // device -> guest
	// Time the device thread spent sending them: the eventfd write, which wakes the waiting
	// guest thread and costs tens of microseconds when that means waking another CPU.
	std::atomic<uint64_t> interrupt_ns{0};
};

} // namespace vbsim

#endif
