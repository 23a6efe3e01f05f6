// SPDX-License-Identifier: GPL-2.0
#include "balloon/deflate_queue.h"

#include "balloon/chunk_request.h"
#include "balloon/host_page_ownership.h"
#include "balloon/huge_page_tracker.h"
#include "balloon/page_discarder.h"
#include "virtqueue/device_queue.h"
#include "vballoon/support/mutant.h"

namespace vbsim
{

namespace
{

// Every page a deflate range names comes back, however the pages went in (BAL-DEV-XCH-06).
uint64_t released_wire_pages(const PfnRun& chunk)
{
	// A range taken as a token for the chunk an inflate started there: its first page only.
	return VB_MUTANT(XCH_DEV_DEFLATE_FIRST_PAGE_ONLY) ? 1 : chunk.wire_pages;
}

} // namespace

void DeflateQueue::reset()
{
	held_.clear();
	set_held_count(0);
	negotiated_ = 0;
}

void DeflateQueue::receive(DeviceQueue& queue, const DescriptorChain& chain)
{
	std::vector<uint64_t>& pfns = reader_.valid_pfns();
	if (negotiated(VB_F_X_CHUNKED)) {
		if (const auto reason = read_chunk_request(chain, chunks_)) {
			counters_.reject(*reason);
			queue.push_used(chain.head, 0);
			return;
		}
		const bool ack_now = !hold_acks_.load() && held_.empty();
		if (ack_now && !huge_pages_) {
			// The common case: whole chunks go back a bitmap word at a time.
			counters_.deflate_requests.fetch_add(1);
			uint64_t requested = 0, given = 0;
			for (const PfnRun& chunk : chunks_) {
				requested += chunk.wire_pages;
				given += ownership_.give_back_run(chunk.first_pfn,
								  released_wire_pages(chunk));
			}
			counters_.wire_pages_deflated.fetch_add(given);
			if (requested != given)
				counters_.reject(BalloonRejection::kPfnNotHostOwned, requested - given);
			queue.push_used(chain.head, 0);
			return;
		}
		pfns.clear();
		for (const PfnRun& chunk : chunks_)
			for (uint64_t pfn = chunk.first_pfn;
			     pfn < chunk.first_pfn + released_wire_pages(chunk); pfn++)
				pfns.push_back(pfn);
	} else if (!reader_.read(chain)) {
		queue.push_used(chain.head, 0);
		return;
	}
	counters_.deflate_requests.fetch_add(1);
	// Held acks go out in arrival order, so a request behind a held one waits too, even if
	// the gate was just opened and the release task has not run yet.
	if (hold_acks_.load() || !held_.empty()) {
		held_.push_back({chain.head, pfns});
		set_held_count(held_.size());
		return;
	}
	ack(queue, chain.head, pfns);
}

void DeflateQueue::ack(DeviceQueue& queue, uint16_t head, const std::vector<uint64_t>& pfns)
{
	// Ownership goes back before the ack is published (push_used's release store), so a
	// guest that sees the ack never sees the page still owned by the host.
	for (const uint64_t pfn : pfns) {
		if (ownership_.give_back(pfn)) {
			counters_.wire_pages_deflated.fetch_add(1);
			if (huge_pages_)
				huge_pages_->released(pfn);
		} else {
			counters_.reject(BalloonRejection::kPfnNotHostOwned);
		}
	}
	// The pages' contents are left alone: without MUST_TELL_HOST the guest may have been
	// using them since before it sent this request (BAL-DEV-LEG-02, BAL-DRV-OP-11).
	if (VB_MUTANT(DEV_LEG02_DEFLATED_PAGES_SCRUBBED)) {
		std::vector<uint64_t> scrubbed = pfns;
		(void)discarder_.discard(scrubbed);
	}
	queue.push_used(head, 0);
}

bool DeflateQueue::ack_held(DeviceQueue& queue)
{
	if (held_.empty())
		return false;
	for (const HeldDeflate& held : held_)
		ack(queue, held.head, held.pfns);
	held_.clear();
	set_held_count(0);
	return true;
}

void DeflateQueue::set_held_count(size_t count)
{
	// Changed under the waiters' lock, so none can miss it between its check and its wait.
	{
		std::lock_guard lock(held_mutex_);
		held_count_.store(count);
	}
	held_changed_.notify_all();
}

bool DeflateQueue::wait_for_held_acks(size_t count, std::chrono::milliseconds timeout) const
{
	std::unique_lock lock(held_mutex_);
	return held_changed_.wait_for(lock, timeout, [&] { return held_count_.load() >= count; });
}

} // namespace vbsim
