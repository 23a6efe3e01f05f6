// SPDX-License-Identifier: GPL-2.0
#include "balloon/pfn_array.h"

#include <cstring>
#include <stdexcept>

#include "memory/guest_memory.h"
#include "memory/little_endian.h"
#include "vballoon/spec/virtio_balloon.h"
#include "virtqueue/device_queue.h"

namespace vbsim
{

std::optional<BalloonRejection> read_pfn_array(const GuestMemory& memory,
					       const DescriptorChain& chain, uint32_t max_bytes,
					       std::vector<uint8_t>& scratch,
					       std::vector<uint32_t>& pfns)
{
	pfns.clear();
	// Inflate and deflate buffers are device-readable only (5.5.6.1).
	if (!chain.writable.empty())
		return BalloonRejection::kWritableBuffer;
	if (chain.readable_bytes == 0)
		return BalloonRejection::kEmptyRequest;
	// Size checks come before any copy, so a huge chain costs nothing.
	if (chain.readable_bytes > max_bytes)
		return BalloonRejection::kPfnArrayTooLarge;
	if (chain.readable_bytes % VB_PFN_ENTRY_BYTES != 0)
		return BalloonRejection::kPfnArrayNotMultipleOf4;

	// One copy out of guest RAM: the driver cannot change a PFN after it was checked.
	scratch.resize(chain.readable_bytes);
	uint64_t offset = 0;
	for (const ChainBuffer& segment : chain.readable) {
		if (!memory.read(segment.phys_addr, scratch.data() + offset, segment.len))
			throw std::logic_error("read_pfn_array: validated segment outside RAM");
		offset += segment.len;
	}
	pfns.resize(scratch.size() / VB_PFN_ENTRY_BYTES);
	for (size_t i = 0; i < pfns.size(); ++i) {
		uint32_t wire;
		std::memcpy(&wire, scratch.data() + i * VB_PFN_ENTRY_BYTES, sizeof(wire));
		pfns[i] = from_le(wire);
	}
	return std::nullopt;
}

bool PfnRequestReader::read(const DescriptorChain& chain)
{
	valid_pfns_.clear();
	if (const auto reason = read_pfn_array(memory_, chain, max_bytes_, bytes_, pfns_)) {
		counters_.reject(*reason);
		return false;
	}
	if (pfns_.size() > VB_PFNS_PER_DESCRIPTOR_MAX)
		counters_.requests_over_peer_cap.fetch_add(1);
	for (const uint32_t pfn : pfns_) {
		if (pfn_inside_ram(pfn, memory_.size()))
			valid_pfns_.push_back(pfn);
		else
			counters_.reject(BalloonRejection::kPfnOutsideRam);
	}
	return true;
}

} // namespace vbsim
