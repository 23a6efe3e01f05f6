// SPDX-License-Identifier: GPL-2.0
//
// A position in an array of page runs, and a span of pages from one: how the messenger's
// outbox, its packers (pfn_packer.h, chunk_packer.h), its messages and the host's reply
// (host_reply.h) name pages of one array without copying them. There is one walk of the
// runs, RunCursor::advance(); everything that moves through them moves with it.
#ifndef VBALLOON_CORE_RUN_CURSOR_H
#define VBALLOON_CORE_RUN_CURSOR_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/os_interface.h"
#include "vballoon/support/freestanding.h"

namespace vb
{

// A position in an array of runs: run index, and pages into that run. A cursor never rests
// at the end of a run: it moves on to the start of the next.
struct RunCursor {
	size_t run = 0;
	uint64_t offset = 0;

	// The pages from here to the end of the current run.
	uint64_t left_in_run(const PageRun* runs) const { return runs[run].count - offset; }
	// Moves `pages` pages on, across runs.
	void advance(const PageRun* runs, uint64_t pages)
	{
		while (pages) {
			const uint64_t step = min(pages, left_in_run(runs));
			offset += step;
			pages -= step;
			if (offset == runs[run].count) {
				run++;
				offset = 0;
			}
		}
	}
	// The cursor `pages` pages from the start of the array.
	static RunCursor at(const PageRun* runs, uint64_t pages)
	{
		RunCursor cursor;
		cursor.advance(runs, pages);
		return cursor;
	}
};

// `pages` consecutive pages of an array of runs, from `start` on.
struct RunSpan {
	RunCursor start;
	uint64_t pages = 0;
};

// Calls fn(PageRun) for each piece of `span` (pieces keep their run's flags).
template <class Fn> void for_each_part(const PageRun* runs, RunSpan span, Fn&& fn)
{
	RunCursor at = span.start;
	uint64_t left = span.pages;

	while (left) {
		const PageRun& run = runs[at.run];
		const uint64_t count = min(left, at.left_in_run(runs));
		fn(PageRun{run.first_pfn + at.offset, count, run.flags});
		left -= count;
		at.advance(runs, count);
	}
}

} // namespace vb

#endif
