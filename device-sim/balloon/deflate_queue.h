// SPDX-License-Identifier: GPL-2.0
//
// The device side of deflateq (5.5.6.1). Each chain is one request: a PFN array
// (pfn_array.h) or, under VB_F_X_CHUNKED, ranges (chunk_request.h). The pages named go back
// to the guest (HostPageOwnership) just before the request is acked, their contents left
// alone; a page the host does not hold is counted and acked anyway.
//
// The deflate gate: while it is held, requests are received (counted, pages still
// host-owned) but not acked; releasing it acks everything held, in arrival order. How a
// test opens the race window of MUST_TELL_HOST on purpose (balloon_device.h).
#ifndef VBSIM_BALLOON_DEFLATE_QUEUE_H
#define VBSIM_BALLOON_DEFLATE_QUEUE_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "balloon/page_runs.h"
#include "balloon/pfn_array.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

class DeviceQueue;
class GuestMemory;
class HostPageOwnership;
class HugePageTracker;
class PageDiscarder;
struct DescriptorChain;

class DeflateQueue
{
public:
	// `huge_pages`: null when guest RAM is backed by 4 KiB host pages.
	DeflateQueue(const GuestMemory& memory, uint32_t max_pfn_bytes, HostPageOwnership& ownership,
		     PageDiscarder& discarder, HugePageTracker* huge_pages,
		     BalloonDeviceCounters& counters)
	    : reader_(memory, max_pfn_bytes, counters), ownership_(ownership),
	      discarder_(discarder), huge_pages_(huge_pages), counters_(counters)
	{
	}

	// ---- Device thread ------------------------------------------------------------------
	// The driver set DRIVER_OK with these features.
	void activate(uint64_t negotiated_features) { negotiated_ = negotiated_features; }
	// Device reset: held requests went with the queue (the gate itself stays as set).
	void reset();
	// A chain arrived on the deflateq: ack it, or hold it while the gate is held.
	void receive(DeviceQueue& queue, const DescriptorChain& chain);
	// Acks every held request, in order. Returns whether there were any.
	bool ack_held(DeviceQueue& queue);

	// ---- Any thread ---------------------------------------------------------------------
	void hold_acks() { hold_acks_.store(true); }
	// Opens the gate; the held requests wait for ack_held() on the device thread.
	void open_gate() { hold_acks_.store(false); }
	size_t held_acks() const { return held_count_.load(); }
	bool wait_for_held_acks(size_t count, std::chrono::milliseconds timeout) const;

private:
	struct HeldDeflate {
		uint16_t head;
		std::vector<uint64_t> pfns;
	};

	bool negotiated(unsigned bit) const { return (negotiated_ & VB_FEATURE(bit)) != 0; }
	void ack(DeviceQueue& queue, uint16_t head, const std::vector<uint64_t>& pfns);
	void set_held_count(size_t count);

	PfnRequestReader reader_;
	HostPageOwnership& ownership_;
	PageDiscarder& discarder_;
	HugePageTracker* huge_pages_;
	BalloonDeviceCounters& counters_;
	uint64_t negotiated_ = 0;

	std::vector<PfnRun> chunks_; // VB_F_X_CHUNKED requests
	std::vector<HeldDeflate> held_;
	std::atomic<bool> hold_acks_{false};
	std::atomic<size_t> held_count_{0};
	mutable std::mutex held_mutex_;
	mutable std::condition_variable held_changed_;
};

} // namespace vbsim

#endif
