// SPDX-License-Identifier: GPL-2.0
//
// The pre-copy engine. See migration.h for the API and docs/migration-model.md for the
// model: what is measured, what is computed, and why.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "memory/guest_memory.h"
#include "migration/destination_image.h"
#include "migration/dirty_log.h"
#include "migration/free_page_tracker.h"
#include "migration/convergence_window.h"
#include "migration/migration.h"
#include "migration/model_time.h"
#include "migration/page_bitmap.h"
#include "migration/residency.h"
#include "migration/senders.h"
#include "migration/workload.h"
#include "transport/thread_cpu_time.h"
#include "vballoon/support/mutant.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kPageBytes;

// Where the running QEMU iteration began: the round's model time, CPU critical path and
// bytes sent at that moment.
struct IterationStart {
	double model_ms = 0;
	double cpu_ms = 0;
	uint64_t bytes = 0;
};

double ns_to_ms(uint64_t ns)
{
	return double(ns) / 1e6;
}

void check_machine(const MigrationMachine& machine, const MigrationConfig& config)
{
	if (machine.memory == nullptr)
		throw std::invalid_argument("migration: the machine has no guest RAM");
	if (!machine.pages_in_use && config.verify)
		throw std::invalid_argument("migration: verification needs pages_in_use");
	if (uses_hints(config.strategy) && (machine.hints == nullptr || !machine.set_free_page_observer))
		throw std::invalid_argument(std::string("migration: strategy ") +
					    strategy_name(config.strategy) +
					    " needs the device's free page hint controls");
	if (!(config.link_bytes_per_second > 0) || !(config.max_bandwidth_bytes_per_second > 0) ||
	    !(config.downtime_limit_ms > 0) || !(config.iteration_ms > 0) ||
	    config.sender_threads == 0 || config.zero_page_extra_bytes > 8)
		throw std::invalid_argument(
			"migration: link bandwidth, max-bandwidth, downtime limit, "
			"iteration time and sender threads must be positive");
	for (const PageRange& range : machine.always_dirty)
		if (range.first_page + range.pages > machine.memory->size() / kPage)
			throw std::invalid_argument("migration: an always-dirty range lies outside RAM");
}

// Compares the destination with the source on every page the guest holds in use.
void verify(const MigrationMachine& machine, const DestinationImage& destination, Residency& residency,
	    MigrationResult& result)
{
	residency.snapshot();
	std::vector<PageRange> in_use = machine.pages_in_use();
	// The kernel area changes whenever the guest's driver or the device runs; it can only
	// be compared when the machine really stops them.
	if (machine.pause_guest)
		in_use.insert(in_use.end(), machine.always_dirty.begin(), machine.always_dirty.end());
	const uint64_t ram_pages = machine.memory->size() / kPage;
	const uint8_t* base = machine.memory->translate(0, machine.memory->size());
	std::vector<uint8_t> checked(ram_pages, 0);
	uint64_t first_bad = UINT64_MAX;
	for (const PageRange& range : in_use) {
		for (uint64_t page = range.first_page; page < range.first_page + range.pages; page++) {
			if (page >= ram_pages || checked[page])
				continue;
			checked[page] = 1;
			result.pages_verified++;
			const uint8_t* source = residency.resident(page) ? base + page * kPage : nullptr;
			if (destination.differs(page, source)) {
				result.pages_mismatched++;
				first_bad = std::min(first_bad, page);
			}
		}
	}
	result.verified = result.pages_mismatched == 0;
	if (!result.verified)
		result.error = "verification failed: " + std::to_string(result.pages_mismatched) +
			       " page(s) in use differ at the destination (first: pfn " +
			       std::to_string(first_bad) + ")";
}

} // namespace

MigrationResult migrate(MigrationMachine& machine, const MigrationConfig& config, const ProgressCallback& progress)
{
	check_machine(machine, config);
	GuestMemory& memory = *machine.memory;
	const uint64_t ram_pages = memory.size() / kPage;
	const bool hints = uses_hints(config.strategy);
	const bool deferred_hints = config.hint_application == HintApplication::kAtIterationBoundaries;
	const bool legacy_scan = uses_zero_detection(config.strategy) &&
				 config.zero_detection_place == ZeroDetectionPlace::kMigrationThread;

	MigrationResult result;
	result.strategy = config.strategy;
	result.ram_bytes = memory.size();
	const double guest_cpu_start = machine.guest_cpu_ms ? machine.guest_cpu_ms() : 0;
	const double device_cpu_start = machine.device_free_page_cpu_ms ? machine.device_free_page_cpu_ms() : 0;
	const uint64_t released_early_start = machine.guest_hint_pages_released_early
						      ? machine.guest_hint_pages_released_early()
						      : 0;

	DirtyLog log(ram_pages);
	PageBitmap to_send(ram_pages);
	DestinationImage destination(memory.size());
	Residency residency(memory);
	FreePageTracker tracker(to_send, memory.size());
	tracker.set_deferred(deferred_hints);
	std::vector<uint64_t> harvested(log.words());

	auto pause = [&] {
		if (machine.workload)
			machine.workload->pause();
		if (machine.pause_guest)
			machine.pause_guest();
	};
	auto resume = [&] {
		if (machine.pause_guest && machine.resume_guest)
			machine.resume_guest();
		if (machine.workload)
			machine.workload->resume();
	};

	RoundCounters counters;
	ModelTime time(machine.clock ? machine.clock->now_ms() : 0, counters, legacy_scan);
	std::unique_ptr<Senders> senders;
	auto model_now_ms = [&time] { return time.model_now_ms(); };
	auto migration_now_ms = [&time] { return time.migration_now_ms(); };

	// Setup (QEMU's ram_save_setup): dirty logging on, every page to send, the first
	// bitmap sync, with the guest still for the instant the log is attached.
	uint64_t bitmap_ns = 0;
	pause();
	{
		const uint64_t start = thread_cpu_ns();
		memory.attach_dirty_log(&log);
		to_send.set_all();
		log.harvest(harvested.data()); // nothing dirty yet; QEMU's first sync costs this much
		result.bitmap_syncs++;
		bitmap_ns += thread_cpu_ns() - start;
	}
	if (hints)
		machine.set_free_page_observer(&tracker);
	resume();
	result.setup_ms = ns_to_ms(bitmap_ns);

	senders = std::make_unique<Senders>(config, to_send, destination, memory, residency);
	time.pace_by(*senders);
	if (machine.clock)
		machine.clock->drive(model_now_ms);
	else if (machine.workload)
		machine.workload->set_clock(model_now_ms);
	tracker.set_clock(migration_now_ms);

	auto start_hint_round = [&] {
		if (!hints)
			return;
		const uint64_t start = thread_cpu_ns();
		tracker.host_starting_round();
		tracker.host_started_round(machine.hints->start_hint_round());
		bitmap_ns += thread_cpu_ns() - start;
	};
	auto stop_hint_round = [&] {
		if (!hints)
			return;
		tracker.host_stopped_round();
		machine.hints->stop_hint_round();
	};
	// Between iterations the migration thread drops the bitmap mutex: queued hints land.
	auto land_hints = [&]() -> uint64_t {
		if (!hints || !deferred_hints)
			return 0;
		const double at = migration_now_ms();
		const uint64_t cleared = tracker.apply_pending();
		if (cleared != 0)
			result.hint_landings_ms.push_back(at);
		return cleared;
	};

	double elapsed_ms = result.setup_ms;
	time.advance_to(elapsed_ms);
	start_hint_round(); // after the first bitmap sync, as QEMU's balloon does
	bool stopping = false;
	uint64_t cleared_counted = 0;

	// QEMU's convergence (migration_iteration_run, after every iteration): pending bytes
	// against the window's threshold. Below it ram_save_pending syncs the bitmap and looks
	// again; still below, the VM stops, mid-pass if need be: what the bulk pass had not
	// reached goes in stop-and-copy.
	const bool qemu_convergence =
		config.convergence == ConvergenceRule::kQemuPendingOverBandwidth;
	ConvergenceWindow window(elapsed_ms, config.downtime_limit_ms);
	// What QEMU's dirty log would count: the kernel area (always_dirty) is re-sent every
	// round because the model cannot see whether the guest's driver and device wrote it, but
	// a real log shows only what was written; counted, its 4 MiB of (mostly zero) pages
	// would keep an idle guest above a threshold measured on zero-page records for ever.
	auto pending_logged = [&] {
		uint64_t n = to_send.count();
		for (const PageRange& range : machine.always_dirty)
			n -= to_send.count_range(range.first_page, range.pages);
		return n;
	};
	// A bitmap sync (QEMU's migration_bitmap_sync): the hint round stops before it, and a
	// hint the device thread was applying finishes first (QEMU's free_page_lock).
	auto sync_bitmap = [&](unsigned round) {
		result.bitmap_syncs++;
		stop_hint_round();
		land_hints();
		// The harvest finds every write the guest owed at the sync's model time: a workload
		// thread behind the clock (a loaded host, a sanitizer) would otherwise make its
		// late writes after the sync, and the round would find fewer pages dirty than the
		// rates give. The senders stand still here, so the clock does too.
		if (machine.workload)
			machine.workload->pause();
		std::fill(harvested.begin(), harvested.end(), 0);
		log.harvest(harvested.data());
		if (machine.workload)
			machine.workload->resume();
		// Mutant (spec/compare_mutants.tsv): the bulk pass's harvest thrown away.
		if (!(round == 0 && VB_MUTANT(MIG_FIRST_HARVEST_DROPPED)))
			to_send.or_words(harvested.data());
		for (const PageRange& range : machine.always_dirty)
			to_send.set_range(range.first_page, range.pages);
	};

	// Under QEMU's own rate limit (max-bandwidth below the link) an iteration ends at
	// MAX_WAIT of sending or once it has sent the budget of the 100 ms rate window; the
	// migration thread then sleeps to the window's end (migration_rate_limit) and runs the
	// next iteration, and its convergence check, only in the next window. A slower link
	// instead blocks the sends, and MAX_WAIT, wall time, ends the iteration.
	const bool rate_limited_iterations =
		config.max_bandwidth_bytes_per_second < config.link_bytes_per_second;

	for (unsigned round = 0;; round++) {
		RoundProgress p;
		p.round = round;
		p.stop_and_copy = stopping;
		uint64_t round_sync_ns = 0;
		uint64_t residency_ns = residency.snapshot();
		p.pages_dirty = to_send.count();

		counters.reset();
		senders->begin_round(counters);
		time.begin_round(config.round_rate(stopping));
		// QEMU's ram_save_iterate: iterations of iteration_ms of model time; the hints that
		// arrived meanwhile land between them. Stop-and-copy is one iteration.
		const bool iterates = qemu_convergence || (deferred_hints && hints);
		IterationStart iteration;
		const std::function<bool()> iteration_over = [&] {
			if (stopping || !iterates)
				return false;
			if (!rate_limited_iterations)
				return time.in_round_ms() - iteration.model_ms >= config.iteration_ms;
			return time.round_cpu_ms() - iteration.cpu_ms >= config.iteration_ms ||
			       link_ms(counters.bytes.load(std::memory_order_relaxed) -
					       iteration.bytes,
				       config.max_bandwidth_bytes_per_second) >= kBandwidthWindowMs;
		};
		bool converged_mid_pass = false;
		for (;;) {
			p.iterations++;
			if (senders->run_iteration(iteration_over))
				break;
			const uint64_t start = thread_cpu_ns();
			bool synced = false;
			land_hints();
			if (qemu_convergence) {
				window.update(elapsed_ms + time.in_round_ms(),
					      result.bytes_sent + counters.bytes.load());
				if (window.below_threshold(pending_logged())) {
					sync_bitmap(round);
					synced = true;
					converged_mid_pass = window.below_threshold(pending_logged());
					p.stopped_mid_pass = converged_mid_pass;
					if (!converged_mid_pass)
						start_hint_round();
				}
			}
			round_sync_ns += thread_cpu_ns() - start;
			if (converged_mid_pass)
				break;
			// The pass goes on after a sync whose harvest may have folded new writes into
			// pages it has yet to send: it must read them as they are now. By the round's
			// snapshot a page the guest wrote since would still read as absent (zeros),
			// and its write would be spent.
			if (synced)
				residency_ns += residency.snapshot();
			iteration = {time.in_round_ms(), time.round_cpu_ms(),
				     counters.bytes.load(std::memory_order_relaxed)};
		}
		{
			const uint64_t start = thread_cpu_ns();
			counters.bytes.fetch_add(senders->sync_channels());
			round_sync_ns += thread_cpu_ns() - start;
		}
		// After the channels' sync: a pipe's reader has copied out the round's last bytes.
		const double critical_ms = time.round_cpu_ms();
		p.network_ms = link_ms(counters.bytes.load(), config.round_rate(stopping));
		const double paced_ms = std::max(p.network_ms, critical_ms);
		time.end_round();
		// The round's end on the model clock, before the sync's own cost is added.
		time.advance_to(elapsed_ms + paced_ms);

		p.pages_sent = counters.pages_sent.load();
		p.zero_pages = counters.zero_pages.load();
		p.pages_skipped_reported = counters.skipped_reported.load();
		p.bytes_sent = counters.bytes.load();
		p.critical_cpu_ms = critical_ms;
		p.reader_copy_ms = ns_to_ms(senders->reader_copy_ns_in_round());
		result.reader_copy_ms += p.reader_copy_ms;

		result.zero_scan_cpu_ms += ns_to_ms(counters.scan_ns.load());
		result.copy_cpu_ms += ns_to_ms(counters.send_ns.load());
		if (uses_reports(config.strategy) && config.reported_pages == ReportedPages::kSkippedUnscanned)
			round_sync_ns += residency_ns; // how this host learns which pages are absent

		const bool final_round = stopping;
		// The pass is done: the bitmap sync ends the round (a mid-pass stop synced already).
		if (!final_round && !converged_mid_pass) {
			const uint64_t start = thread_cpu_ns();
			sync_bitmap(round);
			round_sync_ns += thread_cpu_ns() - start;
		}
		// Hints cleared since the last round ended.
		const uint64_t cleared_now = tracker.pages_cleared_total();
		p.pages_skipped_hinted = cleared_now - cleared_counted;
		cleared_counted = cleared_now;

		p.sync_ms = ns_to_ms(round_sync_ns);
		p.host_cpu_ms = ns_to_ms(counters.scan_ns.load() + counters.send_ns.load() + round_sync_ns);
		p.round_ms = paced_ms + p.sync_ms;
		elapsed_ms += p.round_ms;
		p.elapsed_ms = elapsed_ms;
		time.advance_to(elapsed_ms);
		bitmap_ns += round_sync_ns;
		result.sync_ms += p.sync_ms;

		result.pages_sent += p.pages_sent;
		result.zero_pages += p.zero_pages;
		result.pages_skipped_reported += p.pages_skipped_reported;
		result.pages_skipped_hinted += p.pages_skipped_hinted;
		result.bytes_sent += p.bytes_sent;
		result.network_ms += p.network_ms;
		result.round_log.push_back(p);
		if (progress)
			progress(p);

		if (final_round) {
			result.downtime_ms += p.round_ms;
			break;
		}

		const uint64_t pending = to_send.count();
		double expected_downtime_ms = 0;
		if (qemu_convergence) {
			// QEMU: every dirty page counts 4096 bytes, against the threshold of the last
			// bandwidth window (bytes on the wire, zero-page records included, per ms).
			window.update(elapsed_ms, result.bytes_sent);
			expected_downtime_ms = window.expected_downtime_ms(pending_logged());
		} else {
			// What a whole page cost: its link time (stop-and-copy is not rate limited),
			// or the CPU a whole page took.
			double per_page_ms = link_ms(kPage + kPageHeaderBytes, config.link_bytes_per_second);
			if (p.pages_sent != 0)
				per_page_ms = std::max(per_page_ms, ns_to_ms(counters.send_ns.load()) / double(p.pages_sent));
			expected_downtime_ms = double(pending) * per_page_ms;
		}
		result.converged =
			converged_mid_pass || expected_downtime_ms <= config.downtime_limit_ms;
		if (result.converged || round + 1 >= config.max_rounds) {
			// Stop-and-copy: the VM stops (its threads stand still, wall clock: waiting
			// on them is what stopping costs), the last harvest takes both bitmaps.
			// The workload's writes go on until the VM has stopped: it stands still last,
			// after doing what it owes at that moment (writes the final harvest must find).
			const auto stop_start = std::chrono::steady_clock::now();
			if (machine.pause_guest)
				machine.pause_guest();
			const double stop_ms =
				std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - stop_start)
					.count();
			time.advance_to(elapsed_ms + stop_ms);
			if (machine.workload)
				machine.workload->pause();
			const uint64_t start = thread_cpu_ns();
			std::fill(harvested.begin(), harvested.end(), 0);
			log.harvest_final(harvested.data());
			result.bitmap_syncs++;
			// Mutant (spec/compare_mutants.tsv): stop-and-copy sends only what was left.
			if (!VB_MUTANT(MIG_STOP_AND_COPY_IGNORES_DIRTY_LOG))
				to_send.or_words(harvested.data());
			for (const PageRange& range : machine.always_dirty)
				to_send.set_range(range.first_page, range.pages);
			const uint64_t final_sync_ns = thread_cpu_ns() - start;
			bitmap_ns += final_sync_ns;
			result.vm_stop_ms = stop_ms;
			result.sync_ms += ns_to_ms(final_sync_ns);
			elapsed_ms += stop_ms + ns_to_ms(final_sync_ns);
			time.advance_to(elapsed_ms);
			result.downtime_ms = stop_ms + ns_to_ms(final_sync_ns);
			stopping = true;
		} else {
			start_hint_round();
		}
	}

	memory.attach_dirty_log(nullptr);
	// The destination is compared while the guest still stands still, before DONE lets
	// the guest reuse its hinted pages. Every channel is synced: the image is complete.
	result.bytes_received = senders->bytes_received();
	if (config.verify)
		verify(machine, destination, residency, result);
	else
		result.verified = false;
	if (config.verify && result.verified && result.bytes_received != result.bytes_sent) {
		result.verified = false;
		result.error = "the receivers read " + std::to_string(result.bytes_received) +
			       " bytes of the " + std::to_string(result.bytes_sent) + " sent";
	}
	// Before DONE: what the guest took back early, while its hints could still be in flight.
	if (machine.guest_hint_pages_released_early)
		result.hinted_pages_released_early =
			machine.guest_hint_pages_released_early() - released_early_start;
	if (hints)
		machine.hints->finish_hinting(); // QEMU: DONE when migration completes
	if (machine.clock)
		machine.clock->release();
	else if (machine.workload)
		machine.workload->set_clock({});
	tracker.set_clock({});
	resume();
	if (hints)
		machine.set_free_page_observer(nullptr);
	result.receiver_cpu_ms = senders->receiver_cpu_ms();
	senders.reset();

	result.rounds = unsigned(result.round_log.size());
	result.total_ms = elapsed_ms;
	// Applying queued hints ran on the migration thread inside the syncs; it is hint work.
	result.bitmap_cpu_ms = ns_to_ms(bitmap_ns) - tracker.apply_cpu_ms();
	if (!deferred_hints)
		result.hint_landings_ms = tracker.immediate_landings();
	// The device thread's queue work includes receiving the hints; without that measure,
	// the tracker's own share of it.
	const double device_cpu_ms = machine.device_free_page_cpu_ms
					     ? machine.device_free_page_cpu_ms() - device_cpu_start
					     : tracker.arrival_cpu_ms();
	result.hint_cpu_ms = device_cpu_ms + tracker.apply_cpu_ms();
	result.hinted_pages_received = tracker.pages_hinted_total();
	result.reported_pages_received = tracker.pages_reported_total();
	result.hinted_pages_after_stop = tracker.pages_hinted_after_stop();
	result.host_cpu_ms = result.zero_scan_cpu_ms + result.copy_cpu_ms + result.bitmap_cpu_ms + result.hint_cpu_ms;
	if (machine.guest_cpu_ms)
		result.guest_cpu_ms = machine.guest_cpu_ms() - guest_cpu_start;
	return result;
}

} // namespace vbsim::migration
