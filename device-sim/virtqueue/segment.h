// SPDX-License-Identifier: GPL-2.0
//
// One guest-physical buffer of a descriptor chain. Same layout as the core's vb::Segment;
// the simulated guest's OS adapter converts between the two, so the simulator does not
// depend on the core.
#ifndef VBSIM_VIRTQUEUE_SEGMENT_H
#define VBSIM_VIRTQUEUE_SEGMENT_H

#include <cstdint>

namespace vbsim
{

struct Segment {
	uint64_t phys_addr;
	uint32_t len;
};

} // namespace vbsim

#endif
