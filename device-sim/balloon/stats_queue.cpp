// SPDX-License-Identifier: GPL-2.0
#include "balloon/stats_queue.h"

#include <algorithm>
#include <stdexcept>

#include "memory/guest_memory.h"
#include "virtqueue/device_queue.h"
#include "vballoon/support/mutant.h"

namespace vbsim
{

void StatsQueue::receive(DeviceQueue& queue, const DescriptorChain& chain)
{
	// Stats buffers are device-readable only.
	if (!chain.writable.empty()) {
		counters_.reject(BalloonRejection::kWritableBuffer);
		queue.push_used(chain.head, 0);
		return;
	}
	if (held_head_) {
		counters_.stats_extra_buffers.fetch_add(1, std::memory_order_relaxed);
		queue.push_used(*held_head_, 0);
	}
	held_head_ = chain.head;

	// "the device SHOULD ignore all values in the first buffer in statsq supplied by the
	// driver after device initialization" (legacy interface).
	if (disregard_next_ && !VB_MUTANT(DEV_LEG06_FIRST_LEGACY_STATS_BUFFER_READ)) {
		disregard_next_ = false;
		counters_.stats_buffers_disregarded.fetch_add(1, std::memory_order_relaxed);
		answer_pending_request(queue);
		return;
	}
	disregard_next_ = false;

	// Copy no more than the bound out of guest RAM: a huge buffer costs nothing extra.
	const uint64_t bound = uint64_t{kStatsEntriesMax} * VB_STAT_ENTRY_BYTES;
	const uint64_t wanted = std::min<uint64_t>(chain.readable_bytes, bound);
	scratch_.resize(wanted);
	uint64_t copied = 0;
	for (const ChainBuffer& segment : chain.readable) {
		if (copied == wanted)
			break;
		const uint64_t take = std::min<uint64_t>(segment.len, wanted - copied);
		if (!memory_.read(segment.phys_addr, scratch_.data() + copied, take))
			throw std::logic_error("StatsQueue: validated segment outside RAM");
		copied += take;
	}
	if (chain.readable_bytes > bound)
		counters_.reject(BalloonRejection::kStatsTooManyEntries);

	GuestStats parsed;
	const StatsParseOutcome outcome = parse_stats_entries(scratch_.data(), scratch_.size(),
							      parsed, entry_order_, known_tags_);
	if (outcome.partial_entry)
		counters_.reject(BalloonRejection::kStatsPartialEntry);
	counters_.stats_unknown_tags.fetch_add(outcome.unknown_tags, std::memory_order_relaxed);
	{
		std::lock_guard lock(mutex_);
		parsed.update_count = last_.update_count + 1;
		last_ = parsed;
	}
	counters_.stats_updates.fetch_add(1, std::memory_order_relaxed);
	updated_.notify_all();
	answer_pending_request(queue);
}

void StatsQueue::answer_pending_request(DeviceQueue& queue)
{
	// The host asked before the driver had a buffer here: answer the request now.
	if (request_pending_) {
		request_pending_ = false;
		request_fresh(queue);
	}
}

bool StatsQueue::request_fresh(DeviceQueue& queue)
{
	if (!held_head_) {
		counters_.stats_requests_without_buffer.fetch_add(1, std::memory_order_relaxed);
		request_pending_ = true;
		return false;
	}
	queue.push_used(*held_head_, 0);
	held_head_.reset();
	counters_.stats_requests.fetch_add(1, std::memory_order_relaxed);
	return true;
}

GuestStats StatsQueue::last() const
{
	std::lock_guard lock(mutex_);
	return last_;
}

bool StatsQueue::wait_for_update(uint64_t update_count, std::chrono::milliseconds timeout) const
{
	std::unique_lock lock(mutex_);
	return updated_.wait_for(lock, timeout, [&] { return last_.update_count > update_count; });
}

} // namespace vbsim
