// SPDX-License-Identifier: GPL-2.0
#include "balloon_page_list.h"

#include <algorithm>

namespace vbsim {

void BalloonPageList::insert(vb::PageRun run)
{
	if (!run.count)
		return;
	pages_ += run.count;
	if (!runs_.empty()) {
		vb::PageRun& last = runs_.back();
		if (last.flags == run.flags && last.first_pfn + last.count == run.first_pfn) {
			last.count += run.count;
			return;
		}
	}
	runs_.push_back(run);
}

size_t BalloonPageList::take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
{
	size_t written = 0;

	while (max_pages && !runs_.empty()) {
		vb::PageRun& last = runs_.back();
		uint64_t count = std::min(last.count, max_pages);
		vb::PageRun piece = {last.first_pfn + last.count - count, count, last.flags};
		vb::PageRun* previous = written ? &runs[written - 1] : nullptr;

		// Pieces come off the end, so a piece continues the previous output run downwards.
		if (previous && previous->flags == piece.flags &&
		    piece.first_pfn + piece.count == previous->first_pfn) {
			previous->first_pfn = piece.first_pfn;
			previous->count += piece.count;
		} else if (written < max_runs) {
			runs[written++] = piece;
		} else {
			break;
		}
		last.count -= count;
		pages_ -= count;
		max_pages -= count;
		if (!last.count)
			runs_.pop_back();
	}
	return written;
}

size_t BalloonPageList::find(uint64_t pfn) const
{
	for (size_t i = runs_.size(); i-- > 0;) {
		const vb::PageRun& run = runs_[i];
		if (pfn >= run.first_pfn && pfn < run.first_pfn + run.count)
			return i;
	}
	return runs_.size();
}

// Cuts run `index` so that [pfn, pfn + count) becomes a run of its own (at the returned
// position `index` or `index + 1`), keeping insertion order.
void BalloonPageList::split_around(size_t index, uint64_t pfn, uint64_t count)
{
	vb::PageRun run = runs_[index];
	std::vector<vb::PageRun> pieces;
	if (pfn > run.first_pfn)
		pieces.push_back({run.first_pfn, pfn - run.first_pfn, run.flags});
	pieces.push_back({pfn, count, run.flags});
	if (pfn + count < run.first_pfn + run.count)
		pieces.push_back({pfn + count, run.first_pfn + run.count - pfn - count, run.flags});
	runs_.erase(runs_.begin() + static_cast<ptrdiff_t>(index));
	runs_.insert(runs_.begin() + static_cast<ptrdiff_t>(index), pieces.begin(), pieces.end());
}

bool BalloonPageList::mark_initialised(vb::PageRun run)
{
	uint64_t pfn = run.first_pfn;
	uint64_t end = run.first_pfn + run.count;

	while (pfn < end) {
		size_t index = find(pfn);
		if (index == runs_.size())
			return false;
		vb::PageRun& holder = runs_[index];
		uint64_t count = std::min(end, holder.first_pfn + holder.count) - pfn;
		if (!(holder.flags & vb::kPageRunDeviceInitialised)) {
			split_around(index, pfn, count);
			size_t piece = runs_[index].first_pfn == pfn ? index : index + 1;
			runs_[piece].flags |= vb::kPageRunDeviceInitialised;
		}
		pfn += count;
	}
	return true;
}

bool BalloonPageList::replace(uint64_t old_pfn, uint64_t new_pfn)
{
	size_t index = find(old_pfn);
	if (index == runs_.size())
		return false;
	split_around(index, old_pfn, 1);
	size_t piece = runs_[index].first_pfn == old_pfn ? index : index + 1;
	// The new page has not been through the device yet: it is not initialised.
	runs_[piece] = {new_pfn, 1, 0};
	return true;
}

bool BalloonPageList::contains(uint64_t pfn) const
{
	return find(pfn) != runs_.size();
}

} // namespace vbsim
