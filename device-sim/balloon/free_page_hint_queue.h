// SPDX-License-Identifier: GPL-2.0
//
// The device side of free_page_vq (VIRTIO_BALLOON_F_FREE_PAGE_HINT). The host starts a round
// by writing a fresh command id to config; the driver answers with one 4-byte out buffer
// holding that id, then in-buffers naming free blocks, then an out buffer holding STOP.
//
// This device records hints and never changes a hinted page (the spec lets it, and a
// migration model may decide to skip sending them; that is FreePageEvents' business).
// Hints are used only while the round the driver echoed is the one in config: a block that
// arrives under a stale id, or after the host wrote STOP or DONE, is ignored and counted.
// Every range is checked against guest RAM first.
#ifndef VBSIM_BALLOON_FREE_PAGE_HINT_QUEUE_H
#define VBSIM_BALLOON_FREE_PAGE_HINT_QUEUE_H

#include <cstdint>

#include "balloon/balloon_device_counters.h"
#include "balloon/free_page_events.h"
#include "memory/guest_byte_order.h"

namespace vbsim
{

class DeviceQueue;
class GuestMemory;
struct DescriptorChain;
struct ChainBuffer;

// A range of whole 4 KiB pages inside guest RAM (what a hinted or reported block must be).
bool whole_pages_inside_ram(const GuestMemory& memory, const ChainBuffer& range);

class FreePageHintQueue
{
public:
	FreePageHintQueue(GuestMemory& memory, BalloonDeviceCounters& counters)
	    : memory_(memory), counters_(counters)
	{
	}

	// Device thread. `config_cmd_id` is what free_page_hint_cmd_id holds now; `id_order`
	// the byte order of ids in out buffers: little-endian, or for a legacy driver the
	// guest's ("transitional devices and drivers MUST format the command ID in
	// free_page_vq out buffers in guest-native endian").
	void receive(DeviceQueue& queue, const DescriptorChain& chain, uint32_t config_cmd_id,
		     ByteOrder id_order, FreePageEvents* events);
	// Device reset: a round the driver had started is over.
	void reset(FreePageEvents* events);

	// The id of the round the driver is answering (0 when none).
	uint32_t active_cmd_id() const { return active_cmd_id_; }

private:
	void receive_id(uint32_t id, uint32_t config_cmd_id, FreePageEvents* events);
	void receive_blocks(const DescriptorChain& chain, uint32_t config_cmd_id, FreePageEvents* events);

	GuestMemory& memory_;
	BalloonDeviceCounters& counters_;
	uint32_t active_cmd_id_ = 0;
};

} // namespace vbsim

#endif
