// SPDX-License-Identifier: GPL-2.0
//
// The simulated guest's list of ballooned pages: what balloon compaction's page list is in
// Linux. Pages are kept as runs in insertion order (so chunks stay whole and in order),
// taken most recently inserted first, and carry the device-initialised flag.
#ifndef VBSIM_GUEST_BALLOON_PAGE_LIST_H
#define VBSIM_GUEST_BALLOON_PAGE_LIST_H

#include <cstddef>
#include <cstdint>
#include <vector>

#include "vballoon/core/os_interface.h"

namespace vbsim {

class BalloonPageList {
public:
	void insert(vb::PageRun run);
	// Up to max_pages pages from the end, as runs of like-flagged contiguous pages, into
	// runs[0..max_runs). Returns the number of runs written.
	size_t take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages);
	// Sets kPageRunDeviceInitialised on pages of the list; false when a page of `run` is
	// not on it.
	bool mark_initialised(vb::PageRun run);
	// Replaces one page by another in place; false when old_pfn is not on the list.
	bool replace(uint64_t old_pfn, uint64_t new_pfn);

	bool contains(uint64_t pfn) const;
	uint64_t pages() const { return pages_; }
	size_t runs() const { return runs_.size(); }
	const std::vector<vb::PageRun>& all_runs() const { return runs_; }

private:
	// Index of the run holding pfn, searching from the newest; runs_.size() when absent.
	size_t find(uint64_t pfn) const;
	void split_around(size_t index, uint64_t pfn, uint64_t count);

	std::vector<vb::PageRun> runs_;
	uint64_t pages_ = 0;
};

} // namespace vbsim

#endif
