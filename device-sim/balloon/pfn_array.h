// SPDX-License-Identifier: GPL-2.0
//
// The payload of an inflate or deflate request: an array of le32 page frame numbers
// (guest-physical address >> 12, whatever the guest page size), carried by the
// device-readable part of one chain. A PFN may straddle two descriptors, so the array is
// gathered across all readable segments before it is split into entries.
#ifndef VBSIM_BALLOON_PFN_ARRAY_H
#define VBSIM_BALLOON_PFN_ARRAY_H

#include <cstdint>
#include <optional>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

class GuestMemory;
struct DescriptorChain;

// Fills `pfns` with the chain's PFN array, or says why the whole request is refused.
// `scratch` holds the raw bytes (reused between calls to avoid allocating).
std::optional<BalloonRejection> read_pfn_array(const GuestMemory& memory,
					       const DescriptorChain& chain, uint32_t max_bytes,
					       std::vector<uint8_t>& scratch,
					       std::vector<uint32_t>& pfns);

// An inflate or deflate request read as a PFN array: read_pfn_array() and then the
// per-PFN check against guest RAM, with each refusal counted. One per queue, so each keeps
// its own scratch buffers.
class PfnRequestReader
{
public:
	PfnRequestReader(const GuestMemory& memory, uint32_t max_bytes,
			 BalloonDeviceCounters& counters)
	    : memory_(memory), max_bytes_(max_bytes), counters_(counters)
	{
	}

	// False when the whole request is refused (pfns() and valid_pfns() are then empty).
	bool read(const DescriptorChain& chain);
	// Every entry of the last request, in order, beyond RAM or not.
	const std::vector<uint32_t>& pfns() const { return pfns_; }
	// The entries of the last request that lie inside guest RAM, in order.
	std::vector<uint64_t>& valid_pfns() { return valid_pfns_; }

private:
	const GuestMemory& memory_;
	uint32_t max_bytes_;
	BalloonDeviceCounters& counters_;
	std::vector<uint8_t> bytes_;
	std::vector<uint32_t> pfns_;
	std::vector<uint64_t> valid_pfns_;
};

// Whether the whole 4 KiB page `pfn` lies inside guest RAM of `ram_bytes`.
inline bool pfn_inside_ram(uint64_t pfn, uint64_t ram_bytes)
{
	return pfn < ram_bytes / VB_PFN_UNIT_BYTES;
}

} // namespace vbsim

#endif
