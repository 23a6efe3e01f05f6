// SPDX-License-Identifier: GPL-2.0
#include "balloon/chunk_request.h"

#include <algorithm>

#include "vballoon/spec/virtio_balloon.h"
#include "vballoon/support/mutant.h"
#include "virtqueue/device_queue.h"

namespace vbsim
{

namespace
{

// Two ranges of one request that share a page make the request ambiguous (was the page
// meant once or twice?), so the whole request is refused (BAL-DEV-XCH-03).
bool ranges_overlap(const std::vector<PfnRun>& chunks)
{
	std::vector<PfnRun> sorted = chunks;
	std::sort(sorted.begin(), sorted.end(),
		  [](const PfnRun& a, const PfnRun& b) { return a.first_pfn < b.first_pfn; });
	for (size_t i = 1; i < sorted.size(); i++)
		if (sorted[i].first_pfn < sorted[i - 1].first_pfn + sorted[i - 1].wire_pages)
			return true;
	return false;
}

} // namespace

std::optional<BalloonRejection> read_chunk_request(const DescriptorChain& chain,
						   std::vector<PfnRun>& chunks)
{
	chunks.clear();
	if (chain.readable.empty())
		return BalloonRejection::kEmptyRequest;
	// A bitmap, where one travels, was split off by the caller: anything writable left is
	// not part of the format (BAL-DEV-XCH-04).
	if (!chain.writable.empty() && !VB_MUTANT(XCH_DEV_WRITABLE_DESCRIPTOR_ACCEPTED))
		return BalloonRejection::kWritableBuffer;
	for (const ChainBuffer& segment : chain.readable) {
		if (segment.len == 0 || segment.phys_addr % VB_PFN_UNIT_BYTES != 0 ||
		    segment.len % VB_PFN_UNIT_BYTES != 0) {
			if (VB_MUTANT(XCH_DEV_BAD_RANGE_SKIPPED))
				continue;
			chunks.clear();
			return BalloonRejection::kChunkMisaligned;
		}
		chunks.push_back({segment.phys_addr / VB_PFN_UNIT_BYTES, segment.len / VB_PFN_UNIT_BYTES});
	}
	if (VB_MUTANT(XCH_DEV_RANGES_CAPPED_AT_32) && chunks.size() > 32) {
		chunks.clear();
		return BalloonRejection::kChunkMisaligned;
	}
	if (ranges_overlap(chunks) && !VB_MUTANT(XCH_DEV_OVERLAP_ACCEPTED)) {
		chunks.clear();
		return BalloonRejection::kChunkOverlap;
	}
	return std::nullopt;
}

} // namespace vbsim
