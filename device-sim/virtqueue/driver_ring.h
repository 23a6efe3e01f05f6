// SPDX-License-Identifier: GPL-2.0
//
// The driver side of one split virtqueue, used by the simulated guest OS. It lays out
// descriptor chains in guest RAM exactly as a virtio 1.x driver does, publishes them, and
// collects what the device returned.
//
// The device is not trusted either: a used entry is checked against the driver's own
// bookkeeping (kept in host memory, never re-read from guest RAM) before its descriptors
// are freed. A bad entry is counted as a device error and skipped, never a crash; a used
// index that runs ahead of what is in flight leaves nothing to trust, so the ring is
// marked broken (what Linux's BAD_RING does).
//
// Threading: one DriverRing is used by one guest thread at a time; the device on its own
// thread shares only guest RAM with it.
#ifndef VBSIM_VIRTQUEUE_DRIVER_RING_H
#define VBSIM_VIRTQUEUE_DRIVER_RING_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "virtqueue/ring_layout.h"
#include "virtqueue/chain_buffer.h"

namespace vbsim
{

class GuestMemory;

enum class DriverRingError : uint8_t {
	kUsedIdOutOfRange,  // used id >= queue size
	kUsedIdNotInFlight, // used id names no chain the driver has outstanding
	kUsedLenTooLarge,   // device claims to have written more than the chain can hold
	kUsedIdxJump,	    // used idx ran ahead of the chains in flight (ring now broken)
	kCount
};

class DriverRing
{
public:
	struct Config {
		QueueAreas areas;
		uint16_t size = 0;
		bool event_idx = false;	    // VIRTIO_F_RING_EVENT_IDX negotiated
		bool indirect_desc = false; // VIRTIO_F_RING_INDIRECT_DESC negotiated
		// Guest RAM for indirect tables: one table of `indirect_table_entries` descriptors
		// per ring slot, indirect_area_bytes() long, 16-byte aligned. Chains of 2 or more
		// segments that fit a table use one descriptor of the ring instead of one each.
		uint64_t indirect_area_gpa = 0;
		uint16_t indirect_table_entries = 0;
	};

	static uint64_t indirect_area_bytes(uint16_t size, uint16_t table_entries);

	// Zeroes the three ring areas, as a driver does before handing them to the device.
	// Throws std::invalid_argument when the areas are not a valid queue in `memory`.
	DriverRing(GuestMemory& memory, const Config& config);

	// One chain: `out` segments (device-readable) then `in` segments (device-writable).
	// False when the chain is empty, the token is null, the ring is broken, or there are
	// not enough free descriptors; nothing is written then.
	bool add(const ChainBuffer* out, unsigned n_out, const ChainBuffer* in, unsigned n_in,
		 void* token);

	// Publishes everything added since the last call (release store of avail idx) and says
	// whether the device asked to be notified (avail_event, or VRING_USED_F_NO_NOTIFY).
	bool kick_prepare();

	// The token of the next chain the device returned, with the bytes it wrote in `*len`;
	// nullptr when there is none or the entry was invalid (then counted, see above).
	void* get_used(uint32_t* len);
	bool has_used() const;

	// Interrupt suppression. enable_interrupts() returns false when used entries are
	// already waiting (so the caller must not sleep waiting for an interrupt).
	void disable_interrupts();
	bool enable_interrupts();

	// After a device reset: the tokens of every chain still outstanding; the ring forgets
	// them and is ready to be zeroed by a new DriverRing.
	std::vector<void*> detach_unused();

	const RingLayout& layout() const { return layout_; }
	unsigned num_free() const { return num_free_; }
	uint16_t size() const { return layout_.size(); }
	bool broken() const { return broken_; }
	uint64_t device_errors(DriverRingError kind) const
	{
		return device_errors_[static_cast<size_t>(kind)];
	}
	uint64_t device_errors_total() const;

private:
	void write_descriptor(uint64_t gpa, uint64_t addr, uint32_t len, uint16_t flags,
			      uint16_t next);
	void free_chain(uint16_t head);
	void count_device_error(DriverRingError kind);
	uint16_t load_used_idx() const;
	void store16(uint64_t gpa, uint16_t value);

	GuestMemory& memory_;
	RingLayout layout_;
	const bool event_idx_;
	const bool use_indirect_;
	const uint64_t indirect_area_gpa_;
	const uint16_t indirect_table_entries_;

	// Per descriptor: the free list and chain links (the driver's own copy of `next`).
	std::vector<uint16_t> next_;
	// Per head of an outstanding chain.
	std::vector<void*> token_;
	std::vector<uint16_t> chain_descriptors_;
	std::vector<uint64_t> chain_writable_bytes_;

	uint16_t free_head_ = 0;
	unsigned num_free_ = 0;
	unsigned chains_in_flight_ = 0;
	uint16_t avail_idx_ = 0;	   // next avail slot to fill
	uint16_t published_avail_idx_ = 0; // what the device can see
	uint16_t last_used_idx_ = 0;
	bool interrupts_enabled_ = true;
	bool broken_ = false;
	std::array<uint64_t, static_cast<size_t>(DriverRingError::kCount)> device_errors_{};
};

} // namespace vbsim

#endif
