// SPDX-License-Identifier: GPL-2.0
//
// The pre-copy engine's phases. docs/migration-model.md explains the model: what is
// measured, what is computed, and why.
#include <algorithm>
#include <chrono>
#include <string>

#include "memory/guest_memory.h"
#include "migration/precopy.h"
#include "migration/workload.h"
#include "transport/thread_cpu_time.h"
#include "vballoon/support/mutant.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kWirePageBytes;

double ns_to_ms(uint64_t ns)
{
	return double(ns) / 1e6;
}

bool zero_scan_in_migration_thread(const MigrationConfig& config)
{
	return uses_zero_detection(config.strategy) &&
	       config.zero_detection_place == ZeroDetectionPlace::kMigrationThread;
}

} // namespace

PreCopy::PreCopy(MigrationMachine& machine, const MigrationConfig& config)
    : machine_(machine), config_(config), hints_(uses_hints(config.strategy)),
      deferred_hints_(config.hint_application == HintApplication::kAtIterationBoundaries),
      qemu_convergence_(config.convergence == ConvergenceRule::kQemuPendingOverBandwidth),
      iterates_(qemu_convergence_ || (deferred_hints_ && hints_)),
      rate_limited_iterations_(config.max_bandwidth_bytes_per_second <
			       config.link_bytes_per_second),
      guest_cpu_start_ms_(machine.guest_cpu_ms ? machine.guest_cpu_ms() : 0),
      device_cpu_start_ms_(machine.device_free_page_cpu_ms ? machine.device_free_page_cpu_ms() : 0),
      released_early_start_(machine.guest_hint_pages_released_early
				    ? machine.guest_hint_pages_released_early()
				    : 0),
      log_(machine.memory->size() / kPage), to_send_(machine.memory->size() / kPage),
      destination_(machine.memory->size()), residency_(*machine.memory),
      tracker_(to_send_, machine.memory->size()), harvested_(log_.words()),
      time_(machine.clock ? machine.clock->now_ms() : 0, counters_,
	    zero_scan_in_migration_thread(config)),
      window_(0, config.downtime_limit_ms), iteration_over_([this] { return iteration_time_up(); })
{
	result_.strategy = config.strategy;
	result_.ram_bytes = machine.memory->size();
	tracker_.set_deferred(deferred_hints_);
}

void PreCopy::pause_machine()
{
	if (machine_.workload)
		machine_.workload->pause();
	if (machine_.pause_guest)
		machine_.pause_guest();
}

void PreCopy::resume_machine()
{
	if (machine_.pause_guest && machine_.resume_guest)
		machine_.resume_guest();
	if (machine_.workload)
		machine_.workload->resume();
}

void PreCopy::setup()
{
	// The guest stands still for the instant the log is attached.
	pause_machine();
	{
		const uint64_t start = thread_cpu_ns();
		machine_.memory->attach_dirty_log(&log_);
		to_send_.set_all();
		// Nothing is dirty yet and every page is to send, so this sync folds nothing in;
		// QEMU's first sync costs this much.
		log_.harvest(harvested_.data());
		result_.bitmap_syncs++;
		bitmap_ns_ += thread_cpu_ns() - start;
	}
	if (hints_)
		machine_.set_free_page_observer(&tracker_);
	resume_machine();
	result_.setup_ms = ns_to_ms(bitmap_ns_);

	senders_ = std::make_unique<Senders>(config_, to_send_, destination_, *machine_.memory,
					     residency_);
	time_.pace_by(*senders_);
	auto model_now_ms = [this] { return time_.model_now_ms(); };
	if (machine_.clock)
		machine_.clock->drive(model_now_ms);
	else if (machine_.workload)
		machine_.workload->set_clock(model_now_ms);
	tracker_.set_clock([this] { return time_.migration_now_ms(); });

	elapsed_ms_ = result_.setup_ms;
	time_.advance_to(elapsed_ms_);
	start_hint_round(); // after the first bitmap sync, as QEMU's balloon does
	window_ = ConvergenceWindow(elapsed_ms_, config_.downtime_limit_ms);
}

void PreCopy::start_hint_round()
{
	if (!hints_)
		return;
	const uint64_t start = thread_cpu_ns();
	tracker_.host_starting_round();
	tracker_.host_started_round(machine_.hints->start_hint_round());
	bitmap_ns_ += thread_cpu_ns() - start;
}

void PreCopy::stop_hint_round()
{
	if (!hints_)
		return;
	tracker_.host_stopped_round();
	machine_.hints->stop_hint_round();
}

// Between iterations the migration thread drops the bitmap mutex: queued hints land.
void PreCopy::land_hints()
{
	if (!hints_ || !deferred_hints_)
		return;
	const double at = time_.migration_now_ms();
	if (tracker_.apply_pending() != 0)
		result_.hint_landings_ms.push_back(at);
}

RoundProgress PreCopy::run_round(unsigned round)
{
	RoundProgress progress;
	progress.round = round;
	progress.stop_and_copy = stopping_;
	RoundCost cost;
	cost.residency_ns = residency_.snapshot();
	progress.pages_dirty = to_send_.count();

	counters_.reset();
	senders_->begin_round(counters_);
	time_.begin_round(config_.round_rate(stopping_));
	iteration_ = {};
	progress.stopped_mid_pass = send_pass(round, progress, cost);
	end_round(round, progress, cost);
	return progress;
}

bool PreCopy::send_pass(unsigned round, RoundProgress& progress, RoundCost& cost)
{
	for (;;) {
		progress.iterations++;
		if (senders_->run_iteration(iteration_over_))
			return false;
		if (iteration_boundary(round, cost))
			return true;
		iteration_ = {time_.in_round_ms(), time_.round_cpu_ms(),
			      counters_.bytes.load(std::memory_order_relaxed)};
	}
}

// Read by the sender threads before each chunk they take.
bool PreCopy::iteration_time_up() const
{
	if (stopping_ || !iterates_)
		return false;
	if (!rate_limited_iterations_)
		return time_.in_round_ms() - iteration_.model_ms >= config_.iteration_ms;
	return time_.round_cpu_ms() - iteration_.cpu_ms >= config_.iteration_ms ||
	       link_ms(counters_.bytes.load(std::memory_order_relaxed) - iteration_.bytes,
		       config_.max_bandwidth_bytes_per_second) >= kBandwidthWindowMs;
}

// QEMU's migration_iteration_run after every iteration: below the window's threshold,
// ram_save_pending syncs the bitmap and looks again; still below, the VM stops, mid-pass if
// need be, and what the pass had not reached goes in stop-and-copy.
bool PreCopy::iteration_boundary(unsigned round, RoundCost& cost)
{
	const uint64_t start = thread_cpu_ns();
	bool synced = false;
	bool stop_mid_pass = false;
	land_hints();
	if (qemu_convergence_) {
		window_.update(elapsed_ms_ + time_.in_round_ms(),
			       result_.bytes_sent + counters_.bytes.load());
		if (window_.below_threshold(pending_logged())) {
			sync_while_running(round);
			synced = true;
			stop_mid_pass = window_.below_threshold(pending_logged());
			if (!stop_mid_pass)
				start_hint_round();
		}
	}
	cost.sync_ns += thread_cpu_ns() - start;
	if (stop_mid_pass)
		return true;
	// The pass goes on after a sync whose harvest may have folded new writes into pages it
	// has yet to send: it must read them as they are now. By the round's snapshot a page
	// the guest wrote since would still read as absent (zeros), and its write would be spent.
	if (synced)
		cost.residency_ns += residency_.snapshot();
	return false;
}

void PreCopy::end_round(unsigned round, RoundProgress& progress, RoundCost& cost)
{
	{
		const uint64_t start = thread_cpu_ns();
		counters_.bytes.fetch_add(senders_->sync_channels());
		cost.sync_ns += thread_cpu_ns() - start;
	}
	// After the channels' sync: a pipe's reader has copied out the round's last bytes.
	const double critical_ms = time_.round_cpu_ms();
	progress.network_ms = link_ms(counters_.bytes.load(), config_.round_rate(stopping_));
	const double paced_ms = std::max(progress.network_ms, critical_ms);
	time_.end_round();
	// The round's end on the model clock, before the sync's own cost is added.
	time_.advance_to(elapsed_ms_ + paced_ms);

	progress.pages_sent = counters_.pages_sent.load();
	progress.zero_pages = counters_.zero_pages.load();
	progress.pages_skipped_reported = counters_.skipped_reported.load();
	progress.bytes_sent = counters_.bytes.load();
	progress.critical_cpu_ms = critical_ms;
	progress.reader_copy_ms = ns_to_ms(senders_->reader_copy_ns_in_round());
	result_.reader_copy_ms += progress.reader_copy_ms;
	progress.handoff_ms = ns_to_ms(senders_->handoff_ns_in_round());
	result_.handoff_ms += progress.handoff_ms;

	result_.zero_scan_cpu_ms += ns_to_ms(counters_.scan_ns.load());
	result_.copy_cpu_ms += ns_to_ms(counters_.send_ns.load());
	if (uses_reports(config_.strategy) &&
	    config_.reported_pages == ReportedPages::kSkippedUnscanned)
		cost.sync_ns += cost.residency_ns; // how this host learns which pages are absent

	// The pass is done: the bitmap sync ends the round (a mid-pass stop synced already).
	if (!progress.stop_and_copy && !progress.stopped_mid_pass) {
		const uint64_t start = thread_cpu_ns();
		sync_while_running(round);
		cost.sync_ns += thread_cpu_ns() - start;
	}
	// Hints cleared since the last round ended.
	const uint64_t cleared_now = tracker_.pages_cleared_total();
	progress.pages_skipped_hinted = cleared_now - cleared_counted_;
	cleared_counted_ = cleared_now;

	progress.sync_ms = ns_to_ms(cost.sync_ns);
	progress.host_cpu_ms =
		ns_to_ms(counters_.scan_ns.load() + counters_.send_ns.load() + cost.sync_ns);
	progress.round_ms = paced_ms + progress.sync_ms;
	elapsed_ms_ += progress.round_ms;
	progress.elapsed_ms = elapsed_ms_;
	time_.advance_to(elapsed_ms_);
	bitmap_ns_ += cost.sync_ns;
	result_.sync_ms += progress.sync_ms;

	result_.pages_sent += progress.pages_sent;
	result_.zero_pages += progress.zero_pages;
	result_.pages_skipped_reported += progress.pages_skipped_reported;
	result_.pages_skipped_hinted += progress.pages_skipped_hinted;
	result_.bytes_sent += progress.bytes_sent;
	result_.network_ms += progress.network_ms;
	result_.round_log.push_back(progress);
	if (progress.stop_and_copy)
		result_.downtime_ms += progress.round_ms;
}

// The hint round stops before the sync, and a hint the device thread was applying finishes
// first (QEMU's free_page_lock).
void PreCopy::sync_while_running(unsigned round)
{
	stop_hint_round();
	land_hints();
	// Mutant (spec/compare_mutants.tsv): the bulk pass's harvest thrown away.
	bitmap_sync(Guest::kRunning, !(round == 0 && VB_MUTANT(MIG_FIRST_HARVEST_DROPPED)));
}

void PreCopy::bitmap_sync(Guest guest, bool keep_harvest)
{
	result_.bitmap_syncs++;
	std::fill(harvested_.begin(), harvested_.end(), 0);
	if (guest == Guest::kRunning) {
		// The harvest finds every write the guest owed at the sync's model time: a workload
		// thread behind the clock (a loaded host, a sanitizer) would otherwise make its
		// late writes after the sync, and the round would find fewer pages dirty than the
		// rates give. The senders stand still here, so the clock does too.
		if (machine_.workload)
			machine_.workload->pause();
		log_.harvest(harvested_.data());
		if (machine_.workload)
			machine_.workload->resume();
	} else {
		// Nothing writes any more: the bitmap the last harvest retired can be taken too.
		log_.harvest_final(harvested_.data());
	}
	if (keep_harvest)
		to_send_.or_words(harvested_.data());
	for (const PfnRun& range : machine_.always_dirty)
		to_send_.set_range(range.first_pfn, range.wire_pages);
}

// What QEMU's dirty log would count: the kernel area (always_dirty) is re-sent every round
// because the model cannot see whether the guest's driver and device wrote it, but a real
// log shows only what was written; counted, its 4 MiB of (mostly zero) pages would keep an
// idle guest above a threshold measured on zero-page records for ever.
uint64_t PreCopy::pending_logged() const
{
	uint64_t n = to_send_.count();
	for (const PfnRun& range : machine_.always_dirty)
		n -= to_send_.count_range(range.first_pfn, range.wire_pages);
	return n;
}

bool PreCopy::converged(const RoundProgress& round)
{
	if (!qemu_convergence_)
		result_.pending_bytes = double(to_send_.count() * kPage);
	const double expected_downtime_ms = qemu_convergence_
						    ? qemu_expected_downtime_ms()
						    : whole_page_expected_downtime_ms(round);
	result_.converged =
		round.stopped_mid_pass || expected_downtime_ms <= config_.downtime_limit_ms;
	return result_.converged;
}

// QEMU: every dirty page counts 4096 bytes, against the threshold of the last bandwidth
// window, which the round's end may close.
double PreCopy::qemu_expected_downtime_ms()
{
	window_.update(elapsed_ms_, result_.bytes_sent);
	result_.pending_bytes = double(pending_logged() * kPage);
	result_.threshold_bytes = window_.threshold_bytes();
	return window_.expected_downtime_ms(pending_logged());
}

// What a whole page cost: its link time (stop-and-copy is not rate limited), or the CPU a
// whole page took; zero pages do not make the remainder look cheap or dear.
double PreCopy::whole_page_expected_downtime_ms(const RoundProgress& round) const
{
	const uint64_t pending = to_send_.count();
	double per_page_ms = link_ms(kPage + kPageHeaderBytes, config_.link_bytes_per_second);
	if (round.pages_sent != 0)
		per_page_ms = std::max(per_page_ms, ns_to_ms(counters_.send_ns.load()) /
							    double(round.pages_sent));
	return double(pending) * per_page_ms;
}

void PreCopy::stop_and_copy()
{
	// The VM stops (its threads stand still, wall clock: waiting on them is what stopping
	// costs). The workload's writes go on until the VM has stopped: it stands still last,
	// after doing what it owes at that moment (writes the final harvest must find).
	const auto stop_start = std::chrono::steady_clock::now();
	if (machine_.pause_guest)
		machine_.pause_guest();
	const double stop_ms = std::chrono::duration<double, std::milli>(
				       std::chrono::steady_clock::now() - stop_start)
				       .count();
	time_.advance_to(elapsed_ms_ + stop_ms);
	if (machine_.workload)
		machine_.workload->pause();
	const uint64_t start = thread_cpu_ns();
	// Mutant (spec/compare_mutants.tsv): stop-and-copy sends only what was left.
	bitmap_sync(Guest::kStopped, !VB_MUTANT(MIG_STOP_AND_COPY_IGNORES_DIRTY_LOG));
	const uint64_t final_sync_ns = thread_cpu_ns() - start;
	bitmap_ns_ += final_sync_ns;
	result_.vm_stop_ms = stop_ms;
	result_.sync_ms += ns_to_ms(final_sync_ns);
	elapsed_ms_ += stop_ms + ns_to_ms(final_sync_ns);
	time_.advance_to(elapsed_ms_);
	result_.downtime_ms = stop_ms + ns_to_ms(final_sync_ns);
	stopping_ = true;
}

// Before DONE lets the guest reuse its hinted pages; every channel is synced, so the image
// is complete.
void PreCopy::verify()
{
	machine_.memory->attach_dirty_log(nullptr);
	result_.bytes_received = senders_->bytes_received();
	if (!config_.verify) {
		result_.verified = false;
		return;
	}
	compare_destination();
	if (result_.verified && result_.bytes_received != result_.bytes_sent) {
		result_.verified = false;
		result_.error = "the receivers read " + std::to_string(result_.bytes_received) +
				" bytes of the " + std::to_string(result_.bytes_sent) + " sent";
	}
}

// Every page the guest holds in use.
void PreCopy::compare_destination()
{
	residency_.snapshot();
	std::vector<PfnRun> in_use = machine_.pages_in_use();
	// The kernel area changes whenever the guest's driver or the device runs; it can only
	// be compared when the machine really stops them.
	if (machine_.pause_guest)
		in_use.insert(in_use.end(), machine_.always_dirty.begin(),
			      machine_.always_dirty.end());
	const uint64_t ram_pages = machine_.memory->size() / kPage;
	const uint8_t* base = machine_.memory->translate(0, machine_.memory->size());
	std::vector<bool> checked(ram_pages, false); // a bit per page: 32 MiB at 1 TiB
	uint64_t first_bad = UINT64_MAX;
	for (const PfnRun& range : in_use) {
		for (uint64_t page = range.first_pfn; page < range.first_pfn + range.wire_pages;
		     page++) {
			if (page >= ram_pages || checked[page])
				continue;
			checked[page] = true;
			result_.pages_verified++;
			const uint8_t* source =
				residency_.resident(page) ? base + page * kPage : nullptr;
			if (destination_.differs(page, source)) {
				result_.pages_mismatched++;
				first_bad = std::min(first_bad, page);
			}
		}
	}
	result_.verified = result_.pages_mismatched == 0;
	if (!result_.verified)
		result_.error = "verification failed: " + std::to_string(result_.pages_mismatched) +
				" page(s) in use differ at the destination (first: pfn " +
				std::to_string(first_bad) + ")";
}

MigrationResult PreCopy::finish()
{
	// Before DONE: what the guest took back early, while its hints could still be in flight.
	if (machine_.guest_hint_pages_released_early)
		result_.hinted_pages_released_early =
			machine_.guest_hint_pages_released_early() - released_early_start_;
	if (hints_)
		machine_.hints->finish_hinting(); // QEMU: DONE when migration completes
	if (machine_.clock)
		machine_.clock->release();
	else if (machine_.workload)
		machine_.workload->set_clock({});
	tracker_.set_clock({});
	resume_machine();
	if (hints_)
		machine_.set_free_page_observer(nullptr);
	result_.receiver_cpu_ms = senders_->receiver_cpu_ms();
	senders_.reset();

	result_.rounds = unsigned(result_.round_log.size());
	result_.total_ms = elapsed_ms_;
	// Applying queued hints ran on the migration thread inside the syncs; it is hint work.
	result_.bitmap_cpu_ms = ns_to_ms(bitmap_ns_) - tracker_.apply_cpu_ms();
	if (!deferred_hints_)
		result_.hint_landings_ms = tracker_.immediate_landings();
	// The device thread's queue work includes receiving the hints; without that measure,
	// the tracker's own share of it.
	const double device_cpu_ms =
		machine_.device_free_page_cpu_ms
			? machine_.device_free_page_cpu_ms() - device_cpu_start_ms_
			: tracker_.arrival_cpu_ms();
	result_.hint_cpu_ms = device_cpu_ms + tracker_.apply_cpu_ms();
	result_.hinted_pages_received = tracker_.pages_hinted_total();
	result_.reported_pages_received = tracker_.pages_reported_total();
	result_.hinted_pages_after_stop = tracker_.pages_hinted_after_stop();
	result_.host_cpu_ms = result_.zero_scan_cpu_ms + result_.copy_cpu_ms +
			      result_.bitmap_cpu_ms + result_.hint_cpu_ms;
	if (machine_.guest_cpu_ms)
		result_.guest_cpu_ms = machine_.guest_cpu_ms() - guest_cpu_start_ms_;
	return std::move(result_);
}

} // namespace vbsim::migration
