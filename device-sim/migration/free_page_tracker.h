// SPDX-License-Identifier: GPL-2.0
//
// The model's side of free page hinting, as QEMU's qemu_guest_free_page_hint: a hint for
// the round the host is running clears the hinted pages from the bitmap of pages still to
// send; pages the sender already took are sent anyway (the hint came too late). Hints of
// any other round, or after the host stopped the round, are ignored: the guest may have
// reused those pages since, and their new contents are in a dirty log that has already
// been harvested into the bitmap, where clearing them would lose them.
#ifndef VBSIM_MIGRATION_FREE_PAGE_TRACKER_H
#define VBSIM_MIGRATION_FREE_PAGE_TRACKER_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "balloon/free_page_events.h"
#include "memory/pfn_run.h"
#include "migration/page_bitmap.h"

namespace vbsim::migration
{

class FreePageTracker : public FreePageEvents
{
public:
	FreePageTracker(PageBitmap& to_send, uint64_t ram_bytes) : to_send_(to_send), ram_bytes_(ram_bytes) {}

	// QEMU applies a hint under the bitmap mutex its migration thread holds for each
	// iteration: with `deferred`, an accepted hint waits in a queue until the migration
	// thread calls apply_pending() between iterations. Otherwise a hint clears its pages
	// as it arrives; `clock` (model ms) then dates each landing.
	void set_deferred(bool deferred) { deferred_ = deferred; }
	void set_clock(std::function<double()> clock) { clock_ = std::move(clock); }
	// Migration thread, between iterations: the queued hints clear their pages. Returns
	// how many pages they cleared.
	uint64_t apply_pending();
	// Model times of the landings that cleared pages (immediate mode; the caller dates
	// apply_pending itself).
	std::vector<double> immediate_landings() const;

	// Host side, on the migration thread: around the device's start of a round (the
	// device picks the id, and the guest may echo it before the call returns).
	void host_starting_round();
	void host_started_round(uint32_t cmd_id);
	void host_stopped_round();

	// FreePageEvents, on the device thread.
	void hint_round_started(uint32_t cmd_id) override;
	void pages_hinted(uint32_t cmd_id, uint64_t gpa, uint64_t bytes) override;
	void hint_round_stopped(uint32_t cmd_id) override;
	void pages_reported(uint64_t gpa, uint64_t bytes) override;

	uint64_t pages_hinted_total() const { return hinted_.load(std::memory_order_relaxed); }
	uint64_t pages_cleared_total() const { return cleared_.load(std::memory_order_relaxed); }
	uint64_t hints_ignored() const { return ignored_.load(std::memory_order_relaxed); }
	// Pages of hints for the current id that arrived after the round was stopped, by the
	// host or by the guest's STOP: ignored, as they must be.
	uint64_t pages_hinted_after_stop() const
	{
		return after_stop_.load(std::memory_order_relaxed);
	}
	uint64_t pages_reported_total() const { return reported_.load(std::memory_order_relaxed); }
	// Thread CPU time: receiving hints (on the device thread) and applying queued ones (on
	// the migration thread).
	double arrival_cpu_ms() const { return arrival_ns_.load(std::memory_order_relaxed) / 1e6; }
	double apply_cpu_ms() const { return apply_ns_.load(std::memory_order_relaxed) / 1e6; }

private:
	PageBitmap& to_send_;
	const uint64_t ram_bytes_;
	std::mutex mutex_;
	uint32_t cmd_id_ = 0;
	uint32_t last_echo_ = 0;   // the guest may echo an id before the host recorded it
	uint32_t previous_id_ = 0; // the round before: its echoes are stale
	bool awaiting_ = false;	   // the host is starting a round, the id is not known yet
	bool host_active_ = false; // between the host's start and stop of the round
	bool accepting_ = false;
	bool stopped_ = false; // the current id's round was stopped (host or guest)
	std::atomic<uint64_t> hinted_{0};
	std::atomic<uint64_t> cleared_{0};
	std::atomic<uint64_t> ignored_{0};
	std::atomic<uint64_t> after_stop_{0};
	std::atomic<uint64_t> reported_{0};
	std::atomic<uint64_t> arrival_ns_{0};
	std::atomic<uint64_t> apply_ns_{0};
	bool deferred_ = false;
	std::function<double()> clock_;
	std::vector<PfnRun> pending_;	     // under mutex_
	std::vector<double> landings_;	     // under mutex_
};

} // namespace vbsim::migration

#endif
