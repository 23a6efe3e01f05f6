// SPDX-License-Identifier: GPL-2.0
#include "migration/free_page_tracker.h"

#include "memory/guest_memory.h"
#include "transport/thread_cpu_time.h"
#include "vballoon/support/mutant.h"

namespace vbsim::migration
{

void FreePageTracker::host_starting_round()
{
	std::lock_guard lock(mutex_);
	previous_id_ = cmd_id_;
	awaiting_ = true;
	host_active_ = true;
	accepting_ = false;
}

void FreePageTracker::host_started_round(uint32_t cmd_id)
{
	std::lock_guard lock(mutex_);
	awaiting_ = false;
	if (cmd_id_ != cmd_id) {
		cmd_id_ = cmd_id;
		stopped_ = false;
		// Hints count once the guest has echoed the id (QEMU: REQUESTED, then START).
		accepting_ = last_echo_ == cmd_id;
	}
}

void FreePageTracker::host_stopped_round()
{
	std::lock_guard lock(mutex_);
	awaiting_ = false;
	host_active_ = false;
	stopped_ = true;
	// The bitmap sync that follows folds in the guest's writes since the id was issued:
	// a hint arriving after it may name a page written since, which must still be sent.
	if (!VB_MUTANT(DEV_FPH05_HINTS_USED_AFTER_STOP))
		accepting_ = false;
}

void FreePageTracker::hint_round_started(uint32_t cmd_id)
{
	std::lock_guard lock(mutex_);
	last_echo_ = cmd_id;
	if (awaiting_ && cmd_id != previous_id_) {
		// The echo of the round being started, before the host learnt its id.
		cmd_id_ = cmd_id;
		stopped_ = false;
		accepting_ = true;
	} else if (cmd_id == cmd_id_ && host_active_ && !awaiting_) {
		stopped_ = false;
		accepting_ = true;
	}
}

void FreePageTracker::hint_round_stopped(uint32_t cmd_id)
{
	std::lock_guard lock(mutex_);
	if (cmd_id != cmd_id_)
		return;
	stopped_ = true;
	if (!VB_MUTANT(DEV_FPH05_HINTS_USED_AFTER_STOP))
		accepting_ = false;
}

void FreePageTracker::pages_hinted(uint32_t cmd_id, uint64_t gpa, uint64_t bytes)
{
	const uint64_t start = thread_cpu_ns();
	constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
	const uint64_t pages = bytes / kPage;
	hinted_.fetch_add(pages, std::memory_order_relaxed);
	{
		std::lock_guard lock(mutex_);
		// What the stop kept out, which a device that missed the stop could have applied
		// (compare's evidence for DEV_FPH05, spec/compare_mutants.tsv).
		if (cmd_id == cmd_id_ && stopped_)
			after_stop_.fetch_add(pages, std::memory_order_relaxed);
		if (!accepting_ || cmd_id != cmd_id_ || gpa % kPage != 0 || gpa > ram_bytes_ ||
		    bytes > ram_bytes_ - gpa) {
			ignored_.fetch_add(pages, std::memory_order_relaxed);
		} else if (deferred_) {
			pending_.push_back({gpa / kPage, pages});
		} else {
			const uint64_t cleared = to_send_.clear_range(gpa / kPage, pages);
			cleared_.fetch_add(cleared, std::memory_order_relaxed);
			if (cleared != 0 && clock_)
				landings_.push_back(clock_());
		}
	}
	arrival_ns_.fetch_add(thread_cpu_ns() - start, std::memory_order_relaxed);
}

uint64_t FreePageTracker::apply_pending()
{
	const uint64_t start = thread_cpu_ns();
	std::vector<PfnRun> ranges;
	{
		std::lock_guard lock(mutex_);
		ranges.swap(pending_);
	}
	uint64_t cleared = 0;
	for (const PfnRun& range : ranges)
		cleared += to_send_.clear_range(range.first_pfn, range.wire_pages);
	cleared_.fetch_add(cleared, std::memory_order_relaxed);
	apply_ns_.fetch_add(thread_cpu_ns() - start, std::memory_order_relaxed);
	return cleared;
}

std::vector<double> FreePageTracker::immediate_landings() const
{
	std::lock_guard lock(const_cast<std::mutex&>(mutex_));
	return landings_;
}

void FreePageTracker::pages_reported(uint64_t, uint64_t bytes)
{
	// The discard itself went through GuestMemory (and the dirty log); the sender learns
	// that the pages are absent from residency, so only the count is kept here.
	reported_.fetch_add(bytes / GuestMemory::kWirePageBytes, std::memory_order_relaxed);
}

} // namespace vbsim::migration
