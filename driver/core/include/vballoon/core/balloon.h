// SPDX-License-Identifier: GPL-2.0
//
// The balloon: one object per device, a template over the OS it runs in.
//
// The flow, as the OS drives it:
//   accept_features()            validate: what to take of what the device offers
//   Balloon(os, features, ...)   after FEATURES_OK, once the queues exist (it asks their size);
//                                its Workspace is the OS's to place
//   prepare()                    before DRIVER_OK: prime statsq, write poison_val
//   start()                      after DRIVER_OK: notify statsq
//   set_pressure_policy()        before start(): pace the inflate by the guest's pressure
//   adjust_towards_target()      on every config change, repeated while it says kMoreWork
//                                (kStalled: retry later, on a timer or when memory is freed;
//                                kHeld: the pressure governor holds it, wait for a tick)
//   pressure_tick()              about once a second (kPressureTickMs) while the pressure
//                                policy is enabled, no lock held, may sleep; true: call
//                                adjust_towards_target() again
//   handle_stats_request()       when the device returns the stats buffer
//   deflate_for_oom()            from the OOM notifier (DEFLATE_ON_OOM only)
//   migrate_page()               when compaction moves a ballooned page
//   hint_config_changed()        FREE_PAGE_HINT: from the config-change callback, any context
//   handle_free_page_hint()      FREE_PAGE_HINT: the OS's hint work item
//   hint_held_pages()/hint_release()  FREE_PAGE_HINT: the OS's shrinker (count/scan)
//   hint_device_reset()          FREE_PAGE_HINT: after a reset or before remove, hint work stopped
//   report_free_pages()          PAGE_REPORTING: the OS's reporting pass, up to 32 runs
//   release_all()                on remove, while the device still works: deflates every
//                                page the host acknowledges giving back
//   (the OS resets the device)
//   release_after_reset()        on remove and freeze, after the reset: every page still on
//                                the balloon list goes back to the guest without a message
//                                (the host holds nothing after a reset), and so does every page
//                                held since a deflate the host did not acknowledge. Pages compaction has
//                                isolated come back through migrate_page(), which fails after
//                                a reset, so compaction puts them back on the list; the OS
//                                calls this again until balloon_wire_pages() is 0.
//
// Failure: a page goes back to the guest only once the host acknowledged its deflate, or
// after the device was reset. The messenger reports per page whether it was acknowledged,
// never sent or lost (host_reply.h), and each path acts on exactly that.
//
// Balloon<Os> is a thin facade over four parts, each a class over the same Os in its own
// header, sharing nothing but the OS, the negotiated features and the counters:
//   messenger.h           Messenger: message slots, PFN or chunk packing, the init bitmap,
//                         every page sorted into one outcome; the slot rule that lets the
//                         OOM notifier's deflate send while an inflate is between batches
//   page_balloon.h        PageBalloon (owns the Messenger): target, inflate, deflate, OOM,
//                         migration, stats, `actual`, under the balloon lock
//   free_page_hinter.h    FreePageHinter: its own state and free_page_vq, no balloon lock
//   free_page_reporter.h  FreePageReporter: its own state and reporting_vq, no balloon lock
#ifndef VBALLOON_CORE_BALLOON_H
#define VBALLOON_CORE_BALLOON_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/counters.h"
#include "vballoon/core/features.h"
#include "vballoon/core/free_page_hinter.h"
#include "vballoon/core/free_page_reporter.h"
#include "vballoon/core/os_interface.h"
#include "vballoon/core/page_balloon.h"

namespace vb {

template <BalloonOs Os> class Balloon {
public:
	using PageBalloon = vb::PageBalloon<Os>;
	using Messenger = vb::Messenger<Os>;
	using FreePageHinter = vb::FreePageHinter<Os>;
	using FreePageReporter = vb::FreePageReporter<Os>;
	// What the core works on that the device never reads: the step's page runs and the
	// hint chain's blocks. Most of the core's memory, so the OS keeps it apart from the
	// object (in Linux: the object holds the device-visible buffers in an order-1 kmalloc,
	// the workspace may come from vmalloc).
	struct Workspace {
		typename PageBalloon::StepRuns step_runs;
		HintChainPacker::Blocks hint_chain;
	};

	static constexpr uint32_t kWirePagesPerMessage = PageBalloon::kWirePagesPerMessage;
	static constexpr uint32_t kWirePagesPerStep = PageBalloon::kWirePagesPerStep;
	static constexpr uint32_t kOomDeflateWirePages = PageBalloon::kOomDeflateWirePages;
	static constexpr uint32_t kChunksPerMessageMax = Messenger::kChunksPerMessageMax;
	static constexpr uint64_t kChunkedStepWirePages = PageBalloon::kChunkedStepWirePages;
	static constexpr uint64_t kChunkedFirstBatchWirePages = PageBalloon::kChunkedFirstBatchWirePages;
	static constexpr uint64_t kChunkedBatchWirePagesMax = PageBalloon::kChunkedBatchWirePagesMax;
	static constexpr size_t kReportRunsMax = FreePageReporter::kReportRunsMax;

	// `workspace` must outlive the balloon.
	Balloon(Os& os, uint64_t negotiated_features, const GuestTraits& traits,
		Workspace& workspace)
	    : features_(negotiated_features),
	      pages_(os, negotiated_features, traits, counters_, workspace.step_runs),
	      hinter_(os, negotiated_features, traits, counters_, workspace.hint_chain),
	      reporter_(os, negotiated_features, traits, counters_)
	{
	}

	Balloon(const Balloon&) = delete;
	Balloon& operator=(const Balloon&) = delete;

	// Before DRIVER_OK. Returns false when the device cannot take the stats buffer.
	[[nodiscard]] bool prepare() { return pages_.prepare(); }
	// After DRIVER_OK.
	void start()
	{
		reporter_.start();
		hinter_.start();
		pages_.start();
	}

	// ---- The page balloon (page_balloon.h) -------------------------------------------
	StepResult adjust_towards_target() { return pages_.adjust_towards_target(); }
	// ---- The pressure governor (pressure_governor.h) ------------------------------------
	static constexpr uint64_t kPressureTickMs = PressureGovernor::kPressureTickMs;
	void set_pressure_policy(const PressurePolicy& policy)
	{
		pages_.set_pressure_policy(policy);
	}
	bool pressure_tick() { return pages_.pressure_tick(); }
	const PressureGovernor& governor() const { return pages_.governor(); }
	// The wire pages freed, at most kOomDeflateWirePages.
	uint64_t deflate_for_oom() { return pages_.deflate_for_oom(); }
	void handle_stats_request() { pages_.handle_stats_request(); }
	[[nodiscard]] bool migrate_page(uint64_t old_pfn, uint64_t new_pfn)
	{
		return pages_.migrate_page(old_pfn, new_pfn);
	}
	void release_all() { pages_.release_all(); }
	void release_after_reset() { pages_.release_after_reset(); }
	// The device's wish, rounded up to whole guest pages (in wire pages).
	uint64_t target_wire_pages() const { return pages_.target_wire_pages(); }
	// What the balloon holds (what `actual` reports), in wire pages.
	uint64_t balloon_wire_pages() const { return pages_.balloon_wire_pages(); }
	// Largest allocation order tried; 0 reproduces Linux's page-at-a-time inflate.
	void set_max_chunk_order(unsigned order) { pages_.set_max_chunk_order(order); }

	// ---- Free page hinting (free_page_hinter.h), FREE_PAGE_HINT only -------------------
	bool hint_config_changed() { return hinter_.hint_config_changed(); }
	void handle_free_page_hint() { hinter_.handle_free_page_hint(); }
	uint64_t hint_held_pages() const { return hinter_.hint_held_pages(); }
	uint64_t hint_release(uint64_t max_pages) { return hinter_.hint_release(max_pages); }
	void hint_stop() { hinter_.hint_stop(); }
	bool hint_stopping() const { return hinter_.hint_stopping(); }
	void hint_device_reset() { hinter_.hint_device_reset(); }
	static constexpr unsigned kHintOrdersBelowLargest = FreePageHinter::kHintOrdersBelowLargest;
	static constexpr uint64_t kHintReserveShare = FreePageHinter::kHintReserveShare;

	// ---- Free page reporting (free_page_reporter.h), PAGE_REPORTING only ---------------
	[[nodiscard]] bool report_free_pages(const PageRun* runs, size_t count,
					     bool* device_initialised = nullptr)
	{
		return reporter_.report_free_pages(runs, count, device_initialised);
	}

	uint64_t features() const { return features_; }
	const BalloonCounters& counters() const { return counters_; }

private:
	const uint64_t features_;
	BalloonCounters counters_; // before the parts, which keep a reference to it
	PageBalloon pages_;
	FreePageHinter hinter_;
	FreePageReporter reporter_;
};

} // namespace vb

#endif
