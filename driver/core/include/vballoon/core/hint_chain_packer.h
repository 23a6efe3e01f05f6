// SPDX-License-Identifier: GPL-2.0
//
// Gathers the free page hinter's blocks into descriptor chains: the blocks taken between two
// kicks travel as one chain of device-writable segments, sorted by address, neighbours
// merged into one segment.
//
// Why chains: QEMU (7.2) clears a hinted block from the migration bitmap under the bitmap
// mutex, which its migration thread holds for up to 50 ms at a time while it sends pages,
// and it takes that mutex once per buffer. With one buffer per block the hinting thread had
// to win the mutex hundreds of times against the migration thread, and lost it for 50 ms
// each time it did not, until the migration's first pass over RAM had sent the very pages
// being hinted. Within one buffer it hints all segments in a row. Why merged: it takes the
// mutex once per segment too, and most of a guest's free blocks lie side by side.
//
// The packer only arranges: FreePageHinter puts its chains on free_page_vq and counts, per
// block, what the ring holds. A chain's token names a slot here that remembers how many
// blocks the chain carries, so a used chain gives every one of them back to that count.
#ifndef VBALLOON_CORE_HINT_CHAIN_PACKER_H
#define VBALLOON_CORE_HINT_CHAIN_PACKER_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/os_interface.h"

namespace vb
{

class HintChainPacker
{
public:
	// Blocks per chain: QEMU takes up to 1024 segments per buffer, and a chain never has
	// more segments than blocks. 512 blocks of 4 MiB are 2 GiB per buffer.
	static constexpr uint32_t kBlocksPerChainMax = 512;
	// Chains on the ring at once; with none free, blocks go one buffer each.
	static constexpr uint32_t kChainsInFlightMax = 16;

	// The blocks of the chain being gathered, as added and as the chain carries them: only
	// the CPU reads them (the OS copies the segments into descriptors), so they live in the
	// OS's workspace, apart from the device-visible core (balloon.h, Workspace).
	struct Blocks {
		Segment added[kBlocksPerChainMax];
		Segment merged[kBlocksPerChainMax];
	};

	explicit HintChainPacker(Blocks& blocks) : blocks_(blocks) {}

	HintChainPacker(const HintChainPacker&) = delete;
	HintChainPacker& operator=(const HintChainPacker&) = delete;

	uint32_t pending_count() const { return pending_; }
	bool full() const { return pending_ == kBlocksPerChainMax; }
	// A block for the chain being gathered; never when full().
	void add(Segment block);
	// The pending blocks in the order they were added: one buffer each when no chain slot
	// is free.
	const Segment* pending() const { return blocks_.added; }
	// Sorts the pending blocks by address and merges neighbours (as long as a length fits
	// a descriptor's 32 bits) into merged(); returns how many segments that is.
	uint32_t merge();
	const Segment* merged() const { return blocks_.merged; }
	// The pending blocks went to the ring (or were refused): a new chain starts.
	void clear_pending() { pending_ = 0; }

	// A free chain slot for `block_count` blocks, as the token of their chain; nullptr when
	// kChainsInFlightMax chains are on the ring already.
	void* claim_chain(uint32_t block_count);
	// The queue refused the chain of `token`: its slot is free again.
	void release_chain(void* token);
	// The device returned `token`: the blocks its chain carried (its slot is free again),
	// or 0 when the token is no chain on the ring.
	uint32_t take_used(void* token);
	// The device was reset: no chain is on the ring, nothing is pending.
	void reset();

private:
	uint32_t* chain_slot(void* token);

	Blocks& blocks_;
	uint32_t pending_ = 0;
	// Blocks of the chain in each slot, 0 when the slot is free; a slot's address is its
	// chain's token.
	uint32_t chain_blocks_[kChainsInFlightMax] = {};
};

} // namespace vb

#endif
