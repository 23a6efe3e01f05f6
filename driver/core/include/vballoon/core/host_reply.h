// SPDX-License-Identifier: GPL-2.0
//
// What became of the guest pages one call named to the host. This is the one place that
// decides what a refused or lost message means: tell_host() sorts every page it was given
// into a MessageOutcome, and each caller acts per outcome (inflate, deflate and migration
// here; free page hinting and reporting can use the same classes for their queues). No
// caller guesses from a bool, and no page is treated as acknowledged without an ack.
#ifndef VBALLOON_CORE_HOST_REPLY_H
#define VBALLOON_CORE_HOST_REPLY_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/os_interface.h"
#include "vballoon/core/run_cursor.h"
#include "vballoon/support/freestanding.h"

namespace vb {

enum class MessageOutcome : uint8_t {
	// The device returned the buffer: the host has taken (inflate) or let go of (deflate)
	// the pages.
	kAcknowledged,
	// The buffer never reached the ring (the queue refused it with nothing in flight, or
	// the device was gone already): the host never heard of these pages, which are exactly
	// as they were before the call.
	kNeverSent,
	// The buffer was on the ring when the device went away (reset, surprise removal): the
	// host may or may not have acted on it and will never say. Such pages stay out of the
	// guest's reach until the OS has reset the device (Balloon::release_after_reset()).
	kLost,
};

// Most messages in flight at once on one queue (what one HostReply can report as lost).
inline constexpr uint32_t kMessagesInFlightMax = 4;

// The pages of one call that were not acknowledged, and why. Messages go out in the order
// of the runs, so the pages never sent are one span at the end; the lost ones are whatever
// was in flight when the device went away.
struct [[nodiscard]] HostReply {
	bool device_gone = false; // the OS gave up on the queue: nothing more will come back
	bool refused = false;     // the queue refused a buffer with nothing in flight
	RunSpan lost[kMessagesInFlightMax];
	uint32_t lost_count = 0;
	RunSpan never_sent;

	bool all_acknowledged() const { return lost_count == 0 && never_sent.pages == 0; }

	// Calls fn(PageRun, MessageOutcome) for every page not acknowledged.
	template <class Fn> void for_each_unacknowledged(const PageRun* runs, Fn&& fn) const
	{
		for (uint32_t i = 0; i < lost_count; i++)
			for_each_part(runs, lost[i], [&](PageRun part) { fn(part, MessageOutcome::kLost); });
		for_each_part(runs, never_sent,
			      [&](PageRun part) { fn(part, MessageOutcome::kNeverSent); });
	}
};

} // namespace vb

#endif
