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
#include "vballoon/core/run_cursor.h"

namespace vb {

// Packs runs[0, run_count) from `from` on; position() is where the next message starts.
class ChunkPacker {
public:
	static constexpr uint64_t kMaxChunkBytes = 1ull << 30;

	ChunkPacker(const PageRun* runs, size_t run_count, unsigned page_shift,
		    RunCursor from = {});

	// Writes up to `capacity` segments into `out` and returns how many; 0 once done.
	uint32_t pack(Segment* out, uint32_t capacity);
	bool done() const { return at_.run == run_count_; }
	RunCursor position() const { return at_; }

private:
	const PageRun* runs_;
	size_t run_count_;
	RunCursor at_;
	unsigned page_shift_;
	uint64_t max_pages_per_chunk_;
};

} // namespace vb

#endif
