// SPDX-License-Identifier: GPL-2.0
#include <algorithm>
#include <chrono>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "migration/channel.h"
#include "migration/destination_image.h"
#include "migration/host_profile.h"
#include "migration/migration.h"
#include "migration/workload.h"
#include "small_machine.h"
#include "small_workload.h"
#include "transport/thread_cpu_time.h"

namespace vbsim::migration
{
namespace
{

using testing::SmallMachine;

constexpr uint64_t kRam = 48ull << 20;

WorkloadConfig small_workload(WorkloadKind kind)
{
	return testing::small_workload(kind, 200.0);
}

// Most tests here are about the engine's mechanics, on the `ideal` host (hints clear pages
// as they arrive, reported pages are skipped); the QEMU profiles have their own tests.
MigrationConfig config_for(Strategy strategy, const char* host = "ideal")
{
	MigrationConfig config;
	apply_host_profile(*find_host_profile(host), 0, config);
	config.strategy = strategy;
	return config;
}

TEST(StrategyNames, RoundTripAndRefuseUnknown)
{
	for (Strategy s : all_strategies())
		EXPECT_EQ(parse_strategy(strategy_name(s)), s);
	EXPECT_EQ(all_strategies().size(), 6u);
	EXPECT_FALSE(parse_strategy("hint+report").has_value());
	EXPECT_EQ(parse_workload("busy"), WorkloadKind::kBusy);
	EXPECT_FALSE(parse_workload("idle").has_value());
}

TEST(Migration, NoneSendsEveryPageWholeAndVerifies)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationResult r = migrate(machine, config_for(Strategy::kNone));
	ASSERT_TRUE(r.verified) << r.error;
	const uint64_t pages = kRam / 4096;
	// The bulk pass sends every page; the stop-and-copy sends at least the kernel area.
	EXPECT_GE(r.pages_sent, pages + SmallMachine::kKernelPages);
	EXPECT_EQ(r.zero_pages, 0u);
	EXPECT_EQ(r.round_log.front().pages_sent, pages);
	// Every page is a header and its bytes; each round ends in one sync record per channel.
	EXPECT_EQ(r.bytes_sent, r.pages_sent * (4096 + 8) + r.rounds * config_for(Strategy::kNone).sender_threads * 8);
	EXPECT_EQ(r.bytes_received, r.bytes_sent);
	EXPECT_GE(r.rounds, 2u);
	EXPECT_TRUE(r.round_log.back().stop_and_copy);
	EXPECT_GT(r.pages_verified, (4ull << 20) / 4096);
}

TEST(Migration, ZeroDetectionSendsUntouchedPagesAsHeaders)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationResult r = migrate(machine, config_for(Strategy::kZeroDetect));
	ASSERT_TRUE(r.verified) << r.error;
	const RoundProgress& bulk = r.round_log.front();
	// Whole pages in the bulk pass: exactly the working set and the kernel area.
	EXPECT_EQ(bulk.pages_sent, (4ull << 20) / 4096 + SmallMachine::kKernelPages);
	EXPECT_EQ(bulk.zero_pages, kRam / 4096 - bulk.pages_sent);
	EXPECT_GT(r.zero_scan_cpu_ms, 0);
}

TEST(Migration, HintsClearFreePagesBeforeTheSenderReachesThem)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFreed), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationResult zero = migrate(machine, config_for(Strategy::kZeroDetect));
	MigrationResult hint = migrate(machine, config_for(Strategy::kHintZeroDetect));
	ASSERT_TRUE(zero.verified) << zero.error;
	ASSERT_TRUE(hint.verified) << hint.error;
	// Freed pages are not zero: zero detection must send them, hints skip them.
	EXPECT_GT(hint.pages_skipped_hinted, (kRam / 4096) / 2);
	EXPECT_LT(hint.bytes_sent * 5, zero.bytes_sent);
	EXPECT_GE(m.hinter.rounds_started(), 1u);
	EXPECT_EQ(m.hinter.finished(), 1u);
	EXPECT_EQ(m.allocator.counts().used, (4ull << 20) / 4096); // DONE gave every hinted page back
}

TEST(Migration, HintsFromTheGuestsOwnThreadRaceTheBulkPassAndStillVerify)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFreed), *m.user_memory);
	workload->prepare();
	DirectHinter racing(m.allocator, false);
	auto machine = m.machine(*workload);
	machine.hints = &racing;
	machine.set_free_page_observer = [&](FreePageEvents* o) { racing.set_observer(o); };
	machine.guest_cpu_ms = [&] { return racing.guest_cpu_ms(); };
	MigrationResult r = migrate(machine, config_for(Strategy::kHintZeroDetect));
	ASSERT_TRUE(r.verified) << r.error;
	EXPECT_GE(racing.rounds_started(), 1u);
	EXPECT_EQ(racing.finished(), 1u);
	EXPECT_EQ(racing.pages_held(), 0u);
	EXPECT_LE(r.pages_skipped_hinted, r.hinted_pages_received);
}

TEST(Migration, ReportedPagesAreSkippedWithoutAScan)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFreed), *m.user_memory);
	workload->prepare();
	const uint64_t reported = m.report_free_pages(nullptr);
	ASSERT_GT(reported, 0u);
	auto machine = m.machine(*workload);
	MigrationResult r = migrate(machine, config_for(Strategy::kReport));
	ASSERT_TRUE(r.verified) << r.error;
	EXPECT_GE(r.round_log.front().pages_skipped_reported, reported);
	EXPECT_EQ(r.zero_pages, 0u);
	MigrationResult both = migrate(machine, config_for(Strategy::kReportZeroDetect));
	ASSERT_TRUE(both.verified) << both.error;
	EXPECT_GE(both.round_log.front().pages_skipped_reported, reported);
}

TEST(Migration, EveryStrategyVerifiesOnEveryWorkload)
{
	for (WorkloadKind kind : {WorkloadKind::kFresh, WorkloadKind::kFreed, WorkloadKind::kBusy}) {
		for (Strategy strategy : all_strategies()) {
			SmallMachine m(kRam);
			auto workload = make_workload(small_workload(kind), *m.user_memory);
			workload->prepare();
			workload->start();
			auto machine = m.machine(*workload);
			MigrationResult r = migrate(machine, config_for(strategy));
			workload->stop();
			EXPECT_TRUE(r.verified) << workload_name(kind) << " " << strategy_name(strategy) << ": " << r.error;
			EXPECT_EQ(r.rounds, r.round_log.size());
			EXPECT_GT(r.total_ms, 0);
			EXPECT_GT(r.downtime_ms, 0);
			EXPECT_LE(r.downtime_ms, r.total_ms);
		}
	}
}

TEST(Migration, BusyGuestTakesMoreRoundsAndConvergesWithinTheDowntimeLimit)
{
	SmallMachine m(kRam);
	auto config = small_workload(WorkloadKind::kBusy);
	// 40 + 8 + 4 MiB/s of writes against a 64 MiB/s link: slow enough that the guest
	// dirties pages between syncs, fast enough to converge.
	config.params.churn_bytes_per_second = 40.0 * (1 << 20);
	config.params.hot_bytes_per_second = 8.0 * (1 << 20);
	auto workload = make_workload(config, *m.user_memory);
	workload->prepare();
	workload->start();
	auto machine = m.machine(*workload);
	MigrationConfig mc = config_for(Strategy::kZeroDetect);
	mc.link_bytes_per_second = 64.0 * (1 << 20);
	// The steady dirty set (kernel area, hot set, page cache, arenas) is 600-1100 pages,
	// 40-70 ms at this link: the bulk pass leaves more than that.
	mc.downtime_limit_ms = 60;
	MigrationResult r = migrate(machine, mc);
	workload->stop();
	ASSERT_TRUE(r.verified) << r.error;
	EXPECT_GE(r.rounds, 3u);
	EXPECT_TRUE(r.converged);
	// Pages dirtied after the bulk pass were sent again in later rounds.
	uint64_t later = 0;
	for (size_t i = 1; i < r.round_log.size(); i++)
		later += r.round_log[i].pages_sent;
	EXPECT_GT(later, SmallMachine::kKernelPages * (r.rounds - 1));
	EXPECT_GT(workload->stats().allocations, 1u);
}

TEST(Migration, AGuestDirtyingFasterThanTheLinkIsForcedToStopAfterMaxRounds)
{
	SmallMachine m(kRam);
	auto config = small_workload(WorkloadKind::kBusy);
	config.params.churn_bytes_per_second = 400.0 * (1 << 20);
	auto workload = make_workload(config, *m.user_memory);
	workload->prepare();
	workload->start();
	auto machine = m.machine(*workload);
	MigrationConfig mc = config_for(Strategy::kZeroDetect);
	mc.link_bytes_per_second = 16.0 * (1 << 20);
	mc.downtime_limit_ms = 1;
	mc.max_rounds = 4;
	MigrationResult r = migrate(machine, mc);
	workload->stop();
	EXPECT_TRUE(r.verified) << r.error;
	EXPECT_FALSE(r.converged);
	EXPECT_EQ(r.rounds, 5u); // four rounds, then the forced stop-and-copy
}

// A described workload whose hot set is rewritten faster than a 1 Gbit/s link sends (512 MiB/s
// against 119 MiB/s) keeps its 64 MiB hot set dirty at every sync, more than the 300 ms
// downtime limit lets the link send (36 MiB): QEMU would go on iterating. The model stops it
// after max_rounds, says it did not converge, and measures why: what the guest dirtied
// against what was sent, and what stayed dirty at each sync.
TEST(Migration, ADescribedHotSetRewrittenFasterThanTheLinkDoesNotConvergeAndSaysWhy)
{
	const uint64_t ram = 256ull << 20;
	SmallMachine m(ram);
	vbw_params described = vbw_empty_params();
	for (auto [key, value] : {std::pair{"working_set_mib", "8"},
				  {"hot_mib", "64"},
				  {"hot_mib_s", "512"},
				  {"warmup_ms", "100"}}) {
		char error[256];
		ASSERT_EQ(vbw_set_param(&described, key, value, error, sizeof(error)), 0) << error;
	}
	WorkloadConfig config = described_workload("hot", described, ram);
	config.booted_guest_bytes = config.booted_guest_zero_bytes =
		0; // SmallMachine's kernel area is its own
	auto workload = make_workload(config, *m.user_memory);
	workload->prepare();
	workload->start();
	auto machine = m.machine(*workload);
	MigrationConfig mc = config_for(Strategy::kZeroDetect, "qemu-7.2");
	mc.link_bytes_per_second = 1e9 / 8;
	mc.max_rounds = 6;
	MigrationResult r = migrate(machine, mc);
	workload->stop();
	ASSERT_TRUE(r.verified) << r.error;
	EXPECT_FALSE(r.converged);
	EXPECT_EQ(r.rounds, 7u); // six rounds, then the forced stop-and-copy
	const double link = mc.link_bytes_per_second;
	EXPECT_GT(r.dirty_bytes_per_second, 3 * link); // 512 MiB/s written
	EXPECT_LT(r.dirty_bytes_per_second, 5 * link);
	EXPECT_GT(r.sent_bytes_per_second, 0.8 * link);
	EXPECT_LE(r.sent_bytes_per_second, 1.01 * link);
	// Most of the hot set is dirty again at every sync.
	EXPECT_GT(r.pending_bytes, 48.0 * (1 << 20));
	// QEMU's threshold: about what the link sends in the 300 ms downtime limit, 36 MiB.
	EXPECT_GT(r.threshold_bytes, 0.8 * link * 0.3);
	EXPECT_LT(r.threshold_bytes, r.pending_bytes);
}

// A guest that hints a page it still uses (a lying guest, or a model that applied a hint
// it should have ignored) loses that page: the verifier must say so.
class LyingHinter : public FreePageHintControl
{
public:
	explicit LyingHinter(uint64_t victim) : victim_(victim) {}
	uint32_t start_hint_round() override
	{
		if (observer_ && !lied_) {
			observer_->hint_round_started(7);
			observer_->pages_hinted(7, victim_ * 4096, 4096);
			lied_ = true;
		}
		return 7;
	}
	void stop_hint_round() override {}
	void finish_hinting() override {}
	FreePageEvents* observer_ = nullptr;

private:
	uint64_t victim_;
	bool lied_ = false;
};

TEST(Migration, VerifierCatchesAPageLostToAWrongHint)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	const uint64_t victim = workload->pages_in_use().front().first_pfn + 3;
	LyingHinter liar(victim);
	auto machine = m.machine(*workload);
	machine.hints = &liar;
	machine.set_free_page_observer = [&](FreePageEvents* o) { liar.observer_ = o; };
	MigrationResult r = migrate(machine, config_for(Strategy::kHintZeroDetect));
	EXPECT_FALSE(r.verified);
	EXPECT_EQ(r.pages_mismatched, 1u);
	EXPECT_NE(r.error.find("pfn " + std::to_string(victim)), std::string::npos) << r.error;
}

// A write the dirty log never saw, made after the page was sent (behind the log's back,
// as the VM stops), is never sent again: the destination's digest of the page is stale
// and the verifier must name the page. `contents` nullptr: the page is zeroed instead.
namespace
{
MigrationResult migrate_with_an_unlogged_write_at_the_stop(uint64_t victim_offset,
							   const uint8_t* contents)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	const uint64_t victim = workload->pages_in_use().front().first_pfn + victim_offset;
	auto machine = m.machine(*workload);
	unsigned pauses = 0;
	machine.pause_guest = [&] {
		if (++pauses != 2) // the first is the setup's instant, the second the VM stop
			return;
		uint8_t* page = m.memory.translate(victim * 4096, 4096);
		if (contents)
			std::copy(contents, contents + 4096, page);
		else
			std::fill(page, page + 4096, 0);
	};
	MigrationResult r = migrate(machine, config_for(Strategy::kZeroDetect));
	EXPECT_EQ(pauses, 2u);
	EXPECT_NE(r.error.find("pfn " + std::to_string(victim)), std::string::npos) << r.error;
	return r;
}
} // namespace

TEST(Migration, VerifierCatchesAPageWrittenAfterItWasSentAndNeverResent)
{
	const std::vector<uint8_t> contents(4096, 0xc3);
	MigrationResult r = migrate_with_an_unlogged_write_at_the_stop(9, contents.data());
	EXPECT_FALSE(r.verified);
	EXPECT_EQ(r.pages_mismatched, 1u);
}

TEST(Migration, VerifierCatchesAPageThatShouldBeZero)
{
	MigrationResult r = migrate_with_an_unlogged_write_at_the_stop(11, nullptr);
	EXPECT_FALSE(r.verified);
	EXPECT_EQ(r.pages_mismatched, 1u);
}

// The guest reuses a hinted page and writes it while the hint is still in flight; the
// device delivers the hint after the host stopped the round. It must not clear the page:
// its new contents are already in the bitmap, and clearing them would lose them.
TEST(Migration, HintsOfAStoppedRoundAreIgnored)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	const uint64_t victim = workload->pages_in_use().front().first_pfn + 5;
	struct ReusingHinter : DirectHinter {
		ReusingHinter(BuddyAllocator& allocator) : DirectHinter(allocator, true) {}
		void stop_hint_round() override
		{
			DirectHinter::stop_hint_round();
			if (!reused) {
				// The guest takes the hinted page back (its shrinker) and writes it.
				taken_back++;
				const uint8_t news[64] = {0xee};
				if (!memory->write(victim * 4096, news, sizeof(news)))
					throw std::logic_error("victim outside RAM");
				reused = true;
			}
		}
		GuestMemory* memory = nullptr;
		uint64_t victim = 0;
		bool reused = false;
		uint64_t taken_back = 7; // the guest's count before this migration
	} reusing(m.allocator);
	reusing.memory = &m.memory;
	reusing.victim = victim;
	FreePageEvents* observer = nullptr;
	auto machine = m.machine(*workload);
	machine.hints = &reusing;
	machine.set_free_page_observer = [&](FreePageEvents* o) {
		reusing.set_observer(o);
		observer = o;
	};
	bool delivered = false;
	machine.pause_guest = [&] {
		// The device catches up with its queue: the stale hint, with its round's id.
		if (observer && reusing.reused && !delivered) {
			observer->pages_hinted(reusing.last_cmd_id(), victim * 4096, 4096);
			delivered = true;
		}
	};
	machine.resume_guest = [] {};
	machine.guest_hint_pages_released_early = [&] { return reusing.taken_back; };
	MigrationResult r = migrate(machine, config_for(Strategy::kHint));
	EXPECT_TRUE(delivered);
	EXPECT_TRUE(r.verified) << r.error;
	// Both things a hint used after STOP needs to lose a page, counted.
	EXPECT_EQ(r.hinted_pages_after_stop, 1u);
	EXPECT_EQ(r.hinted_pages_released_early, 1u);
}

TEST(Migration, ALegacyZeroScanIsOnTheCriticalPathWhole)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationConfig legacy = config_for(Strategy::kZeroDetect);
	legacy.zero_detection_place = ZeroDetectionPlace::kMigrationThread;
	MigrationResult r = migrate(machine, legacy);
	ASSERT_TRUE(r.verified) << r.error;
	// The bulk round's critical path holds the whole scan, however many senders there are.
	EXPECT_GE(r.total_ms, r.zero_scan_cpu_ms);
}

TEST(Migration, HintStrategyWithoutHintControlsIsRefused)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	auto machine = m.machine(*workload);
	machine.hints = nullptr;
	EXPECT_THROW(migrate(machine, config_for(Strategy::kHint)), std::invalid_argument);
}

TEST(Pacing, TheLinkIsARateOnModelTime)
{
	EXPECT_DOUBLE_EQ(link_ms(1250000, MigrationConfig::kTenGigabitLink), 1.0);
	EXPECT_DOUBLE_EQ(link_ms(128 << 20, MigrationConfig::kQemuDefaultThrottle), 1000.0);
	EXPECT_EQ(link_ms(uint64_t{1} << 40, kUnlimitedLink), 0.0);
}

// A fresh guest prepared on a small machine, and the qemu-7.2 host migrating it without
// hints or zero detection.
struct FreshGuestOnQemu72 {
	FreshGuestOnQemu72()
	    : workload(make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory)),
	      machine((workload->prepare(), m.machine(*workload))),
	      config(config_for(Strategy::kNone, "qemu-7.2"))
	{
	}
	SmallMachine m{kRam};
	std::unique_ptr<Workload> workload;
	MigrationMachine machine;
	MigrationConfig config;
};

// QEMU's own rate limit (max-bandwidth) ends an iteration once it has sent the 100 ms
// window's budget; the migration thread sleeps to the window's end and iterates again only
// in the next window (migration_rate_limit). A link as slow blocks the sends instead, and
// MAX_WAIT (50 ms) ends each iteration. Same pass, half the iterations, so half the
// convergence checks and hint landings.
TEST(Convergence, UnderMaxBandwidthAnIterationIsOneRateWindow)
{
	FreshGuestOnQemu72 guest;
	MigrationMachine& machine = guest.machine;
	MigrationConfig& config = guest.config;
	// 48 MiB whole at 40 MiB/s: a 1.2 s bulk pass, set by the rate and not the CPU (even
	// under a sanitizer), whose senders look at the clock every 2 MiB, 50 ms on the wire. A
	// downtime limit the rest never fits: the pass runs to its end.
	config.downtime_limit_ms = 1;
	config.max_rounds = 2;
	config.link_bytes_per_second = 40.0 * (1 << 20);
	MigrationResult slow_link = migrate(machine, config);
	config.link_bytes_per_second = kUnlimitedLink;
	config.max_bandwidth_bytes_per_second = 40.0 * (1 << 20);
	MigrationResult rate_limited = migrate(machine, config);
	ASSERT_TRUE(slow_link.verified) << slow_link.error;
	ASSERT_TRUE(rate_limited.verified) << rate_limited.error;
	const RoundProgress& link_pass = slow_link.round_log.front();
	const RoundProgress& rate_pass = rate_limited.round_log.front();
	ASSERT_FALSE(link_pass.stopped_mid_pass);
	ASSERT_FALSE(rate_pass.stopped_mid_pass);
	EXPECT_NEAR(link_pass.round_ms, 1200, 50);
	EXPECT_NEAR(rate_pass.round_ms, 1200, 50);
	EXPECT_NEAR(link_pass.iterations, 24, 1);
	EXPECT_NEAR(rate_pass.iterations, 12, 1);
}

// QEMU 7.2 decides after every 50 ms iteration, on the bandwidth of the last 100 ms window:
// once the pages left (x 4096) are below bandwidth x downtime limit it syncs, looks again
// and stops the VM, mid-pass if need be; the rest of the bulk pass goes in stop-and-copy.
TEST(Convergence, QemuStopsTheVmMidPassOnceWhatIsLeftFitsTheDowntimeLimit)
{
	FreshGuestOnQemu72 guest;
	MigrationMachine& machine = guest.machine;
	MigrationConfig& config = guest.config;
	// 48 MiB whole at 16 MiB/s: 3 s of bulk pass, so the link and not the CPU (even under a
	// sanitizer) sets the bandwidth. After the first 100 ms window the threshold is
	// 16 MiB/s x 3 s = 48 MiB, and about 46 MiB are left.
	config.link_bytes_per_second = 16.0 * (1 << 20);
	config.downtime_limit_ms = 3000;
	MigrationResult r = migrate(machine, config);
	ASSERT_TRUE(r.verified) << r.error;
	ASSERT_EQ(r.rounds, 2u);
	const RoundProgress& bulk = r.round_log.front();
	EXPECT_TRUE(bulk.stopped_mid_pass);
	EXPECT_TRUE(r.converged);
	// The bulk pass sent two or three iterations' worth; stop-and-copy sent the rest.
	const uint64_t ram_pages = kRam / 4096;
	EXPECT_LT(bulk.pages_sent, ram_pages / 2);
	EXPECT_GE(bulk.pages_sent + r.round_log.back().pages_sent, ram_pages);
	EXPECT_GT(r.downtime_ms, 2000); // about 46 MiB at 16 MiB/s
	// As QEMU's dirty-sync-count: the setup's, the mid-pass one, the final one.
	EXPECT_EQ(r.bitmap_syncs, 3u);
	// A limit the rest never fits: the pass runs to its end, the VM stops after it.
	config.downtime_limit_ms = 1;
	config.max_rounds = 2;
	MigrationResult strict = migrate(machine, config);
	ASSERT_TRUE(strict.verified) << strict.error;
	EXPECT_FALSE(strict.round_log.front().stopped_mid_pass);
	EXPECT_GE(strict.round_log.front().pages_sent, ram_pages);
}

// A guest that writes once, at the migration's first bitmap sync: the last page of RAM,
// absent when the round began (its residency snapshot saw it so) and not yet reached by
// the bulk pass, and 16 MiB the pass has already sent, enough to keep the pass going after
// the sync. Everything it wrote is its memory in use.
class WritesAtTheFirstSync : public Workload
{
public:
	explicit WritesAtTheFirstSync(GuestMemory& memory) : memory_(memory)
	{
		const uint64_t last_page = memory.size() / GuestMemory::kWirePageBytes - 1;
		written_ranges_ = {{512, 4096}, {last_page, 1}};
	}
	void prepare() override {}
	void start() override {}
	void pause() override
	{
		// The setup pauses the guest before it attaches the log; the first sync after.
		if (wrote_ || memory_.dirty_log() == nullptr)
			return;
		wrote_ = true;
		for (const PfnRun& range : written_ranges_)
			if (!memory_.fill(range.first_pfn * GuestMemory::kWirePageBytes, 0xa5,
					  range.wire_pages * GuestMemory::kWirePageBytes))
				throw std::logic_error("outside guest RAM");
	}
	void resume() override {}
	void stop() override {}
	void set_clock(std::function<double()>) override {}
	std::vector<PfnRun> pages_in_use() const override { return written_ranges_; }
	WorkloadStats stats() const override { return {}; }
	bool wrote() const { return wrote_; }

private:
	GuestMemory& memory_;
	std::vector<PfnRun> written_ranges_;
	bool wrote_ = false;
};

// QEMU reads a page when it sends it. The model reads a page the round's residency snapshot
// saw absent from its zero region; so when a mid-pass sync folds a new write into a page the
// pass has still to send, what it sends must come from a new snapshot, or the write is sent
// as zeros and its dirty bit is spent (a compare run lost a 2 MiB block this way).
TEST(Convergence, AMidPassSyncThatDoesNotConvergeSendsTheWritesItFoldedIntoTheRestOfThePass)
{
	SmallMachine m(kRam);
	// The last page as the host left it after a report: discarded, not resident.
	const uint64_t last_gpa = kRam - GuestMemory::kWirePageBytes;
	ASSERT_EQ(m.memory.discard(last_gpa, GuestMemory::kWirePageBytes), 0);
	ASSERT_EQ(m.memory.resident_bytes(last_gpa, GuestMemory::kWirePageBytes), 0u);
	WritesAtTheFirstSync workload(m.memory);
	auto machine = m.machine(workload);
	MigrationConfig config = config_for(Strategy::kNone, "qemu-7.2");
	// 48 MiB at 16 MiB/s, the link and not the CPU setting the bandwidth: the threshold is
	// 16 MiB/s x 0.6 s, under 10 MiB, so the sync comes late in the bulk pass, and the
	// 16 MiB written behind it keep the pending pages above the threshold to the pass's end.
	config.link_bytes_per_second = 16.0 * (1 << 20);
	config.downtime_limit_ms = 600;
	MigrationResult r = migrate(machine, config);
	ASSERT_TRUE(workload.wrote());
	// The pass went on to its end after the sync: syncs at the setup, mid-pass (not
	// converged), at the pass's end, mid-pass in the next round (converged), and the final.
	EXPECT_FALSE(r.round_log.front().stopped_mid_pass);
	EXPECT_EQ(r.bitmap_syncs, 5u);
	EXPECT_TRUE(r.verified) << r.error;
}

TEST(Pacing, EachRoundTakesTheLongerOfItsLinkTimeAndItsCpuPathPlusItsSync)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationConfig config = config_for(Strategy::kNone, "qemu-7.2");
	config.link_bytes_per_second = 256.0 * (1 << 20);
	MigrationResult r = migrate(machine, config);
	ASSERT_TRUE(r.verified) << r.error;
	double total = r.setup_ms + r.vm_stop_ms;
	for (const RoundProgress& round : r.round_log) {
		EXPECT_DOUBLE_EQ(round.network_ms, link_ms(round.bytes_sent, config.link_bytes_per_second));
		EXPECT_DOUBLE_EQ(round.round_ms, std::max(round.network_ms, round.critical_cpu_ms) + round.sync_ms);
		total += round.round_ms;
	}
	// 48 MiB whole at 256 MiB/s: the link decides (the bulk pass and, once QEMU's rule
	// stopped the VM mid-pass, stop-and-copy).
	double network_ms = 0;
	for (const RoundProgress& round : r.round_log)
		network_ms += round.network_ms;
	EXPECT_GE(network_ms, 187.5);
	EXPECT_NEAR(r.total_ms, total + (r.sync_ms - [&] {
		double s = 0;
		for (const RoundProgress& round : r.round_log)
			s += round.sync_ms;
		return s;
	}()), 1e-6);
	// An unlimited link: only the CPU path counts.
	config.link_bytes_per_second = kUnlimitedLink;
	MigrationResult fast = migrate(machine, config);
	ASSERT_TRUE(fast.verified) << fast.error;
	for (const RoundProgress& round : fast.round_log) {
		EXPECT_EQ(round.network_ms, 0.0);
		EXPECT_DOUBLE_EQ(round.round_ms, round.critical_cpu_ms + round.sync_ms);
	}
}

// QEMU's max-bandwidth is a rate limit the source lifts for stop-and-copy
// (migration_completion): the live rounds go at it, the last round at the link's speed.
TEST(Pacing, MaxBandwidthPacesTheLiveRoundsAndStopAndCopyGoesAtTheLinksSpeed)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationConfig config = config_for(Strategy::kNone, "qemu-7.2");
	// As QemuStopsTheVmMidPassOnceWhatIsLeftFitsTheDowntimeLimit, with the 16 MiB/s a rate
	// limit on an unlimited link: the VM stops mid-pass with about 46 MiB left.
	const double limit = 16.0 * (1 << 20);
	config.link_bytes_per_second = kUnlimitedLink;
	config.max_bandwidth_bytes_per_second = limit;
	config.downtime_limit_ms = 3000;
	MigrationResult r = migrate(machine, config);
	ASSERT_TRUE(r.verified) << r.error;
	ASSERT_EQ(r.rounds, 2u);
	const RoundProgress& bulk = r.round_log.front();
	const RoundProgress& last = r.round_log.back();
	EXPECT_TRUE(bulk.stopped_mid_pass);
	ASSERT_TRUE(last.stop_and_copy);
	EXPECT_DOUBLE_EQ(bulk.network_ms, link_ms(bulk.bytes_sent, limit));
	EXPECT_GT(bulk.network_ms, 0.0);
	EXPECT_EQ(last.network_ms, 0.0);
	EXPECT_GT(last.pages_sent, kRam / 4096 / 2);
	// What stop-and-copy sent would have taken seconds at the limit.
	EXPECT_LT(r.downtime_ms, link_ms(last.bytes_sent, limit) / 2);
	// The link, where it is the slower, paces stop-and-copy too.
	config.link_bytes_per_second = limit;
	config.max_bandwidth_bytes_per_second = kUnlimitedLink;
	MigrationResult linked = migrate(machine, config);
	ASSERT_TRUE(linked.verified) << linked.error;
	EXPECT_DOUBLE_EQ(linked.round_log.back().network_ms,
			 link_ms(linked.round_log.back().bytes_sent, limit));
	EXPECT_GT(linked.downtime_ms, 2000);
}

// QEMU 7.2 applies hints under the bitmap mutex its migration thread holds for 50 ms
// iterations: hints the guest sent at once still land only at an iteration boundary, and
// the pages the first iteration sent are sent anyway.
TEST(HostProfiles, Qemu72HintsLandOnlyAtIterationBoundaries)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFreed), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationConfig qemu = config_for(Strategy::kHint, "qemu-7.2");
	// Iterations of 200 ms at 64 MiB/s (3276 pages each): long enough that the link, not the
	// CPU (even under a sanitizer), sets what the first one sends, and that it goes past the
	// booted guest's memory at the bottom of RAM into free pages.
	qemu.link_bytes_per_second = 64.0 * (1 << 20);
	qemu.iteration_ms = 200;
	MigrationResult late = migrate(machine, qemu);
	ASSERT_TRUE(late.verified) << late.error;
	ASSERT_FALSE(late.hint_landings_ms.empty());
	EXPECT_GE(late.hint_landings_ms.front(), late.setup_ms + qemu.iteration_ms);
	// They landed at a boundary, after which the pass went on or (nothing logged left to
	// send) QEMU's rule stopped the VM there.
	EXPECT_TRUE(late.round_log.front().iterations >= 2 ||
		    late.round_log.front().stopped_mid_pass);
	// What the first iteration sent (200 ms at 64 MiB/s: 3276 pages) went whole.
	EXPECT_GE(late.round_log.front().pages_sent, 3200u);

	MigrationConfig ideal = config_for(Strategy::kHint, "ideal");
	ideal.link_bytes_per_second = qemu.link_bytes_per_second;
	MigrationResult early = migrate(machine, ideal);
	ASSERT_TRUE(early.verified) << early.error;
	ASSERT_FALSE(early.hint_landings_ms.empty());
	EXPECT_LT(early.hint_landings_ms.front(), qemu.iteration_ms);
	EXPECT_LT(early.round_log.front().pages_sent, late.round_log.front().pages_sent);
	EXPECT_GT(early.pages_skipped_hinted, late.pages_skipped_hinted);
}

TEST(HostProfiles, Qemu72ScansReportedPagesAsZeroPages)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFreed), *m.user_memory);
	workload->prepare();
	const uint64_t reported = m.report_free_pages(nullptr);
	auto machine = m.machine(*workload);
	MigrationResult r = migrate(machine, config_for(Strategy::kReportZeroDetect, "qemu-7.2"));
	ASSERT_TRUE(r.verified) << r.error;
	EXPECT_EQ(r.pages_skipped_reported, 0u);
	// Over the whole run: QEMU's rule may stop the VM mid-pass and send the rest in
	// stop-and-copy.
	EXPECT_GE(r.zero_pages, reported);
	// Without zero detection QEMU would send them whole.
	MigrationResult whole = migrate(machine, config_for(Strategy::kReport, "qemu-7.2"));
	ASSERT_TRUE(whole.verified) << whole.error;
	EXPECT_GE(whole.pages_sent, kRam / 4096);
}

TEST(HostProfiles, Qemu9IsQemu10AndEveryNameIsFound)
{
	EXPECT_EQ(find_host_profile("qemu-9"), find_host_profile("qemu-10"));
	EXPECT_EQ(find_host_profile("qemu-2.12"), nullptr);
	for (std::string_view name : host_profile_names())
		EXPECT_NE(find_host_profile(name), nullptr) << name;
	EXPECT_EQ(host_profile_names().size(), all_host_profiles().size() + 1);
}

TEST(HostProfiles, EachProfileSetsItsMechanisms)
{
	MigrationConfig c;
	apply_host_profile(*find_host_profile("qemu-7.2"), 0, c);
	EXPECT_EQ(c.sender_threads, 1u);
	EXPECT_EQ(c.zero_detection_place, ZeroDetectionPlace::kMigrationThread);
	EXPECT_EQ(c.hint_application, HintApplication::kAtIterationBoundaries);
	EXPECT_EQ(c.reported_pages, ReportedPages::kScanned);
	EXPECT_EQ(c.zero_page_extra_bytes, 1u);
	apply_host_profile(*find_host_profile("qemu-10"), 4, c);
	EXPECT_EQ(c.sender_threads, 4u);
	EXPECT_EQ(c.zero_detection_place, ZeroDetectionPlace::kSenderThreads);
	EXPECT_EQ(c.zero_page_extra_bytes, 0u);
	EXPECT_EQ(c.hint_application, HintApplication::kAtIterationBoundaries);
	EXPECT_EQ(c.stream, ChannelStream::kTcp); // QEMU 10's multifd to a destination
	// Multifd with one channel, and zero-page-detection=legacy: the migration thread checks,
	// its zero-page records carry the fill byte.
	apply_host_profile(
		*find_host_profile("qemu-10"),
		HostChoices{.threads = 1,
			    .multifd = true,
			    .multifd_zero_detection = ZeroDetectionPlace::kMigrationThread},
		c);
	EXPECT_EQ(c.sender_threads, 1u);
	EXPECT_EQ(c.stream, ChannelStream::kTcp);
	EXPECT_EQ(c.zero_detection_place, ZeroDetectionPlace::kMigrationThread);
	EXPECT_EQ(c.zero_page_extra_bytes, 1u);
	apply_host_profile(*find_host_profile("qemu-10"),
			   HostChoices{.threads = 1, .multifd = true}, c);
	EXPECT_EQ(c.zero_detection_place, ZeroDetectionPlace::kSenderThreads);
	EXPECT_EQ(c.zero_page_extra_bytes, 0u);
	// The single stream to a destination over TCP instead of into cat's pipe.
	apply_host_profile(*find_host_profile("qemu-10"),
			   HostChoices{.single_stream = ChannelStream::kTcp}, c);
	EXPECT_EQ(c.sender_threads, 1u);
	EXPECT_EQ(c.stream, ChannelStream::kTcp);
	EXPECT_EQ(c.zero_detection_place, ZeroDetectionPlace::kMigrationThread);
	// QEMU 10 without multifd (its default) checks in the migration thread, into the pipe.
	apply_host_profile(*find_host_profile("qemu-10"), 0, c);
	EXPECT_EQ(c.sender_threads, 1u);
	EXPECT_EQ(c.zero_detection_place, ZeroDetectionPlace::kMigrationThread);
	EXPECT_EQ(c.zero_page_extra_bytes, 1u);
	EXPECT_EQ(c.stream, ChannelStream::kPipe);
	// 7.2's multifd channels still leave the zero checks to the migration thread.
	apply_host_profile(*find_host_profile("qemu-7.2"), 4, c);
	EXPECT_EQ(c.zero_detection_place, ZeroDetectionPlace::kMigrationThread);
	apply_host_profile(*find_host_profile("qemu-7.2"), 2, c); // multifd: sockets
	EXPECT_EQ(c.stream, ChannelStream::kSocketPair);
	apply_host_profile(*find_host_profile("qemu-7.2"), 0, c); // exec:cat's pipe
	EXPECT_EQ(c.stream, ChannelStream::kPipe);
	apply_host_profile(*find_host_profile("ideal"), 0, c);
	EXPECT_EQ(c.stream, ChannelStream::kSocketPair);
	EXPECT_EQ(c.hint_application, HintApplication::kImmediately);
	EXPECT_EQ(c.reported_pages, ReportedPages::kSkippedUnscanned);
	EXPECT_EQ(find_host_profile("qemu-2.12"), nullptr);
}

class ChannelOver : public ::testing::TestWithParam<ChannelStream>
{
};

TEST_P(ChannelOver, EveryRecordArrivesAndTheSyncWaitsForIt)
{
	DestinationImage destination(16 * 4096);
	std::vector<uint8_t> page(4096);
	for (size_t i = 0; i < page.size(); i++)
		page[i] = uint8_t(i * 7 + 1);
	{
		Channel channel(destination, 1, GetParam());
		channel.queue_page(3, page.data());
		channel.queue_zero_page(4);
		channel.queue_page(9, page.data());
		EXPECT_EQ(channel.flush(), 2 * (8 + 4096) + 9u);
		channel.sync();
		EXPECT_EQ(channel.bytes_received(), 2 * (8 + 4096) + 9 + 8u);
		EXPECT_FALSE(destination.differs(3, page.data()));
		EXPECT_FALSE(destination.differs(9, page.data()));
		EXPECT_FALSE(destination.differs(4, nullptr));
		EXPECT_TRUE(destination.differs(5, page.data()));
		// A zero page over a page with data clears it.
		channel.queue_zero_page(9);
		channel.flush();
		channel.sync();
		EXPECT_FALSE(destination.differs(9, nullptr));
		EXPECT_FALSE(channel.receiver_failed());
	}
	// A record for a page outside the image: the receiver fails, the sync says so.
	Channel bad(destination, 0, GetParam());
	bad.queue_zero_page(16);
	bad.flush();
	EXPECT_THROW(bad.sync(), std::runtime_error);
	EXPECT_TRUE(bad.receiver_failed());
}

INSTANTIATE_TEST_SUITE_P(Streams, ChannelOver,
			 ::testing::Values(ChannelStream::kSocketPair, ChannelStream::kPipe,
					   ChannelStream::kTcp));

// QEMU's exec: stream is a 64 KiB pipe, its tcp: stream a socket: the reader's copy, and the
// writer's wait for it, are measured on those (not on the `ideal` host's socket pairs).
// 4 MiB cannot go through a pipe's 64 KiB without the writer sleeping (the kernel's pipe
// write holds the pipe while it fills it, then waits for room), and a sleep is time off the
// writer's CPU within its write. (Loopback TCP's receive buffer may grow to take it all.)
TEST(Channel, APipesAndATcpStreamsHandOffIsMeasuredASocketPairsIsNot)
{
	DestinationImage destination(1024 * 4096);
	std::vector<uint8_t> page(4096, 0x5a);
	for (ChannelStream stream :
	     {ChannelStream::kPipe, ChannelStream::kTcp, ChannelStream::kSocketPair}) {
		Channel channel(destination, 1, stream);
		for (uint64_t i = 0; i < 1024; i++)
			channel.queue_page(i, page.data());
		const uint64_t wall0 = vbsim::monotonic_ns();
		channel.flush();
		const uint64_t flush_ns = vbsim::monotonic_ns() - wall0;
		channel.sync();
		EXPECT_EQ(channel.bytes_received(), 1024 * (8 + 4096) + 8u);
		for (uint64_t i = 0; i < 1024; i++)
			EXPECT_FALSE(destination.differs(i, page.data())) << i;
		if (waits_on_reader(stream)) {
			EXPECT_GT(channel.reader_copy_ns(), 0u);
			if (stream == ChannelStream::kPipe) {
				EXPECT_GT(channel.writer_wait_ns(), 0u);
			}
			EXPECT_LE(channel.writer_wait_ns(), flush_ns);
		} else {
			EXPECT_EQ(channel.reader_copy_ns(), 0u);
			EXPECT_EQ(channel.writer_wait_ns(), 0u);
		}
	}
}

// The pipe's applier takes the reader's chunks in batches; a sync must still find every
// record before it applied, however little came before it, and so must the stream's end.
TEST(Channel, APipesApplierMeetsEverySyncAndTheEndOfTheStream)
{
	DestinationImage destination(64 * 4096);
	std::vector<uint8_t> page(4096, 0x33);
	{
		Channel channel(destination, 0, ChannelStream::kPipe);
		for (uint64_t i = 0; i < 64; i++) {
			channel.queue_page(i, page.data());
			channel.flush();
			channel.sync(); // one small record, then a sync: well under a batch
			EXPECT_FALSE(destination.differs(i, page.data())) << i;
		}
		for (uint64_t i = 0; i < 64; i++)
			channel.queue_zero_page(i);
		channel.flush();
	} // closing the stream: the applier drains what is queued before it stops
	for (uint64_t i = 0; i < 64; i++)
		EXPECT_FALSE(destination.differs(i, nullptr)) << i;
}

// The real migration thread writing into exec:cat's pipe sleeps once per 64 KiB while cat
// copies it out (tests/guest/hint_timeline.py): on a kPipe stream the hand-off to the reader
// (its copy, and the wake-ups the writer waited through) is on the round's critical path
// beside the sender's own CPU time.
TEST(Pacing, OnAPipeTheHandOffToTheReaderIsOnTheCriticalPathWithTheSendersCpu)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFreed), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	MigrationConfig config = config_for(Strategy::kNone, "qemu-7.2");
	ASSERT_EQ(config.stream, ChannelStream::kPipe);
	config.link_bytes_per_second = kUnlimitedLink;
	MigrationResult r = migrate(machine, config);
	ASSERT_TRUE(r.verified) << r.error;
	const RoundProgress& bulk = r.round_log.front();
	ASSERT_GT(bulk.reader_copy_ms, 0.0); // 48 MiB went through the pipe
	// The hand-off is what the writer waited, at least the reader's copy.
	EXPECT_GE(bulk.handoff_ms, bulk.reader_copy_ms);
	const double sender_cpu_ms = bulk.host_cpu_ms - bulk.sync_ms;
	EXPECT_GE(bulk.critical_cpu_ms + 1e-6, sender_cpu_ms + bulk.handoff_ms);
	EXPECT_DOUBLE_EQ(bulk.round_ms, bulk.critical_cpu_ms + bulk.sync_ms);
	double copied = 0, handed = 0;
	for (const RoundProgress& round : r.round_log) {
		copied += round.reader_copy_ms;
		handed += round.handoff_ms;
	}
	EXPECT_DOUBLE_EQ(r.reader_copy_ms, copied);
	EXPECT_DOUBLE_EQ(r.handoff_ms, handed);

	// multifd sockets: no reader's copy on the path.
	config.stream = ChannelStream::kSocketPair;
	MigrationResult sockets = migrate(machine, config);
	ASSERT_TRUE(sockets.verified) << sockets.error;
	EXPECT_EQ(sockets.reader_copy_ms, 0.0);
	EXPECT_EQ(sockets.handoff_ms, 0.0);
}

TEST(ModelClock, StandsStillOutsideMigrationsAndFollowsModelTimeWithin)
{
	ModelClock clock;
	EXPECT_EQ(clock.now_ms(), 0.0);
	double model = 0;
	clock.drive([&] { return model; });
	model = 1500;
	EXPECT_EQ(clock.now_ms(), 1500.0);
	clock.release();
	model = 99999; // no longer read
	EXPECT_EQ(clock.now_ms(), 1500.0);
}

TEST(ModelClock, AMigrationDrivesItFromWhereItStoodByTheRunsTotalTime)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	auto machine = m.machine(*workload);
	ModelClock clock;
	machine.clock = &clock;
	MigrationResult first = migrate(machine, config_for(Strategy::kZeroDetect, "qemu-7.2"));
	ASSERT_TRUE(first.verified) << first.error;
	EXPECT_DOUBLE_EQ(clock.now_ms(), first.total_ms);
	MigrationResult second = migrate(machine, config_for(Strategy::kZeroDetect, "qemu-7.2"));
	ASSERT_TRUE(second.verified) << second.error;
	EXPECT_DOUBLE_EQ(clock.now_ms(), first.total_ms + second.total_ms);
}

} // namespace
} // namespace vbsim::migration

namespace vbsim::migration
{
namespace
{

// Where the working set lands: from one end of RAM on a guest that booted with its free
// lists in address order, from all over it with them shuffled (page_alloc.shuffle=1).
uint64_t working_set_span_pages(bool shuffle, uint64_t seed)
{
	testing::SmallMachine m(kRam);
	WorkloadConfig config = small_workload(WorkloadKind::kFresh);
	config.params.working_set_bytes = 8ull << 20; // 2048 pages in 4 MiB blocks
	config.params.seed = seed;
	config.shuffle_free_list = shuffle;
	auto workload = make_workload(config, *m.user_memory);
	workload->prepare();
	uint64_t low = UINT64_MAX, high = 0;
	for (const PfnRun& run : workload->pages_in_use()) {
		low = std::min(low, run.first_pfn);
		high = std::max(high, run.first_pfn + run.wire_pages);
	}
	return high - low;
}

uint64_t pages_in(const std::vector<PfnRun>& runs)
{
	uint64_t n = 0;
	for (const PfnRun& run : runs)
		n += run.wire_pages;
	return n;
}

// The booted guest's zeroed kernel memory is held (never free, so never hinted) and
// verified like the rest of what the guest holds.
TEST(Workload, TheBootedGuestsZeroMemoryIsHeld)
{
	auto in_use_pages = [](uint64_t zero_bytes) {
		testing::SmallMachine m(kRam);
		WorkloadConfig config = small_workload(WorkloadKind::kFresh);
		config.booted_guest_zero_bytes = zero_bytes;
		auto workload = make_workload(config, *m.user_memory);
		workload->prepare();
		return pages_in(workload->pages_in_use());
	};
	EXPECT_EQ(in_use_pages(1ull << 20), in_use_pages(0) + 256);
}

// An earlier busy never freed during a migration, wrote each page once and dirtied in real
// time before the model clock started; this pins the opposite, with the guest's vCPU halting
// between steps and staying on a host CPU.
class BusyWorkload : public ::testing::TestWithParam<bool>
{
};

TEST_P(BusyWorkload, WarmsUpThenFreesAndRewritesWhileMigratingAndStandsStillBefore)
{
	testing::SmallMachine m(kRam);
	WorkloadConfig config = small_workload(WorkloadKind::kBusy);
	config.vcpu_stays_on_cpu = GetParam();
	auto workload = make_workload(config, *m.user_memory);
	workload->prepare();
	const WorkloadStats prepared = workload->stats();
	workload->start();
	const WorkloadStats warmed = workload->stats();
	// The warm-up (100 ms of workload time at 200 MiB/s of churn) already freed arenas.
	EXPECT_GT(warmed.pages_freed, prepared.pages_freed);
	// No clock yet: the workload stands still in real time.
	std::this_thread::sleep_for(std::chrono::milliseconds(50)); // the interval to show stillness
	EXPECT_EQ(workload->stats().pages_written, warmed.pages_written);
	auto machine = m.machine(*workload);
	MigrationConfig mc = config_for(Strategy::kZeroDetect);
	mc.link_bytes_per_second = 64.0 * (1 << 20);
	MigrationResult r = migrate(machine, mc);
	const WorkloadStats after = workload->stats();
	workload->stop();
	ASSERT_TRUE(r.verified) << r.error;
	EXPECT_GT(after.pages_freed, warmed.pages_freed);
	// The hot set (1 MiB = 256 pages at 32 MiB/s) was rewritten many times over.
	EXPECT_GT(after.pages_written - warmed.pages_written, 4 * 256u);
}

INSTANTIATE_TEST_SUITE_P(Workload, BusyWorkload, ::testing::Bool(),
			 [](const ::testing::TestParamInfo<bool>& info) {
				 return info.param ? "VcpuStaysOnCpu" : "VcpuHalts";
			 });

// compare's busy guest keeps its vCPU on a host CPU; its other guests are idle.
TEST(Workload, OnlyTheBusyGuestKeepsItsVcpuOnACpu)
{
	EXPECT_TRUE(workload_for_ram(WorkloadKind::kBusy, kRam).vcpu_stays_on_cpu);
	EXPECT_FALSE(workload_for_ram(WorkloadKind::kFresh, kRam).vcpu_stays_on_cpu);
	EXPECT_FALSE(workload_for_ram(WorkloadKind::kFreed, kRam).vcpu_stays_on_cpu);
}

TEST(Workload, AShuffledFreeListSpreadsTheWorkingSetOverRam)
{
	const uint64_t ram_pages = kRam / 4096;
	uint64_t widest = 0, contiguous = 0;
	for (uint64_t seed = 1; seed <= 5; seed++) {
		EXPECT_EQ(working_set_span_pages(false, seed), 2048u);
		const uint64_t span = working_set_span_pages(true, seed);
		widest = std::max(widest, span);
		contiguous += span == 2048;
	}
	EXPECT_GT(widest, ram_pages / 3);
	EXPECT_LE(contiguous, 2u); // two of eleven 4 MiB blocks side by side, now and then
}

} // namespace
} // namespace vbsim::migration
