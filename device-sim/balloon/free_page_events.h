// SPDX-License-Identifier: GPL-2.0
//
// What the balloon device learns about the guest's free memory, told to whoever models the
// host's use of it (the migration model in device-sim/migration/). The device calls these on
// its own thread, after validating every range against guest RAM; an observer must be quick
// and must not call back into the device.
//
// This is the one narrow door between the device's queue handling and the migration model:
// neither reaches into the other's internals.
#ifndef VBSIM_BALLOON_FREE_PAGE_EVENTS_H
#define VBSIM_BALLOON_FREE_PAGE_EVENTS_H

#include <cstdint>

namespace vbsim
{

class FreePageEvents
{
public:
	virtual ~FreePageEvents() = default;

	// Free page hinting (VIRTIO_BALLOON_F_FREE_PAGE_HINT). The host asked for a new round
	// by writing `cmd_id` to config; the driver echoed it on the free page queue.
	virtual void hint_round_started(uint32_t cmd_id) = 0;
	// The driver hinted [gpa, gpa + bytes) as free during round `cmd_id`. The range may be
	// reused by the guest once the host writes DONE; until then the guest holds it.
	virtual void pages_hinted(uint32_t cmd_id, uint64_t gpa, uint64_t bytes) = 0;
	// The driver sent STOP for round `cmd_id` (it has nothing more to hint, or the host
	// asked it to stop).
	virtual void hint_round_stopped(uint32_t cmd_id) = 0;

	// Free page reporting (VIRTIO_BALLOON_F_PAGE_REPORTING): the driver reported
	// [gpa, gpa + bytes) free and the device discarded it before acknowledging.
	virtual void pages_reported(uint64_t gpa, uint64_t bytes) = 0;
};

} // namespace vbsim

#endif
