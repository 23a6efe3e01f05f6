// SPDX-License-Identifier: GPL-2.0
//
// The device side of reporting_vq (VIRTIO_BALLOON_F_PAGE_REPORTING). Each chain is one
// report: device-writable ranges of free guest pages. The device discards them (the guest
// RAM mapping's resident size drops; the next guest touch faults in a zero page) and only
// then acknowledges, since the guest may reuse the pages as soon as it sees the ack.
//
// Poison: with PAGE_POISON and a non-zero poison_val, a discarded page would read back as
// zero, not as the guest's pattern, so the device keeps such pages as they are (QEMU does
// the same). With poison_val 0 discarding keeps the promise.
//
// DEVICE_INIT_REPORTED (bit 6, proposal 244 as on mst's QEMU): the used length of a report
// is the bytes the device discarded, so the guest knows they read zero; 0 when it kept
// them (poison_val not 0, discards inhibited, a failed discard).
#ifndef VBSIM_BALLOON_FREE_PAGE_REPORT_QUEUE_H
#define VBSIM_BALLOON_FREE_PAGE_REPORT_QUEUE_H

#include <cstdint>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "balloon/free_page_events.h"
#include "balloon/page_discarder.h"
#include "balloon/page_runs.h"

namespace vbsim
{

class DeviceQueue;
class GuestMemory;
class HostPageOwnership;
struct DescriptorChain;

class FreePageReportQueue
{
public:
	FreePageReportQueue(GuestMemory& memory, PageDiscarder& discarder,
			    const HostPageOwnership& ownership, BalloonDeviceCounters& counters)
	    : memory_(memory), discarder_(discarder), ownership_(ownership), counters_(counters)
	{
	}

	// Device thread. `keep_contents`: PAGE_POISON with a non-zero poison_val.
	// `tell_initialised`: DEVICE_INIT_REPORTED is negotiated, so the used length is the
	// bytes now reading zero (0 otherwise, and when discards are inhibited).
	void receive(DeviceQueue& queue, const DescriptorChain& chain, bool keep_contents,
		     bool tell_initialised, FreePageEvents* events);

private:
	GuestMemory& memory_;
	PageDiscarder& discarder_;
	const HostPageOwnership& ownership_;
	BalloonDeviceCounters& counters_;
	std::vector<PfnRun> runs_;
};

} // namespace vbsim

#endif
