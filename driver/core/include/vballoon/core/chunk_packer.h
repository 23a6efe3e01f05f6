// SPDX-License-Identifier: GPL-2.0
//
// Turns runs of guest pages into chunk segments for VB_F_X_CHUNKED: one guest-physical
// {address, length} per contiguous range, long runs cut at kMaxChunkBytes so a length
// always fits the descriptor's 32 bits.
#ifndef VBALLOON_CORE_CHUNK_PACKER_H
#define VBALLOON_CORE_CHUNK_PACKER_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/os_interface.h"

namespace vb {

class ChunkPacker {
public:
	static constexpr uint64_t kMaxChunkBytes = 1ull << 30;

	ChunkPacker(const PageRun* runs, size_t run_count, unsigned page_shift);

	// Writes up to `capacity` segments into `out` and returns how many; 0 once done.
	uint32_t pack(Segment* out, uint32_t capacity);
	bool done() const { return run_index_ == run_count_; }
	// More runs were appended to the array (those packed so far stay as they were).
	void extend(size_t run_count) { run_count_ = run_count; }

private:
	const PageRun* runs_;
	size_t run_count_;
	size_t run_index_ = 0;
	uint64_t offset_in_run_ = 0;
	unsigned page_shift_;
	uint64_t max_pages_per_chunk_;
};

} // namespace vb

#endif
