// SPDX-License-Identifier: GPL-2.0
//
// The simulated guest: a tiny OS around the driver core. It boots the driver against the
// transport as a virtio driver would (status handshake, feature negotiation, queues in
// guest RAM), runs the driver's work on its own thread (config changes, stats requests),
// and offers the workloads tests need: user memory that really touches guest RAM, the OOM
// path, compaction moving a ballooned page, unbinding the driver.
//
// Guest RAM layout: the first `kernel_bytes` hold the "kernel": rings, indirect tables and
// the driver core object (whose PFN arrays the device reads). The buddy allocator manages
// the rest. The kernel area is written directly by the core, not through GuestMemory's
// write helpers; a migration model treats it as always dirty, as a real kernel's own data.
#ifndef VBSIM_GUEST_SIM_GUEST_H
#define VBSIM_GUEST_SIM_GUEST_H

#include <chrono>
#include <condition_variable>
#include <functional>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "buddy_allocator.h"
#include "pressure_model.h"
#include "sim_os.h"
#include "vballoon/core/balloon.h"

namespace vbsim {

struct SimGuestOptions {
	uint64_t kernel_bytes = 4ull << 20;
	// Largest block the balloon allocates (0: page at a time, as Linux's driver).
	unsigned max_chunk_order = 9;
	// How the guest initialises pages it gets back (init_on_free, poisoning).
	FreePagePolicy free_policy;
	// Also initialise pages as they enter the balloon (the 2017 kernel of the VIRTIO_BALLOON_F_SG thread), unless
	// the device promises initialised pages. Needs free_policy.initialise.
	bool zero_on_inflate = false;
	bool event_idx = true;
	bool indirect_descriptors = true;
	// Free page hinting: the guest runs the hint work item on its own thread and offers
	// the shrinker (shrink_free_page_hints(), also used by user allocations under memory
	// pressure). Off by default, so a scenario measures one thing at a time.
	bool free_page_hinting = false;
	// Free page reporting, as mm/page_reporting.c: when a free block of report_order or
	// more forms, a pass runs report_delay later on the reporting thread; per order it
	// reports at most 1/16 of the free blocks (at least one batch of 32) and runs again
	// while unreported blocks remain. Off by default, like hinting.
	bool page_reporting = false;
	// The guest may run the pressure governor: it then accepts VB_F_X_PRESSURE when the
	// device offers it (and sends the pressure stats tags).
	bool pressure_governor = false;
	unsigned report_order = 9; // pageblock order: 2 MiB
	std::chrono::milliseconds report_delay{2};
	// No pass runs until release_reporting(). Linux's first pass comes 2 s after the driver
	// registers and each pass takes at most a sixteenth of a list, so a program started at
	// boot allocates memory reporting has not reordered yet; with report_delay's 2 ms every
	// pass would have run before such a program allocated.
	bool hold_reporting = false;
	// The min watermark: an allocation without reclaim (the balloon's block and free page
	// hint allocations, as Linux's alloc_pages with __GFP_NORETRY and no reclaim flags) fails
	// when it would leave fewer free pages than this. 0: no watermark, the driver may take
	// every free page. linux_min_free_pages() gives what Linux 6.1 keeps.
	uint64_t min_free_pages = 0;
	// init_on_alloc: user memory is handed out zeroed, except pages the host zeroed and
	// nothing wrote since (SimOs::mark_host_zeroed()).
	bool zero_on_alloc = false;
	// The driver may take DEVICE_INIT_REPORTED and DEVICE_INIT_ON_INFLATE (bits 6, 7),
	// as the module's device_init parameter lets it.
	bool device_init = false;
	// A page cache and a workload that touches its working set every simulated second
	// (pressure_model.h), started at boot; run_second() runs one second of it. Give
	// min_free_pages too, or the cache is never reclaimed.
	std::optional<WorkloadOptions> workload;
	// The pressure governor (vb::PressurePolicy), set before the driver starts; run_second()
	// calls its tick.
	vb::PressurePolicy pressure_policy;
	// Device-specific feature bits the driver refuses even when it supports them.
	uint64_t refused_features = 0;
	bool verbose = false;
};

// Linux 6.1's min watermark (min_free_kbytes, summed over zones) on an x86-64 guest of
// `ram_bytes` with transparent huge pages, as Debian 12 boots: the larger of the
// int_sqrt(lowmem_kbytes * 16) rule and khugepaged's recommendation (11 pageblocks of 2 MiB
// per populated zone, at most 5% of RAM), in pages. A 2 GiB guest: 11264 pages (44 MiB;
// /proc/zoneinfo of the calibration guest: min 86 + 11177).
uint64_t linux_min_free_pages(uint64_t ram_bytes);

struct UserMemory {
	std::vector<vb::PageRun> runs;
	uint64_t pages = 0;
	bool oom_killed = false; // the guest ran out and the balloon had nothing left to give
};

class SimGuest {
public:
	using Core = vb::Balloon<SimOs>;

	SimGuest(GuestMemory& memory, Transport& transport, SimGuestOptions options = {});
	~SimGuest();
	SimGuest(const SimGuest&) = delete;
	SimGuest& operator=(const SimGuest&) = delete;

	// Binds the driver. Returns an empty string, or why the device was refused.
	std::string probe();
	// Unbinds: every balloon page goes back to the guest, then the device is reset.
	void remove();
	bool bound() const { return core_ != nullptr; }
	// Keeps the worker thread (the one that inflates and deflates) on one CPU, as a
	// benchmark may ask (thread_cpu.h); false when the driver is not bound.
	bool run_worker_on_cpu(unsigned cpu);

	// Blocks until the driver has handled every config change the device made and has
	// settled or stalled; nullopt when `timeout` passed first (a hung device).
	std::optional<vb::StepResult> wait_until_settled(std::chrono::milliseconds timeout);
	// One simulated second with a workload (SimGuestOptions::workload): the workload
	// touches its working set, then the OS's timers run: the governor's pressure_tick()
	// (policy enabled), and an adjust pass when it says so or when the last pass stalled
	// (Linux's driver retries a stalled inflate on a timer), waited for.
	struct Second {
		WorkloadTick workload;
		bool resumed = false;		 // pressure_tick() asked for an adjust pass
		bool retried = false;		 // a stalled pass was retried
		uint64_t balloon_wire_pages = 0; // after the second
	};
	Second run_second();
	PressureModel* pressure_model() { return pressure_model_.get(); }
	// Blocks until the driver answered `count` stats requests in total.
	bool wait_for_stats_reports(uint64_t count, std::chrono::milliseconds timeout);

	// Allocates `pages` of user memory and fills them with fill_byte (nullopt: leaves them
	// unwritten, for a caller that writes every page itself), running the OOM notifier when
	// the allocator is empty.
	UserMemory allocate_user_memory(uint64_t pages, std::optional<uint8_t> fill_byte);
	void free_user_memory(UserMemory& memory);
	// Compaction moves ballooned page `pfn` to a free page; false when the balloon was busy
	// or no page was free.
	bool migrate_balloon_page(uint64_t pfn);
	// A paused VM: the guest's own threads (config changes, stats, hint work, reporting)
	// finish the work item they are in and then stand still until resume(), so nothing
	// the guest does changes its RAM (a live migration's stop-and-copy). Interrupts that
	// arrive meanwhile are handled after resume(). Call both from the same thread; user
	// memory allocated by other threads is not stopped.
	void pause();
	void resume();
	// The shrinker's scan: gives at least `pages` held as free page hints back (whole
	// blocks). Returns the pages freed.
	uint64_t shrink_free_page_hints(uint64_t pages);
	// Blocks until `condition` holds, re-checked after every piece of driver work (an
	// adjust pass, a stats reply, a hint work item, a reporting pass); false on timeout.
	bool wait_for(const std::function<bool()>& condition, std::chrono::milliseconds timeout);
	uint64_t report_passes() const { return report_passes_; }
	// Free page reporting has nothing left to do: every pass it was asked for (a free that
	// formed a block of report_order or more, the boot, a pass that left blocks to the next)
	// has run and no block is isolated. Free blocks may still be unreported: a block split
	// off a reported one (an allocation's buddy halves) is not marked and asks for no pass,
	// as in Linux, until the next such free asks for one.
	bool reporting_idle() const;
	// Lets the passes run that SimGuestOptions::hold_reporting kept back.
	void release_reporting();
	const SimGuestOptions& options() const { return options_; }
	// CPU the guest's threads spent on free page hint work items and reporting passes
	// (their own thread CPU time, not the time waiting for the device), in ms.
	double free_page_cpu_ms() const { return free_page_cpu_ns_.load() / 1e6; }

	void set_host_owns_probe(SimOs::HostOwnsPage probe) { os_->set_host_owns_probe(std::move(probe)); }

	// Invariants: free + used + balloon == managed frames, the balloon list matches the
	// allocator, and the driver's count matches both. Empty when all hold.
	std::string check_accounting() const;

	const Core* core() const { return core_; }
	Core* core() { return core_; }
	SimOs& os() { return *os_; }
	const SimOs& os() const { return *os_; }
	BuddyAllocator& allocator() { return *allocator_; }
	const BuddyAllocator& allocator() const { return *allocator_; }
	uint64_t negotiated_features() const { return negotiated_features_; }
	uint64_t oom_notifications() const { return oom_notifications_; }
	uint64_t user_pages() const { return user_pages_; }

private:
	uint64_t kernel_alloc(uint64_t bytes, uint64_t align);
	void worker();
	// Marks a pass running, consumes the pending config interrupts (queueing the hint work
	// item if the hint command id changed) and returns how many the transport had sent by
	// then.
	uint64_t take_config_interrupts();
	// `config_interrupts_taken`: set when a config interrupt started the pass.
	void adjust_pass(std::optional<uint64_t> config_interrupts_taken);
	void hint_worker();
	void report_worker();
	// Reports what the budget allows; true when unreported blocks remain.
	bool report_pass();
	void note_progress();
	void request_report();

	GuestMemory& memory_;
	Transport& transport_;
	const SimGuestOptions options_;
	std::unique_ptr<BuddyAllocator> allocator_;
	std::unique_ptr<SimOs> os_;
	std::unique_ptr<PressureModel> pressure_model_;
	// The core's workspace (page runs, hint chain blocks), which the device never reads,
	// lives outside guest RAM.
	std::unique_ptr<Core::Workspace> workspace_;
	Core* core_ = nullptr;
	uint64_t kernel_next_ = 0;
	uint64_t negotiated_features_ = 0;

	std::thread worker_;
	std::thread hint_worker_;
	std::thread report_worker_;
	EventFd hint_work_;      // the hint work item is queued
	EventFd report_request_; // a reportable block formed
	EventFd report_release_; // release_reporting() was called
	std::atomic<bool> reporting_held_{false};
	EventFd stop_;
	EventFd retry_; // memory was freed: a stalled inflate may go on
	EventFd adjust_;	     // run_second(): run an adjust pass
	uint64_t adjust_passes_ = 0; // state_mutex_
	mutable std::mutex state_mutex_;
	std::condition_variable state_changed_;
	uint32_t handled_generation_ = 0;
	uint64_t handled_config_interrupts_ = 0;
	bool pass_running_ = true; // until the first pass after probe has run
	vb::StepResult last_result_ = vb::StepResult::kSettled;
	std::atomic<uint64_t> oom_notifications_{0};
	std::atomic<uint64_t> user_pages_{0};
	std::atomic<uint64_t> report_passes_{0};
	// Passes asked for (request_report()) and the requests the passes run so far answered.
	std::atomic<uint64_t> report_requests_{0};
	std::atomic<uint64_t> report_requests_answered_{0};
	std::atomic<uint64_t> free_page_cpu_ns_{0};
	// Shared by each guest thread for the work item it runs, exclusive to pause() until
	// resume(). Shared, because guest threads run side by side: a hint round waiting on a
	// slow host must not keep the config-change worker from inflating.
	std::shared_mutex vcpu_;
};

} // namespace vbsim

#endif
