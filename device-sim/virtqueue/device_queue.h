// SPDX-License-Identifier: GPL-2.0
//
// The device side of one split virtqueue: pops the chains the driver made available and
// pushes used elements. The driver is not trusted. Every value it wrote into guest RAM is
// read once into a local copy (no double fetch) and then checked before it is used:
// the avail index step, every descriptor index, chain length and loops, indirect tables,
// buffer addresses and lengths (inside RAM, no overflow), and the readable-before-writable
// order. A rejected chain is counted by reason and never reaches the device model.
//
// What happens to a rejected chain (see ring_rejection.h for the reasons):
//  - A malformed chain whose head index is valid is returned used with length 0. The ring
//    itself is still coherent, so only the chain's author is affected, the driver gets
//    its descriptors back (nothing leaks), and the device keeps serving the queue.
//  - A head index out of range, or a head the device already holds, cannot be returned
//    (the id would be meaningless, or returned twice); the avail entry is consumed, counted
//    and dropped.
//  - An avail index that jumps ahead by more than the queue size means the device can no
//    longer tell new entries from stale ones. That is unrecoverable: the queue is marked
//    broken and the transport sets DEVICE_NEEDS_RESET (virtio 1.x 2.1.2), as QEMU does for
//    "Guest moved used index from ... to ...".
//
// Threading: one DeviceQueue is used by the device thread only. The driver runs on another
// thread and shares the ring through guest RAM, ordered by acquire/release on the idx
// fields and full fences around event-index checks.
#ifndef VBSIM_VIRTQUEUE_DEVICE_QUEUE_H
#define VBSIM_VIRTQUEUE_DEVICE_QUEUE_H

#include <cstdint>
#include <optional>
#include <vector>

#include "virtqueue/queue_counters.h"
#include "virtqueue/ring_layout.h"
#include "virtqueue/chain_buffer.h"

namespace vbsim
{

class GuestMemory;

// A validated chain: every segment lies inside guest RAM, readable ones first. The
// vectors keep their capacity between pops, so steady-state popping does not allocate.
struct DescriptorChain {
	uint16_t head = 0;
	std::vector<ChainBuffer> readable;
	std::vector<ChainBuffer> writable;
	uint64_t readable_bytes = 0;
	uint64_t writable_bytes = 0;

	void clear()
	{
		readable.clear();
		writable.clear();
		readable_bytes = 0;
		writable_bytes = 0;
	}
};

class DeviceQueue
{
public:
	struct Config {
		QueueAreas areas;
		uint16_t size = 0;
		bool event_idx = false;	    // VIRTIO_F_RING_EVENT_IDX negotiated
		bool indirect_desc = false; // VIRTIO_F_RING_INDIRECT_DESC negotiated
	};

	enum class PopStatus : uint8_t {
		kChain,	   // `chain` holds a validated chain; the device must push it used later
		kEmpty,	   // nothing new available
		kRejected, // one avail entry was consumed and rejected (counted); keep popping
		kBroken,   // the queue is unusable until reset (see header comment)
	};

	// `config.areas` must have passed check_queue_areas(); throws std::invalid_argument
	// otherwise, as that is a bug in the caller, not driver input.
	DeviceQueue(GuestMemory& memory, const Config& config, QueueCounters& counters);

	PopStatus pop(DescriptorChain& chain);

	// Returns a chain popped earlier. `written_bytes` is what the device wrote into the
	// chain's writable part. Throws std::logic_error for a head the device does not hold.
	void push_used(uint16_t head, uint32_t written_bytes);

	// After a batch of push_used: whether the driver wants an interrupt now, honouring
	// used_event (EVENT_IDX) or VRING_AVAIL_F_NO_INTERRUPT.
	bool needs_interrupt();

	// Notification suppression while the device is busy draining the queue. After
	// enable_notifications() the device must check again: it returns true when chains
	// arrived meanwhile, closing the race with a driver that saw notifications disabled.
	void disable_notifications();
	bool enable_notifications();

	bool broken() const { return broken_; }
	uint16_t size() const { return layout_.size(); }
	uint16_t in_flight() const { return in_flight_count_; }

private:
	// Each returns the reason the chain is malformed, or nothing when it is valid.
	std::optional<RingRejection> walk_chain(uint16_t head, DescriptorChain& chain);
	std::optional<RingRejection> walk_indirect_table(const vb_vring_desc& table,
							 DescriptorChain& chain,
							 bool& seen_writable);
	std::optional<RingRejection> add_buffer(const vb_vring_desc& desc, bool writable,
						DescriptorChain& chain, bool& seen_writable);
	vb_vring_desc read_descriptor(uint64_t gpa) const;
	void reject(RingRejection reason);
	void mark_in_flight(uint16_t head);
	uint32_t next_walk_stamp();

	uint16_t load_avail_idx() const;
	void store_used_flags(uint16_t flags);
	void store_avail_event(uint16_t value);

	GuestMemory& memory_;
	RingLayout layout_;
	QueueCounters& counters_;
	const bool event_idx_;
	const bool indirect_desc_;

	uint16_t last_avail_idx_ = 0; // next avail entry to consume
	uint16_t used_idx_ = 0;	      // next used entry to write (published after each push)
	uint16_t signalled_used_ = 0; // used idx when an interrupt was last considered
	bool broken_ = false;

	std::vector<bool> head_in_flight_;
	uint16_t in_flight_count_ = 0;
	// Loop detection: a descriptor is visited in this walk iff its stamp equals the walk's.
	std::vector<uint32_t> direct_visit_stamp_;
	std::vector<uint32_t> indirect_visit_stamp_;
	uint32_t walk_stamp_ = 0;
};

} // namespace vbsim

#endif
