// SPDX-License-Identifier: GPL-2.0
//
// The core's OS contract (vb::BalloonOs), implemented by the simulated guest: pages from
// the buddy allocator, the balloon list, driver buffers in guest RAM, split rings in guest
// RAM, notifications through the transport's eventfds.
#ifndef VBSIM_GUEST_SIM_OS_H
#define VBSIM_GUEST_SIM_OS_H

#include <array>
#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "balloon_page_list.h"
#include "buddy_allocator.h"
#include "memory/guest_memory.h"
#include "transport/event_fd.h"
#include "transport/transport.h"
#include "vballoon/core/os_interface.h"
#include "virtqueue/driver_ring.h"

namespace vbsim {

class PressureModel;

struct SimOsCounters {
	std::atomic<uint64_t> pages_initialised_by_guest{0}; // zeroed or poisoned on the way back
	std::atomic<uint64_t> guest_init_ns{0};              // time spent doing that
	std::atomic<uint64_t> alloc_ns{0};                   // time in the balloon's page allocation
	std::atomic<uint64_t> pages_skipped_initialising{0}; // the device had done it
	// init_on_alloc (SimGuestOptions::zero_on_alloc): pages zeroed as they were handed
	// out, and pages handed out without it because the host had zeroed them (a deflate or
	// a report it vouched for) and nothing wrote them since.
	std::atomic<uint64_t> pages_zeroed_on_alloc{0};
	std::atomic<uint64_t> pages_alloc_zeroing_skipped{0};
	std::atomic<uint64_t> alloc_zero_ns{0};
	std::atomic<uint64_t> must_tell_host_violations{0};  // a page reused while the host owns it
	std::atomic<uint64_t> bad_page_operations{0};        // double free, free of a foreign page...
	std::atomic<uint64_t> warnings_logged{0};
	std::atomic<uint64_t> interrupts_missed{0}; // a used buffer found only by re-checking
	std::atomic<uint64_t> kicks_repeated{0};    // a queue kicked again after a quiet interval
};

// How the guest initialises pages it frees (Linux's init_on_free or page poisoning).
struct FreePagePolicy {
	bool initialise = false;
	uint8_t byte = 0; // 0 for init_on_free, 0xaa for page poisoning
};

class SimOs {
public:
	// How many pages of a run the host holds.
	using HostOwnsPage = std::function<uint64_t(uint64_t first_pfn, uint64_t count)>;

	SimOs(GuestMemory& memory, Transport& transport, BuddyAllocator& allocator,
	      FreePagePolicy free_policy, bool verbose);

	void set_ring(vb::QueueKind kind, unsigned transport_index, std::unique_ptr<DriverRing> ring);
	void set_host_owns_probe(HostOwnsPage probe) { host_owns_ = std::move(probe); }
	// See SimGuestOptions::min_free_pages.
	void set_min_free_pages(uint64_t pages) { min_free_pages_ = pages; }
	// The page cache and workload (pressure_model.h): Reclaim::kLight then evicts from its
	// page cache below the min watermark, and pressure_sample() reports its counters.
	void set_pressure_model(PressureModel* model) { pressure_model_ = model; }
	// Makes every blocked queue_wait_used() return nullptr (device going away).
	void abort_waits();

	// ---- vb::BalloonOs ------------------------------------------------------------------
	bool alloc_pages(unsigned order, vb::PageUse use, vb::Reclaim reclaim, uint64_t* pfn);
	void free_page_run(vb::PageRun run);
	void balloon_list_insert(vb::PageRun run);
	size_t balloon_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages);
	void balloon_list_replace(uint64_t old_pfn, uint64_t new_pfn);
	void balloon_list_mark_initialised(vb::PageRun run);
	void balloon_hold(vb::PageRun run);
	size_t balloon_held_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages);
	void adjust_managed_pages(vb::PageRun run, bool add);
	void initialise_pages(vb::PageRun run);
	void hint_list_insert(vb::PageRun run);
	size_t hint_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages);
	// What Linux derives from the min watermark (SimGuestOptions::min_free_pages): 0 when
	// none is modelled, the allocator then hands out its last free page.
	uint64_t free_pages_kept();
	// The allocator's levels; without a pressure model the guest has no page cache or
	// workload that could refault, so its pressure counters stay at zero.
	void pressure_sample(vb::PressureSample* sample);
	uint64_t phys_addr(const void* buffer);
	bool queue_add(vb::QueueKind kind, const vb::Segment* out, unsigned n_out, const vb::Segment* in,
		       unsigned n_in, void* token);
	void queue_kick(vb::QueueKind kind);
	void* queue_get_used(vb::QueueKind kind, uint32_t* len);
	void* queue_wait_used(vb::QueueKind kind, uint32_t* len);
	bool queue_broken(vb::QueueKind kind);
	uint32_t queue_size(vb::QueueKind kind);
	uint32_t config_read32(uint32_t offset);
	void config_write32(uint32_t offset, uint32_t value);
	void memory_stats(vb::MemoryStats* stats);
	void lock() { balloon_lock_.lock(); }
	void unlock() { balloon_lock_.unlock(); }
	bool try_lock() { return balloon_lock_.try_lock(); }
	void vlog(vb::LogLevel level, const char* fmt, va_list args);

	// ---- The rest of the guest ----------------------------------------------------------
	// Checks pages the guest is about to use against the host's ownership.
	void check_reuse(uint64_t first_pfn, uint64_t count);
	void count_minor_faults(uint64_t pages) { minor_faults_ += pages; }
	int64_t managed_pages() const;
	const BalloonPageList& balloon_list() const { return balloon_list_; }
	// Ballooned pages kept off the list since the host did not acknowledge their deflate.
	const BalloonPageList& held_pages() const { return held_; }
	// Pages in the balloon, on the list or held.
	uint64_t ballooned_pages() const { return balloon_list_.pages() + held_.pages(); }
	// Pages held on the hint list (allocated frames the driver keeps until DONE).
	uint64_t hint_list_pages() const;
	bool hint_list_contains(uint64_t pfn) const;
	const SimOsCounters& counters() const { return counters_; }
	// Free pages the host zeroed (DEVICE_INIT_REPORTED, or a deflated page the device
	// initialised) that nothing wrote since: an allocation that must hand out zeroed
	// pages (init_on_alloc, __GFP_ZERO) may skip them, as mst's put_page_zeroed() lets
	// Linux do. Any thread.
	void mark_host_zeroed(vb::PageRun run);
	// Takes the mark of `pfn` (the page is about to be handed out): true when it was set.
	bool take_host_zeroed(uint64_t pfn);
	// The pages were handed out for something that may write them.
	void forget_host_zeroed(vb::PageRun run);
	// Writes zero into an allocation's pages, skipping those the host zeroed.
	void zero_allocated(vb::PageRun run);
	DriverRing* ring(vb::QueueKind kind) { return rings_[static_cast<size_t>(kind)].get(); }
	int call_fd(vb::QueueKind kind) const;

private:
	// How long a wait for the device goes before it looks again on its own.
	static constexpr int kRecheckIntervalMs = 20;
	// Neither removed nor asking for a reset: buffers added now can come back.
	bool device_serves() const;

	GuestMemory& memory_;
	Transport& transport_;
	BuddyAllocator& allocator_;
	const FreePagePolicy free_policy_;
	const bool verbose_;
	uint8_t* ram_base_;

	std::mutex balloon_lock_;
	BalloonPageList balloon_list_;
	BalloonPageList held_;
	// One byte per frame: taken off the list (or the held pages) and not yet freed or
	// held again. Such a page must never go back through balloon_list_insert().
	std::vector<uint8_t> dequeued_;
	std::vector<std::atomic<uint8_t>> host_zeroed_; // one per frame, see mark_host_zeroed()
	void mark_dequeued(vb::PageRun run, bool dequeued);
	bool any_dequeued(vb::PageRun run) const;
	mutable std::mutex hint_mutex_; // the hint list's own lock: the shrinker reaches it
	std::vector<vb::PageRun> hint_list_;
	uint64_t hint_list_pages_ = 0;
	std::atomic<int64_t> managed_delta_{0};
	std::atomic<uint64_t> minor_faults_{0};
	std::array<std::unique_ptr<DriverRing>, VB_QUEUE_KIND_COUNT> rings_;
	std::array<int, VB_QUEUE_KIND_COUNT> transport_index_{};
	EventFd abort_;
	std::atomic<bool> aborted_{false};
	HostOwnsPage host_owns_;
	uint64_t min_free_pages_ = 0;
	PressureModel* pressure_model_ = nullptr;
	SimOsCounters counters_;
};

} // namespace vbsim

#endif
