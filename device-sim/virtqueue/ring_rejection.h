// SPDX-License-Identifier: GPL-2.0
//
// Why the device refused a descriptor chain. Each reason has its own counter, so a test
// (or a fuzzer) can tell exactly which check fired.
#ifndef VBSIM_VIRTQUEUE_RING_REJECTION_H
#define VBSIM_VIRTQUEUE_RING_REJECTION_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vbsim
{

enum class RingRejection : uint8_t {
	// Unrecoverable: the queue stops and the device asks for a reset (NEEDS_RESET).
	kAvailIdxJump, // avail idx moved ahead by more than the queue size
	// The chain is dropped without a used entry: there is no valid head to return.
	kHeadIndexOutOfRange, // avail ring entry >= queue size
	kHeadAlreadyInFlight, // the driver offered a chain the device still holds
	// The chain is returned used with length 0.
	kNextIndexOutOfRange,	  // a NEXT link (direct or inside an indirect table) out of range
	kDescriptorLoop,	  // a NEXT link revisits a descriptor of the same chain
	kChainTooLong,		  // more descriptors than the queue size (indirect tables)
	kChainBytesOverflow,	  // total length above 2^32 - 1 bytes
	kBufferOutsideRam,	  // addr/len not fully inside guest RAM (incl. addr + len overflow)
	kReadableAfterWritable,	  // a device-readable descriptor after a device-writable one
	kIndirectNotNegotiated,	  // INDIRECT flag without VIRTIO_F_RING_INDIRECT_DESC
	kIndirectWithNext,	  // INDIRECT and NEXT on the same descriptor
	kIndirectNotAtHead,	  // INDIRECT on a descriptor other than the chain's head
	kIndirectBadLength,	  // table length zero or not a multiple of 16
	kIndirectTableOutsideRam, // table not fully inside guest RAM
	kIndirectNested,	  // INDIRECT inside an indirect table
	kCount
};

inline constexpr size_t kRingRejectionCount = static_cast<size_t>(RingRejection::kCount);

std::string_view to_string(RingRejection reason);

} // namespace vbsim

#endif
