// SPDX-License-Identifier: GPL-2.0
//
// The pre-copy engine. See migration.h for the API and docs/migration-model.md for the
// model: what is measured, what is computed, and why.
#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <sys/mman.h>
#include <time.h>

#include "memory/guest_memory.h"
#include "migration/destination_image.h"
#include "migration/dirty_log.h"
#include "migration/free_page_tracker.h"
#include "migration/migration.h"
#include "migration/page_bitmap.h"
#include "migration/workload.h"
#include "migration/zero_page.h"
#include "vballoon/support/mutant.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kPageBytes;
// A sender claims this many bitmap words at a time: 512 pages, 2 MiB (a multifd packet
// holds 128 pages by default; bigger claims keep the clock reads per page negligible).
constexpr uint64_t kChunkWords = 8;
constexpr uint64_t kChunkPages = kChunkWords * 64;
// Larger than the last-level cache, so reading it runs at memory speed.
constexpr uint64_t kPopulatedZeroPages = (256ull << 20) / 4096;

uint64_t thread_cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// Which source pages are backed by memory now. A page that is not reads as zero; on a
// real host reading it maps the shared zero page, here (docs/machine-limits.md) it would
// allocate a page, so the sender reads a resident zero buffer instead: the same bytes and
// the same cache behaviour as the host's zero page. With the report strategies the host
// uses this to skip absent pages, and pays for the mincore calls.
class Residency
{
public:
	explicit Residency(const GuestMemory& memory) : memory_(memory), resident_(memory.size() / kPage) {}

	// Returns the host CPU the snapshot took, in ns.
	uint64_t snapshot()
	{
		const uint64_t start = thread_cpu_ns();
		uint8_t* base = memory_.translate(0, memory_.size());
		if (mincore(base, memory_.size(), resident_.data()) != 0)
			throw std::system_error(errno, std::generic_category(), "mincore on guest RAM");
		return thread_cpu_ns() - start;
	}
	bool resident(uint64_t page) const { return resident_[page] & 1; }

private:
	const GuestMemory& memory_;
	std::vector<unsigned char> resident_;
};

struct RoundCounters {
	std::atomic<uint64_t> pages_sent{0};
	std::atomic<uint64_t> zero_pages{0};
	std::atomic<uint64_t> skipped_reported{0};
	std::atomic<uint64_t> bytes{0};
	std::atomic<uint64_t> scan_ns{0};
	std::atomic<uint64_t> copy_ns{0};

	void reset()
	{
		for (auto* counter : {&pages_sent, &zero_pages, &skipped_reported, &bytes, &scan_ns, &copy_ns})
			counter->store(0, std::memory_order_relaxed);
	}
};

// The sender threads: each round they take chunks of the to-send bitmap until none is
// left. Their CPU time is measured per thread with the thread clock, so other jobs on the
// machine do not inflate it.
class Senders
{
public:
	Senders(const MigrationConfig& config, GuestMemory& memory, PageBitmap& to_send,
		DestinationImage& destination, const Residency& residency)
		: config_(config), memory_(memory), to_send_(to_send), destination_(destination),
		  residency_(residency), base_(memory.translate(0, memory.size())),
		  zero_pages_(config.untouched_page_reads == UntouchedPageReads::kSharedZeroPage
				      ? kChunkPages
				      : std::min(kPopulatedZeroPages, memory.size() / kPage)),
		  per_thread_cpu_ns_(std::max(1u, config.sender_threads))
	{
		void* map = mmap(nullptr, zero_pages_ * kPage, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (map == MAP_FAILED)
			throw std::system_error(errno, std::generic_category(), "mapping the zero region");
		zero_block_ = static_cast<uint8_t*>(map);
		madvise(zero_block_, zero_pages_ * kPage, MADV_HUGEPAGE);
		// Populate it now (a write fault per page), so the senders read memory.
		std::memset(zero_block_, 0, zero_pages_ * kPage);
		for (unsigned i = 0; i < std::max(1u, config.sender_threads); i++)
			threads_.emplace_back([this, i] { run(i); });
	}

	~Senders()
	{
		{
			std::lock_guard lock(mutex_);
			quit_ = true;
		}
		wake_.notify_all();
		for (std::thread& thread : threads_)
			thread.join();
		munmap(zero_block_, zero_pages_ * kPage);
	}

	// Sends every page set in the bitmap; returns when all senders are done.
	void run_round(RoundCounters& counters)
	{
		std::unique_lock lock(mutex_);
		counters_ = &counters;
		cursor_.store(0, std::memory_order_relaxed);
		for (auto& cpu : per_thread_cpu_ns_)
			cpu.store(0, std::memory_order_relaxed);
		busy_ = threads_.size();
		generation_++;
		wake_.notify_all();
		done_.wait(lock, [this] { return busy_ == 0; });
	}

	// Largest CPU time of one sender in the round so far, in ns (the round's critical path
	// when each sender has a core, as QEMU's multifd threads would).
	uint64_t max_thread_cpu_ns() const
	{
		uint64_t most = 0;
		for (const auto& cpu : per_thread_cpu_ns_)
			most = std::max(most, cpu.load(std::memory_order_relaxed));
		return most;
	}

private:
	void run(unsigned index)
	{
		std::vector<uint64_t> pages;
		pages.reserve(kChunkPages);
		std::vector<uint8_t> kind(kChunkPages);
		std::unique_ptr<uint8_t[]> staging(new uint8_t[kChunkPages * kPage]);
		uint64_t seen_generation = 0;
		for (;;) {
			RoundCounters* counters;
			{
				std::unique_lock lock(mutex_);
				wake_.wait(lock, [&] { return quit_ || generation_ != seen_generation; });
				if (quit_)
					return;
				seen_generation = generation_;
				counters = counters_;
			}
			for (;;) {
				const uint64_t first_word = cursor_.fetch_add(kChunkWords, std::memory_order_relaxed);
				if (first_word >= to_send_.words())
					break;
				send_chunk(index, first_word, pages, kind, staging.get(), *counters);
			}
			std::lock_guard lock(mutex_);
			if (--busy_ == 0)
				done_.notify_all();
		}
	}

	enum PageKind : uint8_t { kWhole, kZero, kAbsent };

	const uint8_t* source_page(uint64_t page) const
	{
		return residency_.resident(page) ? base_ + page * kPage
						 : zero_block_ + (page % zero_pages_) * kPage;
	}

	void send_chunk(unsigned index, uint64_t first_word, std::vector<uint64_t>& pages,
			std::vector<uint8_t>& kind, uint8_t* staging, RoundCounters& counters)
	{
		// Take the chunk's bits now: a hint that lands after this is too late for them.
		pages.clear();
		const uint64_t end_word = std::min(first_word + kChunkWords, to_send_.words());
		for (uint64_t w = first_word; w < end_word; w++)
			for (uint64_t bits = to_send_.take_word(w); bits != 0; bits &= bits - 1)
				pages.push_back(w * 64 + std::countr_zero(bits));
		if (pages.empty())
			return;

		const bool zero_detect = uses_zero_detection(config_.strategy);
		const bool skip_absent = uses_reports(config_.strategy);
		const uint64_t t0 = thread_cpu_ns();
		for (size_t i = 0; i < pages.size(); i++) {
			if (skip_absent && !residency_.resident(pages[i]))
				kind[i] = kAbsent;
			else if (zero_detect && page_is_zero(source_page(pages[i])))
				kind[i] = kZero;
			else
				kind[i] = kWhole;
		}
		const uint64_t t1 = thread_cpu_ns();
		size_t staged = 0;
		for (size_t i = 0; i < pages.size(); i++)
			if (kind[i] == kWhole)
				copy_guest_page(staging + (staged++) * kPage, source_page(pages[i]));
		const uint64_t t2 = thread_cpu_ns();
		// The destination's side: not the source's CPU, so not timed.
		uint64_t whole = 0, zero = 0, absent = 0;
		staged = 0;
		for (size_t i = 0; i < pages.size(); i++) {
			switch (kind[i]) {
			case kWhole: destination_.receive_page(pages[i], staging + (staged++) * kPage); whole++; break;
			case kZero: destination_.receive_zero_page(pages[i]); zero++; break;
			default: absent++; break;
			}
		}
		counters.pages_sent.fetch_add(whole, std::memory_order_relaxed);
		counters.zero_pages.fetch_add(zero, std::memory_order_relaxed);
		counters.skipped_reported.fetch_add(absent, std::memory_order_relaxed);
		counters.bytes.fetch_add(whole * (kPage + config_.page_header_bytes) +
						 zero * (config_.page_header_bytes + config_.zero_page_extra_bytes),
					 std::memory_order_relaxed);
		counters.scan_ns.fetch_add(t1 - t0, std::memory_order_relaxed);
		counters.copy_ns.fetch_add(t2 - t1, std::memory_order_relaxed);
		per_thread_cpu_ns_[index].fetch_add(t2 - t0, std::memory_order_relaxed);
	}

	const MigrationConfig& config_;
	GuestMemory& memory_;
	PageBitmap& to_send_;
	DestinationImage& destination_;
	const Residency& residency_;
	uint8_t* base_;
	const uint64_t zero_pages_;
	uint8_t* zero_block_ = nullptr;
	std::vector<std::atomic<uint64_t>> per_thread_cpu_ns_;
	std::vector<std::thread> threads_;
	std::atomic<uint64_t> cursor_{0};

	std::mutex mutex_;
	std::condition_variable wake_;
	std::condition_variable done_;
	uint64_t generation_ = 0;
	size_t busy_ = 0;
	bool quit_ = false;
	RoundCounters* counters_ = nullptr;
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
	if (config.link_bytes_per_second <= 0 || config.downtime_limit_ms <= 0)
		throw std::invalid_argument("migration: link bandwidth and downtime limit must be positive");
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

	MigrationResult result;
	result.strategy = config.strategy;
	result.ram_bytes = memory.size();
	const double guest_cpu_start = machine.guest_cpu_ms ? machine.guest_cpu_ms() : 0;

	DirtyLog log(ram_pages);
	PageBitmap to_send(ram_pages);
	DestinationImage destination(memory.size());
	Residency residency(memory);
	FreePageTracker tracker(to_send, memory.size());
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

	// The model clock, which a running workload paces itself by.
	std::atomic<double> clock_base_ms{0};

	// Setup (QEMU's ram_save_setup): dirty logging on and every page to send, with the
	// guest still for the instant the log is attached.
	uint64_t bitmap_ns = 0;
	pause();
	{
		const uint64_t start = thread_cpu_ns();
		memory.attach_dirty_log(&log);
		to_send.set_all();
		bitmap_ns += thread_cpu_ns() - start;
	}
	if (hints)
		machine.set_free_page_observer(&tracker);
	resume();

	Senders senders(config, memory, to_send, destination, residency);
	// One set of counters for every round (reset at its start), so the workload's clock can
	// read them at any time.
	RoundCounters counters;
	std::atomic<bool> round_running{false};
	auto model_now_ms = [&]() -> double {
		double in_round = 0;
		if (round_running.load(std::memory_order_acquire)) {
			const double network = double(counters.bytes.load(std::memory_order_relaxed)) * 1000.0 /
					       config.link_bytes_per_second;
			in_round = std::max(network, ns_to_ms(senders.max_thread_cpu_ns()));
		}
		return clock_base_ms.load(std::memory_order_acquire) + in_round;
	};
	if (machine.workload)
		machine.workload->set_clock(model_now_ms);

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

	double elapsed_ms = ns_to_ms(bitmap_ns);
	start_hint_round(); // after the first bitmap sync, as QEMU's balloon does
	double last_cost_per_page_ms = 0;
	bool stopping = false;
	uint64_t cleared_counted = 0;

	for (unsigned round = 0;; round++) {
		RoundProgress p;
		p.round = round;
		p.stop_and_copy = stopping;
		uint64_t round_bitmap_ns = 0;
		uint64_t residency_ns = residency.snapshot();
		p.pages_dirty = to_send.count();

		counters.reset();
		clock_base_ms.store(elapsed_ms, std::memory_order_release);
		round_running.store(true, std::memory_order_release);
		senders.run_round(counters);
		const uint64_t critical_sender_ns = senders.max_thread_cpu_ns();
		round_running.store(false, std::memory_order_release);

		p.pages_sent = counters.pages_sent.load();
		p.zero_pages = counters.zero_pages.load();
		p.pages_skipped_reported = counters.skipped_reported.load();
		// Hints cleared since the last round ended (some land between rounds).
		const uint64_t cleared_now = tracker.pages_cleared_total();
		p.pages_skipped_hinted = cleared_now - cleared_counted;
		cleared_counted = cleared_now;
		p.bytes_sent = counters.bytes.load();
		p.network_ms = double(p.bytes_sent) * 1000.0 / config.link_bytes_per_second;

		// Where zero detection runs decides the round's critical path: spread over the
		// senders (multifd) or all on the one migration thread (legacy).
		double sender_ms = ns_to_ms(critical_sender_ns);
		if (uses_zero_detection(config.strategy) &&
		    config.zero_detection_place == ZeroDetectionPlace::kMigrationThread)
			sender_ms = std::max(sender_ms, ns_to_ms(counters.scan_ns.load()));

		result.zero_scan_cpu_ms += ns_to_ms(counters.scan_ns.load());
		result.copy_cpu_ms += ns_to_ms(counters.copy_ns.load());
		if (uses_reports(config.strategy))
			round_bitmap_ns += residency_ns; // how the host learns which pages are absent

		const bool final_round = stopping;
		// Bitmap sync (QEMU's migration_bitmap_sync): the hint round stops before it.
		if (!final_round) {
			stop_hint_round();
			const uint64_t start = thread_cpu_ns();
			std::fill(harvested.begin(), harvested.end(), 0);
			log.harvest(harvested.data());
			// Mutant (spec/compare_mutants.tsv): the bulk pass's harvest thrown away.
			if (!(round == 0 && VB_MUTANT(MIG_FIRST_HARVEST_DROPPED)))
				to_send.or_words(harvested.data());
			for (const PageRange& range : machine.always_dirty)
				to_send.set_range(range.first_page, range.pages);
			round_bitmap_ns += thread_cpu_ns() - start;
		}

		p.host_cpu_ms = ns_to_ms(counters.scan_ns.load() + counters.copy_ns.load() + round_bitmap_ns);
		p.round_ms = std::max(p.network_ms, sender_ms) + ns_to_ms(round_bitmap_ns);
		elapsed_ms += p.round_ms;
		p.elapsed_ms = elapsed_ms;
		clock_base_ms.store(elapsed_ms, std::memory_order_release);
		bitmap_ns += round_bitmap_ns;

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

		// Would what is left go within the downtime limit? QEMU estimates from the
		// bandwidth it measured; the model from what each page cost in this round.
		const uint64_t processed = p.pages_sent + p.zero_pages + p.pages_skipped_reported;
		if (processed != 0)
			last_cost_per_page_ms = std::max(p.round_ms / double(processed),
							 double(kPage + config.page_header_bytes) * 1000.0 /
								 config.link_bytes_per_second);
		const uint64_t pending = to_send.count();
		const double expected_downtime_ms = double(pending) * last_cost_per_page_ms;
		result.converged = expected_downtime_ms <= config.downtime_limit_ms;
		if (result.converged || round + 1 >= config.max_rounds) {
			// Stop-and-copy: the guest stands still; the last harvest takes both bitmaps.
			pause();
			const uint64_t start = thread_cpu_ns();
			std::fill(harvested.begin(), harvested.end(), 0);
			log.harvest_final(harvested.data());
			// Mutant (spec/compare_mutants.tsv): stop-and-copy sends only what was left.
			if (!VB_MUTANT(MIG_STOP_AND_COPY_IGNORES_DIRTY_LOG))
				to_send.or_words(harvested.data());
			for (const PageRange& range : machine.always_dirty)
				to_send.set_range(range.first_page, range.pages);
			const uint64_t final_sync_ns = thread_cpu_ns() - start;
			bitmap_ns += final_sync_ns;
			elapsed_ms += ns_to_ms(final_sync_ns);
			result.downtime_ms = ns_to_ms(final_sync_ns);
			stopping = true;
		} else {
			start_hint_round();
		}
	}

	memory.attach_dirty_log(nullptr);
	// The destination is compared while the guest still stands still, before DONE lets
	// the guest reuse its hinted pages.
	if (config.verify)
		verify(machine, destination, residency, result);
	else
		result.verified = false;
	if (hints)
		machine.hints->finish_hinting(); // QEMU: DONE when migration completes
	if (machine.workload)
		machine.workload->set_clock({});
	resume();
	if (hints)
		machine.set_free_page_observer(nullptr);

	result.rounds = unsigned(result.round_log.size());
	result.total_ms = elapsed_ms;
	result.bitmap_cpu_ms = ns_to_ms(bitmap_ns);
	result.hint_cpu_ms = tracker.handling_ms();
	result.hinted_pages_received = tracker.pages_hinted_total();
	result.reported_pages_received = tracker.pages_reported_total();
	result.host_cpu_ms = result.zero_scan_cpu_ms + result.copy_cpu_ms + result.bitmap_cpu_ms + result.hint_cpu_ms;
	if (machine.guest_cpu_ms)
		result.guest_cpu_ms = machine.guest_cpu_ms() - guest_cpu_start;
	return result;
}

} // namespace vbsim::migration
