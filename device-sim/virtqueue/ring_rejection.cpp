// SPDX-License-Identifier: GPL-2.0
#include "virtqueue/ring_rejection.h"

namespace vbsim
{

std::string_view to_string(RingRejection reason)
{
	switch (reason) {
	case RingRejection::kAvailIdxJump:
		return "avail-idx-jump";
	case RingRejection::kHeadIndexOutOfRange:
		return "head-index-out-of-range";
	case RingRejection::kHeadAlreadyInFlight:
		return "head-already-in-flight";
	case RingRejection::kNextIndexOutOfRange:
		return "next-index-out-of-range";
	case RingRejection::kDescriptorLoop:
		return "descriptor-loop";
	case RingRejection::kChainTooLong:
		return "chain-too-long";
	case RingRejection::kChainBytesOverflow:
		return "chain-bytes-overflow";
	case RingRejection::kBufferOutsideRam:
		return "buffer-outside-ram";
	case RingRejection::kReadableAfterWritable:
		return "readable-after-writable";
	case RingRejection::kIndirectNotNegotiated:
		return "indirect-not-negotiated";
	case RingRejection::kIndirectWithNext:
		return "indirect-with-next";
	case RingRejection::kIndirectNotAtHead:
		return "indirect-not-at-head";
	case RingRejection::kIndirectBadLength:
		return "indirect-bad-length";
	case RingRejection::kIndirectTableOutsideRam:
		return "indirect-table-outside-ram";
	case RingRejection::kIndirectNested:
		return "indirect-nested";
	case RingRejection::kCount:
		break;
	}
	return "unknown";
}

} // namespace vbsim
