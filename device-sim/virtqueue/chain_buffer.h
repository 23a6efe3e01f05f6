// SPDX-License-Identifier: GPL-2.0
//
// One guest-physical buffer of a descriptor chain: what a descriptor points at, as the
// device pops it and as the simulated guest's driver ring adds it. Same layout as the core's
// vb::Segment, but its own name (one meaning per name); the simulated guest's OS adapter
// converts between the two, so the simulator does not depend on the core.
#ifndef VBSIM_VIRTQUEUE_CHAIN_BUFFER_H
#define VBSIM_VIRTQUEUE_CHAIN_BUFFER_H

#include <cstdint>

namespace vbsim
{

struct ChainBuffer {
	uint64_t phys_addr;
	uint32_t len;
};

} // namespace vbsim

#endif
