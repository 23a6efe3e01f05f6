// SPDX-License-Identifier: GPL-2.0
#ifndef VBSIM_MIGRATION_CONVERGENCE_WINDOW_H
#define VBSIM_MIGRATION_CONVERGENCE_WINDOW_H

#include <cstdint>

#include "memory/guest_memory.h"

namespace vbsim::migration
{

// QEMU's BUFFER_DELAY: max-bandwidth's budget is per window this long, and the bandwidth
// behind the convergence threshold is measured over windows at least this long.
inline constexpr double kBandwidthWindowMs = 100;

// QEMU's convergence threshold (migration_update_counters): bandwidth x downtime limit, the
// bandwidth being bytes on the wire (zero-page records included) over the last window of at
// least kBandwidthWindowMs. It is 0 until the first window closes, so nothing but an empty
// bitmap converges before then.
class ConvergenceWindow
{
public:
	ConvergenceWindow(double start_ms, double downtime_limit_ms)
	    : start_ms_(start_ms), downtime_limit_ms_(downtime_limit_ms)
	{
	}

	// Closes the window if it is long enough, and opens the next at now_ms.
	void update(double now_ms, uint64_t bytes_sent)
	{
		if (now_ms - start_ms_ < kBandwidthWindowMs)
			return;
		threshold_bytes_ = double(bytes_sent - start_bytes_) / (now_ms - start_ms_) *
				   downtime_limit_ms_;
		start_ms_ = now_ms;
		start_bytes_ = bytes_sent;
	}

	// Bandwidth of the last closed window x downtime limit (0: none closed yet).
	double threshold_bytes() const { return threshold_bytes_; }

	// QEMU counts every dirty page as a whole page, zero or not.
	bool below_threshold(uint64_t pending_pages) const
	{
		return pending_pages == 0 || double(pending_pages * kPage) < threshold_bytes_;
	}

	// Above the threshold QEMU does not estimate; twice the limit says "not yet".
	double expected_downtime_ms(uint64_t pending_pages) const
	{
		if (!below_threshold(pending_pages))
			return downtime_limit_ms_ * 2;
		if (threshold_bytes_ > 0)
			return double(pending_pages * kPage) / threshold_bytes_ *
			       downtime_limit_ms_;
		return 0;
	}

private:
	static constexpr uint64_t kPage = GuestMemory::kWirePageBytes;

	double start_ms_;
	uint64_t start_bytes_ = 0;
	double threshold_bytes_ = 0;
	double downtime_limit_ms_;
};

} // namespace vbsim::migration

#endif
