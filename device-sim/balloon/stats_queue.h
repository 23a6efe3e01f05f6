// SPDX-License-Identifier: GPL-2.0
//
// The device side of the statsq (5.5.6.3). The exchange is driven by the device: the driver
// primes one buffer, the device parses it and keeps it; to ask for fresh numbers the
// device returns ("uses") the buffer, and the driver refills and re-adds it. So the device
// holds at most one buffer, and a second one means the driver broke "at most one buffer
// outstanding": it is counted, the older buffer goes back to the driver and the newer is
// kept (what QEMU does, as the newer carries the fresher numbers).
//
// A legacy driver (legacy_interface.h) writes the entries in its CPU's byte order, and the
// first buffer it gives after initialisation is held (so it can be returned to ask for
// stats) but its values are not read: old drivers never filled it in.
#ifndef VBSIM_BALLOON_STATS_QUEUE_H
#define VBSIM_BALLOON_STATS_QUEUE_H

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "balloon/guest_stats.h"
#include "memory/guest_byte_order.h"

namespace vbsim
{

class DeviceQueue;
class GuestMemory;
struct DescriptorChain;

class StatsQueue
{
public:
	StatsQueue(const GuestMemory& memory, BalloonDeviceCounters& counters)
	    : memory_(memory), counters_(counters)
	{
	}

	// ---- Device thread ------------------------------------------------------------------
	// The driver set DRIVER_OK: how to read its entries, and whether its first buffer is
	// one to disregard.
	void activate(ByteOrder entry_order, bool disregard_first_buffer, bool pressure_tags)
	{
		entry_order_ = entry_order;
		disregard_next_ = disregard_first_buffer;
		known_tags_ = pressure_tags ? VB_S_NR : VB_S_FIRST_PRESSURE_TAG;
	}
	// A chain arrived on the statsq: parse it and hold it.
	void receive(DeviceQueue& queue, const DescriptorChain& chain);
	// Return the held buffer to ask for fresh stats; false when none is held, and then the
	// request is answered as soon as the driver's next buffer arrives (a host that asks
	// right after the driver bound must not wait for its next polling tick).
	bool request_fresh(DeviceQueue& queue);
	// The queue is gone (reset): the held buffer and any pending request went with it.
	void forget_buffer()
	{
		held_head_.reset();
		request_pending_ = false;
		entry_order_ = ByteOrder::kLittle;
		disregard_next_ = false;
	}
	bool holds_buffer() const { return held_head_.has_value(); }

	// ---- Any thread ---------------------------------------------------------------------
	GuestStats last() const;
	// Blocks until more than `update_count` buffers have been parsed or `timeout` passes.
	bool wait_for_update(uint64_t update_count, std::chrono::milliseconds timeout) const;

private:
	void answer_pending_request(DeviceQueue& queue);

	const GuestMemory& memory_;
	BalloonDeviceCounters& counters_;
	std::optional<uint16_t> held_head_;
	bool request_pending_ = false;
	ByteOrder entry_order_ = ByteOrder::kLittle;
	unsigned known_tags_ = VB_S_FIRST_PRESSURE_TAG; // VB_F_X_PRESSURE adds the rest
	bool disregard_next_ = false;
	std::vector<uint8_t> scratch_;

	mutable std::mutex mutex_;
	mutable std::condition_variable updated_;
	GuestStats last_;
};

} // namespace vbsim

#endif
