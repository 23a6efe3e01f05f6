// SPDX-License-Identifier: GPL-2.0
//
// Memory statistics: the device returns our one buffer to ask, we refill and hand it back.
#ifndef VBALLOON_CORE_PAGE_BALLOON_STATS_H
#define VBALLOON_CORE_PAGE_BALLOON_STATS_H

#include "vballoon/core/page_balloon.h"

namespace vb {

template <BalloonOs Os> void PageBalloon<Os>::handle_stats_request()
{
	uint32_t len;
	void* token = os_.queue_get_used(QueueKind::kStats, &len);

	if (!token)
		return;
	if (token != stats_) {
		counters_.foreign_used_buffers.add(1);
		return;
	}
	if (VB_MUTANT(STATS04_NO_REFILL))
		return;

	MemoryStats stats{};
	os_.memory_stats(&stats);
	add_pressure_stats(stats);
	// The tag subset was fixed when the buffer was primed; it never changes.
	uint32_t tags = VB_MUTANT(STATS09_TAG_SET_CHANGES) ? stats_tag_mask_ & (stats_tag_mask_ - 1) : stats_tag_mask_;
	stats_count_ = fill_stats_entries(stats_, stats, tags);
	uint32_t bytes = stats_count_ * VB_STAT_ENTRY_BYTES - (VB_MUTANT(STATS06_LENGTH_NOT_WHOLE_ENTRIES) ? 4 : 0);
	Segment out = {os_.phys_addr(stats_), bytes};
	// Only one stats buffer ever exists, so the queue always has room for it.
	if (!os_.queue_add(QueueKind::kStats, &out, 1, nullptr, 0, stats_)) {
		counters_.queue_failures.add(1);
		return;
	}
	os_.queue_kick(QueueKind::kStats);
	counters_.stats_reports.add(1);
}

} // namespace vb

#endif
