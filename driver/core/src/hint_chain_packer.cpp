// SPDX-License-Identifier: GPL-2.0
#include "vballoon/core/hint_chain_packer.h"

#include "vballoon/core/rules/hint_chain_rules.h"
#include "vballoon/support/invariant.h"

namespace vb
{

namespace
{

// A descriptor's length is 32 bits.
constexpr uint64_t kSegmentBytesMax = 0xffffffff;

// Heapsort by address: in place, no recursion, n log n whatever order the allocator handed
// the blocks out in (the core has no library sort).
void sift_down(Segment* segments, uint32_t root, uint32_t count)
{
	for (;;) {
		uint32_t child = 2 * root + 1;
		if (child >= count)
			return;
		if (child + 1 < count && segments[child].phys_addr < segments[child + 1].phys_addr)
			child++;
		if (!(segments[root].phys_addr < segments[child].phys_addr))
			return;
		Segment lower = segments[root];
		segments[root] = segments[child];
		segments[child] = lower;
		root = child;
	}
}

void sort_by_address(Segment* segments, uint32_t count)
{
	for (uint32_t i = count / 2; i-- > 0;)
		sift_down(segments, i, count);
	for (uint32_t end = count; end-- > 1;) {
		Segment largest = segments[0];
		segments[0] = segments[end];
		segments[end] = largest;
		sift_down(segments, 0, end);
	}
}

} // namespace

void HintChainPacker::add(Segment block)
{
	VB_INVARIANT(!full());
	blocks_.added[pending_++] = block;
}

uint32_t HintChainPacker::merge()
{
	Segment* out = blocks_.merged;
	uint32_t last = 0;

	if (!pending_)
		return 0;
	for (uint32_t i = 0; i < pending_; i++)
		out[i] = blocks_.added[i];
	if (rules::chain_sorted_by_address())
		sort_by_address(out, pending_);
	for (uint32_t i = 1; i < pending_; i++) {
		const uint64_t end = out[last].phys_addr + out[last].len;
		const bool neighbours =
			end == out[i].phys_addr ||
			(!rules::chain_merges_only_neighbours() && end < out[i].phys_addr);
		const uint64_t merged_end = out[i].phys_addr + out[i].len;
		if (neighbours && merged_end - out[last].phys_addr <= kSegmentBytesMax)
			out[last].len = static_cast<uint32_t>(merged_end - out[last].phys_addr);
		else
			out[++last] = out[i];
	}
	return last + 1;
}

void* HintChainPacker::claim_chain(uint32_t block_count)
{
	VB_INVARIANT(block_count > 0);
	for (uint32_t& slot : chain_blocks_) {
		if (!slot || !rules::chain_slot_busy_until_used()) {
			slot = block_count;
			return &slot;
		}
	}
	return nullptr;
}

uint32_t* HintChainPacker::chain_slot(void* token)
{
	for (uint32_t& slot : chain_blocks_)
		if (token == &slot)
			return &slot;
	return nullptr;
}

void HintChainPacker::release_chain(void* token)
{
	if (uint32_t* slot = chain_slot(token))
		*slot = 0;
}

uint32_t HintChainPacker::take_used(void* token)
{
	uint32_t* slot = chain_slot(token);
	if (!slot || !*slot)
		return 0;
	const uint32_t block_count = rules::used_chain_returns_every_block() ? *slot : 1;
	*slot = 0;
	return block_count;
}

void HintChainPacker::reset()
{
	pending_ = 0;
	for (uint32_t& slot : chain_blocks_)
		slot = 0;
}

} // namespace vb
