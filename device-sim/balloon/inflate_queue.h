// SPDX-License-Identifier: GPL-2.0
//
// The device side of inflateq (5.5.6.1). Each chain is one request: a PFN array
// (pfn_array.h) or, under VB_F_X_CHUNKED, ranges (chunk_request.h). A refused request is
// returned untouched; otherwise every page named becomes the host's (HostPageOwnership) and
// is discarded (PageDiscarder), a page already the host's is counted and discarded again.
// Above 4 KiB host pages only wholly ballooned host pages are discarded (huge_page_tracker.h).
//
// With DEVICE_INIT_ON_INFLATE (bit 7, proposal 242 as on mst's QEMU) or our
// VB_F_X_INIT_ON_INFLATE (bit 21) the chain ends in one device-writable bitmap: the device
// sets the bit of every unit (PFN, or chunk) that now reads back as zero and returns the
// bitmap's length as the used length. One path serves both; they differ only in a
// non-zero poison_val (InitRule): bit 21 writes it when it is one repeated byte, bit 7
// leaves the bitmap alone and returns used length 0.
#ifndef VBSIM_BALLOON_INFLATE_QUEUE_H
#define VBSIM_BALLOON_INFLATE_QUEUE_H

#include <cstdint>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "balloon/page_runs.h"
#include "balloon/pfn_array.h"
#include "vballoon/spec/virtio_balloon.h"
#include "virtqueue/device_queue.h"

namespace vbsim
{

class GuestMemory;
class HostPageOwnership;
class HugePageTracker;
class PageDiscarder;

class InflateQueue
{
public:
	// `huge_pages`: null when guest RAM is backed by 4 KiB host pages.
	InflateQueue(GuestMemory& memory, uint32_t max_pfn_bytes, HostPageOwnership& ownership,
		     PageDiscarder& discarder, HugePageTracker* huge_pages,
		     BalloonDeviceCounters& counters)
	    : memory_(memory), reader_(memory, max_pfn_bytes, counters), ownership_(ownership),
	      discarder_(discarder), huge_pages_(huge_pages), counters_(counters)
	{
	}

	// ---- Device thread ------------------------------------------------------------------
	// The driver set DRIVER_OK with these features; a reset forgets them.
	void activate(uint64_t negotiated_features) { negotiated_ = negotiated_features; }
	void reset() { negotiated_ = 0; }
	// Whether receive() needs poison_val: an init bit and PAGE_POISON both negotiated.
	bool wants_poison_value() const;
	// A chain arrived on the inflateq. `poison_val` as the driver wrote it (only read when
	// wants_poison_value()).
	void receive(DeviceQueue& queue, const DescriptorChain& chain, uint32_t poison_val);

private:
	// What a set bit may mean, by the negotiated bit.
	enum class InitRule : uint8_t {
		kNone,		   // no bitmap
		kZeroOnly,	   // DEVICE_INIT_ON_INFLATE: zero, and only with poison_val 0
		kZeroOrPoisonByte, // VB_F_X_INIT_ON_INFLATE: zero, or poison_val as one byte
	};
	InitRule init_rule() const;
	bool negotiated(unsigned bit) const { return (negotiated_ & VB_FEATURE(bit)) != 0; }
	// Takes the request's pages for the host and discards what may be discarded now;
	// false when a discard failed.
	bool take_and_discard();
	// VB_F_X_INIT_ON_INFLATE: which of the request's units (PFNs, or chunks) now read back
	// as zero or poison_val, written into the driver's bitmap. Returns the bytes written.
	// `poison`: poison_val when PAGE_POISON is negotiated, else 0.
	uint32_t report_initialised(const ChainBuffer& bitmap, InitRule rule, bool discards_done,
				    uint32_t poison);

	GuestMemory& memory_;
	PfnRequestReader reader_;
	HostPageOwnership& ownership_;
	PageDiscarder& discarder_;
	HugePageTracker* huge_pages_;
	BalloonDeviceCounters& counters_;
	uint64_t negotiated_ = 0;

	std::vector<PfnRun> chunks_; // VB_F_X_CHUNKED requests
	std::vector<PfnRun> discard_runs_;
	std::vector<uint8_t> bitmap_;
	DescriptorChain payload_; // a request without its bitmap descriptor
};

} // namespace vbsim

#endif
