// SPDX-License-Identifier: GPL-2.0
//
// The split ring's rules (2.7) as the spec states them, written here independently of
// DeviceQueue, for the ring harness of fuzz_device_queue to check every pop against: which
// chain a head names, or that the device must refuse it.
#ifndef VBALLOON_TESTS_FUZZ_REFERENCE_RING_H
#define VBALLOON_TESTS_FUZZ_REFERENCE_RING_H

#include <cstdint>
#include <optional>
#include <vector>

#include "fuzz_input.h"
#include "hostile_driver.h"
#include "memory/guest_memory.h"
#include "vballoon/spec/virtio_ring.h"
#include "virtqueue/device_queue.h"
#include "virtqueue/ring_layout.h"

namespace vbfuzz
{

using vbsim::ChainBuffer;
using vbsim::GuestMemory;
using vbsim::RingLayout;

// What the spec (and device-sim/README.md) says a chain must be, checked independently of
// DeviceQueue: returns the chain's segments, or nothing when the device must refuse it.
struct ReferenceChain {
	std::vector<ChainBuffer> readable;
	std::vector<ChainBuffer> writable;
};

class ReferenceRing
{
public:
	ReferenceRing(const GuestMemory& memory, const RingLayout& layout, bool indirect)
	    : memory_(memory), layout_(layout), indirect_(indirect)
	{
	}

	std::optional<ReferenceChain> walk(uint16_t head) const
	{
		ReferenceChain chain;
		std::vector<bool> seen(layout_.size(), false);
		bool writable_seen = false;
		uint64_t bytes = 0;
		uint16_t index = head;
		for (;;) {
			if (index >= layout_.size() || seen[index])
				return std::nullopt;
			seen[index] = true;
			const vb_vring_desc desc = read(layout_.descriptor(index));
			if (desc.flags & VB_VRING_DESC_F_INDIRECT) {
				if (!indirect_ || (desc.flags & VB_VRING_DESC_F_NEXT) ||
				    index != head)
					return std::nullopt;
				return walk_table(desc, chain);
			}
			if (!add(desc, chain, writable_seen, bytes))
				return std::nullopt;
			if (!(desc.flags & VB_VRING_DESC_F_NEXT))
				return chain;
			index = desc.next;
		}
	}

private:
	std::optional<ReferenceChain> walk_table(const vb_vring_desc& table,
						 ReferenceChain& chain) const
	{
		if (table.len == 0 || table.len % 16 != 0 || table.len / 16 > layout_.size() ||
		    !inside(table.addr, table.len, memory_.size()))
			return std::nullopt;
		const uint32_t entries = table.len / 16;
		std::vector<bool> seen(entries, false);
		bool writable_seen = false;
		uint64_t bytes = 0;
		uint32_t index = 0;
		for (;;) {
			if (index >= entries || seen[index])
				return std::nullopt;
			seen[index] = true;
			const vb_vring_desc desc = read(table.addr + 16ull * index);
			if (desc.flags & VB_VRING_DESC_F_INDIRECT)
				return std::nullopt;
			if (!add(desc, chain, writable_seen, bytes))
				return std::nullopt;
			if (!(desc.flags & VB_VRING_DESC_F_NEXT))
				return chain;
			index = desc.next;
		}
	}

	bool add(const vb_vring_desc& desc, ReferenceChain& chain, bool& writable_seen,
		 uint64_t& bytes) const
	{
		if (!inside(desc.addr, desc.len, memory_.size()))
			return false;
		const bool writable = desc.flags & VB_VRING_DESC_F_WRITE;
		if (!writable && writable_seen)
			return false;
		writable_seen |= writable;
		(writable ? chain.writable : chain.readable).push_back({desc.addr, desc.len});
		bytes += desc.len;
		return bytes <= UINT32_MAX;
	}

	vb_vring_desc read(uint64_t gpa) const
	{
		vb_vring_desc desc;
		FUZZ_CHECK(memory_.read(gpa, &desc, sizeof(desc)), "reference read outside RAM");
		return desc; // little-endian host
	}

	const GuestMemory& memory_;
	const RingLayout& layout_;
	const bool indirect_;
};

inline bool same_segments(const std::vector<ChainBuffer>& a, const std::vector<ChainBuffer>& b)
{
	if (a.size() != b.size())
		return false;
	for (size_t i = 0; i < a.size(); i++)
		if (a[i].phys_addr != b[i].phys_addr || a[i].len != b[i].len)
			return false;
	return true;
}

} // namespace vbfuzz

#endif
