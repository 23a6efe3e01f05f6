// SPDX-License-Identifier: GPL-2.0
#include "balloon/chunk_request.h"

#include "vballoon/spec/virtio_balloon.h"
#include "virtqueue/device_queue.h"

namespace vbsim
{

std::optional<BalloonRejection> read_chunk_request(const DescriptorChain& chain,
						   std::vector<PfnRun>& chunks)
{
	chunks.clear();
	if (chain.readable.empty())
		return BalloonRejection::kEmptyRequest;
	for (const ChainBuffer& segment : chain.readable) {
		if (segment.len == 0 || segment.phys_addr % VB_PFN_UNIT_BYTES != 0 ||
		    segment.len % VB_PFN_UNIT_BYTES != 0)
			return BalloonRejection::kChunkMisaligned;
		chunks.push_back({segment.phys_addr / VB_PFN_UNIT_BYTES, segment.len / VB_PFN_UNIT_BYTES});
	}
	return std::nullopt;
}

} // namespace vbsim
