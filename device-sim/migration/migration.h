// SPDX-License-Identifier: GPL-2.0
//
// The live-migration model's public API: one pre-copy migration of a simulated machine's
// guest RAM into a destination image, with a choice of strategy, and what it cost.
//
// How a caller runs one migration:
//
//     MigrationMachine machine;            // filled by the machine builder
//     machine.memory = &guest_ram;         // the source: every write is dirty-logged
//     machine.always_dirty = {{0, kernel_pages}};
//     machine.pages_in_use = [&] { return guest.pages_in_use(); };
//     machine.hints = &hint_control;       // for the hint strategies (device host controls)
//     machine.set_free_page_observer = [&](FreePageEvents* o) { device.set_observer(o); };
//     machine.pause_guest = ...; machine.resume_guest = ...;
//     auto workload = make_workload(workload_config, guest_user_memory);   // workload.h
//     workload->prepare();                 // fresh/freed: the state before migration
//     workload->start();                   // busy: runs while the migration does
//     machine.workload = workload.get();
//     MigrationResult r = migrate(machine, config, [](const RoundProgress& p) { ... });
//     workload->stop();
//     if (!r.verified) -> an error (r.error says why), never a figure
//
// Pre-copy as QEMU does it: round 0 is the bulk pass (every page), each later round sends
// the pages dirtied since the previous bitmap sync, until what is left would go within the
// downtime limit; then the guest is paused and the rest goes (stop-and-copy). After that the
// destination is compared with the source for every page the guest holds in use.
// docs/migration-model.md explains how total time and downtime are computed.
#ifndef VBSIM_MIGRATION_MIGRATION_H
#define VBSIM_MIGRATION_MIGRATION_H

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "memory/pfn_run.h"

namespace vbsim
{

class GuestMemory;
class FreePageEvents;

namespace migration
{

class Workload;

// What the source does with each page it has to send.
enum class Strategy : uint8_t {
	kNone,		   // "none": every page goes whole
	kZeroDetect,	   // "zero-detect": all-zero pages go as a header only (a real scan)
	kHint,		   // "hint": free page hints clear pages from the bitmap; the rest whole
	kReport,	   // "report": pages the guest reported (discarded) are skipped unscanned
	kHintZeroDetect,   // "hint+zero-detect"
	kReportZeroDetect, // "report+zero-detect"
};

// The names above, in this order (tables and --strategy use them).
std::span<const Strategy> all_strategies();
const char* strategy_name(Strategy strategy);
std::optional<Strategy> parse_strategy(std::string_view name);

bool uses_zero_detection(Strategy strategy);
bool uses_hints(Strategy strategy);
bool uses_reports(Strategy strategy);

// Where the zero-page check runs.
enum class ZeroDetectionPlace : uint8_t {
	kSenderThreads, // QEMU 9.0 default (zero-page-detection=multifd): spread over the threads
	kMigrationThread, // older QEMU (zero-page-detection=legacy): one thread checks every page
};

// How the source reads a page the guest never touched (this simulator knows such pages by
// mincore and never reads them, since a read would allocate memory on this machine).
enum class UntouchedPageReads : uint8_t {
	// At memory speed, from a zeroed region larger than the caches: a host whose guest RAM
	// is populated (preallocated, as production hosts with huge pages do, or touched once
	// by firmware or a zeroing guest; the free page hinting v34 thread's page-poison-0 run took as long).
	kPopulatedMemory,
	// From one cache-hot zero region: a host that maps untouched RAM to the shared
	// (huge) zero page; the scan then costs the least it can.
	kSharedZeroPage,
};

// How a host applies free page hints that arrive while the senders run.
enum class HintApplication : uint8_t {
	// Under the bitmap mutex, which QEMU's migration thread holds for each iteration of
	// ram_save_iterate (up to MAX_WAIT = 50 ms of sending) and drops between them
	// (tests/guest/README.md): a hint waits for the next iteration boundary.
	kAtIterationBoundaries,
	// At once, as the device thread receives it: what a host without that lock could do.
	kImmediately,
};

// What the host does with pages the guest reported (discarded).
enum class ReportedPages : uint8_t {
	kScanned,	     // QEMU: it does not know them; they read as zero and are scanned (or sent)
	kSkippedUnscanned, // known absent (the model reads residency) and never touched
};

// What a sender channel writes into.
enum class ChannelStream : uint8_t {
	// A Unix socket pair (the `ideal` host's and qemu-7.2's multifd channels): the link's
	// pacing is the only wait counted.
	kSocketPair,
	// QEMU's `exec:` stream (the calibration's and the seeds' `exec:cat > /dev/null`): a
	// pipe of the kernel's default capacity, 64 KiB. The writer sleeps whenever it is
	// full until the reader has copied it out, once per 64 KiB of stream: that hand-off
	// (the reader's copy and the wake-ups between them, measured, channel.h) is on the
	// writer's critical path.
	kPipe,
	// QEMU's `tcp:` stream to a destination (qemu-10's multifd channels, or its one stream
	// with --stream-to tcp): a loopback TCP connection, whose hand-off to the reader is on
	// the writer's critical path as a pipe's is.
	kTcp,
};

// Whether a stream's writer is charged for waiting on its reader (RoundProgress::handoff_ms).
inline bool waits_on_reader(ChannelStream stream)
{
	return stream != ChannelStream::kSocketPair;
}

// When pre-copy stops.
enum class ConvergenceRule : uint8_t {
	// QEMU (migration_iteration_run, after every iteration): pending = dirty pages x 4096
	// bytes, stop when it is below the measured bandwidth (bytes sent over the last window of
	// at least 100 ms) x downtime limit, mid-pass if need be.
	kQemuPendingOverBandwidth,
	// The pages left, each costing what a whole page cost in the last round (or its link
	// time): zero pages do not make the remainder look cheap or dear.
	kWholePageCost,
};

// Link bandwidth in bytes per second; kUnlimitedLink: the link is never the limit.
inline constexpr double kUnlimitedLink = std::numeric_limits<double>::infinity();
// What `bytes` take on the link, in ms (0 on an unlimited link). The pacing model: a link
// is a rate on model time, never a sleep.
inline double link_ms(uint64_t bytes, double link_bytes_per_second)
{
	return link_bytes_per_second == kUnlimitedLink ? 0.0
						       : double(bytes) * 1000.0 / link_bytes_per_second;
}

// Defaults are QEMU's where QEMU has one (migration/options.c): downtime limit 300 ms,
// 8-byte page headers, 50 ms iterations. The default host is Debian 12's QEMU 7.2
// (host_profile.h gives the profiles), the default link 10 Gbit/s: the link most hosts
// migrate over (docs/migration-model.md says why); kQemuDefaultThrottle is QEMU's
// max-bandwidth default (128 MiB/s), a throttle users raise.
struct MigrationConfig {
	static constexpr double kTenGigabitLink = 10e9 / 8; // bytes per second
	static constexpr double kQemuDefaultThrottle = 128.0 * (1 << 20);

	Strategy strategy = Strategy::kZeroDetect;
	double link_bytes_per_second = kTenGigabitLink; // kUnlimitedLink allowed
	// QEMU's max-bandwidth: a rate limit the source puts on its own stream while the guest
	// runs, lifted for stop-and-copy (migration_completion sets it to INT64_MAX), so the
	// last round goes at what the link and the CPU allow. The link, a physical limit,
	// paces every round. kUnlimitedLink: no limit (libvirt's default).
	double max_bandwidth_bytes_per_second = kUnlimitedLink;
	// Every page sent carries its address and flags (QEMU: one be64 per page, channel.h);
	// a zero page is that header alone plus zero_page_extra_bytes (QEMU's legacy stream
	// sends the fill byte; multifd sends only the offset: 0).
	uint32_t zero_page_extra_bytes = 1;
	// Pre-copy stops once the pages left would go within this (QEMU downtime-limit: 300 ms).
	double downtime_limit_ms = 300;
	// Sender channels, each a thread writing into its own socket that a receiver thread
	// drains into the destination (QEMU: 1 = the migration thread's stream, more =
	// multifd channels). Their CPU time is measured per thread.
	unsigned sender_threads = 1;
	ZeroDetectionPlace zero_detection_place = ZeroDetectionPlace::kMigrationThread;
	ChannelStream stream = ChannelStream::kSocketPair;
	HintApplication hint_application = HintApplication::kAtIterationBoundaries;
	double iteration_ms = 50; // QEMU's MAX_WAIT
	ReportedPages reported_pages = ReportedPages::kScanned;
	ConvergenceRule convergence = ConvergenceRule::kQemuPendingOverBandwidth;
	UntouchedPageReads untouched_page_reads = UntouchedPageReads::kPopulatedMemory;
	// A guest that dirties faster than the link never converges; QEMU then goes on forever
	// (or auto-converges by throttling). The model forces stop-and-copy after this many
	// rounds and reports converged = false.
	unsigned max_rounds = 30;
	// Compare the destination with the source after the run (always on outside benchmarks
	// of the engine itself; a run that fails it is an error).
	bool verify = true;

	// What paces a round: the link, and while the guest runs also max-bandwidth.
	double round_rate(bool stop_and_copy) const
	{
		return stop_and_copy
			       ? link_bytes_per_second
			       : std::min(link_bytes_per_second, max_bandwidth_bytes_per_second);
	}
};

// The model clock, in ms, for a workload to pace itself by from before it starts: it reads
// 0 until a migration drives it, model time while migrate() does, and stands still at the
// last reading between migrations, never going back. Nothing is dirtied in real time
// outside the model's clock.
class ModelClock
{
public:
	double now_ms() const;
	// For migrate(): from now on the clock reads `model_now_ms` (model time, which must
	// start where the clock stands).
	void drive(std::function<double()> model_now_ms);
	// The clock stands still at the model's last reading.
	void release();

private:
	mutable std::mutex mutex_;
	std::function<double()> model_;
	double stood_ms_ = 0;
};

// One round as it finished (round 0 is the bulk pass; the last is stop-and-copy).
struct RoundProgress {
	unsigned round = 0;
	bool stop_and_copy = false;
	uint64_t pages_dirty = 0;	     // pages the round started with (after hints so far)
	uint64_t pages_sent = 0;	     // pages that went whole
	uint64_t zero_pages = 0;	     // pages that went as a header only
	uint64_t pages_skipped_hinted = 0;   // cleared by hints before the sender got to them
	uint64_t pages_skipped_reported = 0; // known discarded, not scanned
	uint64_t bytes_sent = 0;
	double network_ms = 0; // bytes_sent over the link
	double host_cpu_ms = 0; // measured: zero scans, sends, bitmap work, hint handling
	// The round's CPU critical path: the busiest sender thread (its CPU time, plus on a
	// kPipe stream its reader's copy out of the pipe, serial with it), or with zero
	// detection in the migration thread the whole scan if that is longer (measured thread
	// CPU time).
	double critical_cpu_ms = 0;
	// Of which the hand-off to kPipe and kTcp streams' readers (summed over channels): what each
	// writer measured waiting for its reader, at least the reader's copy out of the pipe.
	double handoff_ms = 0;
	// Of that, the readers' copy (their CPU time in reads).
	double reader_copy_ms = 0;
	double sync_ms = 0;	// bitmap sync after the round, applying hints (migration thread)
	double round_ms = 0;	// max(network_ms, critical_cpu_ms) + sync_ms
	double elapsed_ms = 0;	// total time so far
	unsigned iterations = 0; // QEMU iterations (iteration_ms of model time each)
	// QEMU's convergence rule stopped the VM before this round's pass was done: what it had
	// not reached went in stop-and-copy.
	bool stopped_mid_pass = false;
};

struct MigrationResult {
	static constexpr unsigned kRateRounds = 5;
	Strategy strategy = Strategy::kNone;
	uint64_t ram_bytes = 0;
	uint64_t bytes_sent = 0;
	uint64_t pages_sent = 0; // whole pages
	uint64_t zero_pages = 0; // header-only pages
	uint64_t pages_skipped_hinted = 0;
	uint64_t pages_skipped_reported = 0;
	uint64_t hinted_pages_received = 0; // hints the device passed on while rounds ran
	uint64_t reported_pages_received = 0;
	// The two things a hint used after STOP needs to lose a page (spec/compare_mutants.tsv,
	// DEV_FPH05): hints of a round that reached the device after the round was stopped, and
	// hinted pages the guest took back before DONE (its shrinker), in pages.
	uint64_t hinted_pages_after_stop = 0;
	uint64_t hinted_pages_released_early = 0;

	// Host CPU the migration really spent (thread CPU time, all sender threads summed), and
	// its parts.
	double host_cpu_ms = 0;
	double zero_scan_cpu_ms = 0;
	double copy_cpu_ms = 0;	  // sending: headers and pages written into the channels' sockets
	// The receivers' CPU copying kPipe streams out (cat's work; in total_ms, not in
	// host_cpu_ms, which is the source's).
	double reader_copy_ms = 0;
	// The whole hand-off to kPipe and kTcp streams' readers on the critical path (RoundProgress):
	// the reader's copy and, on a host with an idle CPU, the wake-ups between the two ends.
	double handoff_ms = 0;
	double bitmap_cpu_ms = 0; // dirty log harvest and bitmap scans
	// Hints: the device thread's free page queue work (when the machine measures it) and
	// applying hints to the bitmap, in thread CPU time.
	double hint_cpu_ms = 0;
	// The destination's receiver threads (reading the sockets, writing the image); not in
	// host_cpu_ms, which is the source's.
	double receiver_cpu_ms = 0;
	// Guest CPU spent hinting or reporting (from the simulated guest; 0 when unknown).
	double guest_cpu_ms = 0;

	unsigned rounds = 0; // including bulk pass and stop-and-copy
	// Dirty bitmap syncs, as QEMU's dirty-sync-count counts them: the setup's, every one
	// while the guest runs (at the end of a pass, and mid-pass whenever what is left falls
	// under QEMU's threshold), and the final one with the VM stopped.
	unsigned bitmap_syncs = 0;
	bool converged = false; // false: max_rounds forced the stop
	// Why a migration did or did not converge. What the workload wrote while the guest ran,
	// per second of model time (its pages written over the time it ran; 0 without a
	// workload). At the last sync while the guest ran, what the convergence rule counted as
	// dirty (QEMU: the logged pages x 4096, zero or not) and, for QEMU's rule, what it let go
	// (the bandwidth of its last window of at least 100 ms x the downtime limit; 0 for the
	// other rule or before a window closed): QEMU goes on iterating while the first stays
	// above the second. And what the last kRateRounds rounds the guest ran after the bulk
	// pass sent per second of their time (QEMU's "mbps"; 0 without such a round).
	double dirty_bytes_per_second = 0;
	double pending_bytes = 0;
	double threshold_bytes = 0;
	double sent_bytes_per_second = 0;
	double network_ms = 0;
	double total_ms = 0;
	double downtime_ms = 0;
	// Fixed costs, measured, inside total_ms: setup (dirty log on, bitmap set, first sync),
	// every bitmap sync, stopping the VM (the guest's and device's threads, wall clock).
	// Device state is not modelled: the machine's one device is the balloon.
	double setup_ms = 0;
	double sync_ms = 0;
	double vm_stop_ms = 0;
	// Model time (since the migration started) at which hints cleared pages, one entry per
	// application (an iteration boundary, or each hint when applied at once).
	std::vector<double> hint_landings_ms;
	uint64_t bytes_received = 0; // what the receivers read from the channels

	bool verified = false; // destination == source on every page in use
	uint64_t pages_verified = 0;
	uint64_t pages_mismatched = 0;
	std::string error; // why the run is not a figure (verification failed, bad machine...)

	std::vector<RoundProgress> round_log;
};

using ProgressCallback = std::function<void(const RoundProgress&)>;

// Host controls of the free page hint (the device's cmd id register), as QEMU's balloon
// drives them from migration notifiers: a new round after each bitmap sync while the guest
// runs, STOP before each sync, DONE when migration completes or fails.
class FreePageHintControl
{
public:
	virtual ~FreePageHintControl() = default;
	// Writes a new command id; returns it (the device echoes it in hint_round_started).
	virtual uint32_t start_hint_round() = 0;
	virtual void stop_hint_round() = 0; // cmd id STOP
	virtual void finish_hinting() = 0;  // cmd id DONE: the guest may reuse hinted pages
};

// What the model needs from a machine (the machine builder fills this).
struct MigrationMachine {
	GuestMemory* memory = nullptr; // the source RAM
	// Written by the guest without passing GuestMemory's write helpers (the kernel area:
	// rings, the core's own buffers); sent in every round and at stop-and-copy.
	std::vector<PfnRun> always_dirty;
	// Pages the guest holds in use at the moment of the call (verified after the run).
	std::function<std::vector<PfnRun>()> pages_in_use;
	// For the hint strategies: the device's host controls and where its events go.
	FreePageHintControl* hints = nullptr;
	std::function<void(FreePageEvents*)> set_free_page_observer;
	// Free page reporting happens on the guest's own schedule; a machine that has it wires
	// set_free_page_observer too (pages_reported) and the model also reads residency.
	// Stop-and-copy: the guest and its devices stand still between these two (no driver,
	// device or workload thread writes guest RAM). With them, verification covers the
	// always-dirty ranges too; without them, only pages_in_use (a machine whose driver and
	// device threads cannot be stopped leaves them empty). The workload below is paused
	// either way.
	std::function<void()> pause_guest;
	std::function<void()> resume_guest;
	// Guest CPU spent on hinting and reporting so far, in ms (optional).
	std::function<double()> guest_cpu_ms;
	// Hinted pages the guest's shrinker has taken back before DONE so far (optional).
	std::function<uint64_t()> guest_hint_pages_released_early;
	// The device thread's CPU time on the free page queue so far, in ms (optional).
	std::function<double()> device_free_page_cpu_ms;
	// The clock the workload paces itself by (optional; migrate() drives it while it
	// runs). Without one, migrate() sets the workload's clock to its own.
	ModelClock* clock = nullptr;
	Workload* workload = nullptr; // optional: paused with the guest
};

// Runs one migration. Never throws for a data loss: result.verified is false and
// result.error says which pages differ. Throws std::invalid_argument for a machine that
// lacks what the strategy needs (no hint control for a hint strategy).
MigrationResult migrate(MigrationMachine& machine, const MigrationConfig& config,
			const ProgressCallback& progress = {});

} // namespace migration
} // namespace vbsim

#endif
