// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include "migration/migration.h"
#include "migration/workload.h"
#include "small_machine.h"

namespace vbsim::migration
{
namespace
{

using testing::SmallMachine;

constexpr uint64_t kRam = 48ull << 20;

WorkloadConfig small_workload(WorkloadKind kind)
{
	WorkloadConfig config;
	config.kind = kind;
	config.params.working_set_bytes = 4ull << 20;
	config.params.live_bytes = 4ull << 20;
	config.params.arena_bytes = 256ull << 10;
	config.params.churn_bytes_per_second = 200.0 * (1 << 20);
	config.params.hot_bytes = 1ull << 20;
	config.params.hot_bytes_per_second = 32.0 * (1 << 20);
	config.params.cache_bytes = 1ull << 20;
	config.params.cache_bytes_per_second = 4.0 * (1 << 20);
	config.params.warmup_ms = 100;
	return config;
}

MigrationConfig config_for(Strategy strategy)
{
	MigrationConfig config;
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
	EXPECT_EQ(r.bytes_sent, r.pages_sent * (4096 + 8));
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
	config.params.churn_bytes_per_second = 40.0 * (1 << 20);
	auto workload = make_workload(config, *m.user_memory);
	workload->prepare();
	workload->start();
	auto machine = m.machine(*workload);
	MigrationConfig mc = config_for(Strategy::kZeroDetect);
	mc.link_bytes_per_second = 64.0 * (1 << 20); // slow enough that the guest dirties pages
	mc.downtime_limit_ms = 30;
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
	const uint64_t victim = workload->pages_in_use().front().first_page + 3;
	LyingHinter liar(victim);
	auto machine = m.machine(*workload);
	machine.hints = &liar;
	machine.set_free_page_observer = [&](FreePageEvents* o) { liar.observer_ = o; };
	MigrationResult r = migrate(machine, config_for(Strategy::kHintZeroDetect));
	EXPECT_FALSE(r.verified);
	EXPECT_EQ(r.pages_mismatched, 1u);
	EXPECT_NE(r.error.find("pfn " + std::to_string(victim)), std::string::npos) << r.error;
}

// The guest reuses a hinted page and writes it while the hint is still in flight; the
// device delivers the hint after the host stopped the round. It must not clear the page:
// its new contents are already in the bitmap, and clearing them would lose them.
TEST(Migration, HintsOfAStoppedRoundAreIgnored)
{
	SmallMachine m(kRam);
	auto workload = make_workload(small_workload(WorkloadKind::kFresh), *m.user_memory);
	workload->prepare();
	const uint64_t victim = workload->pages_in_use().front().first_page + 5;
	struct ReusingHinter : DirectHinter {
		ReusingHinter(BuddyAllocator& allocator) : DirectHinter(allocator, true) {}
		void stop_hint_round() override
		{
			DirectHinter::stop_hint_round();
			if (!reused) {
				const uint8_t news[64] = {0xee};
				if (!memory->write(victim * 4096, news, sizeof(news)))
					throw std::logic_error("victim outside RAM");
				reused = true;
			}
		}
		GuestMemory* memory = nullptr;
		uint64_t victim = 0;
		bool reused = false;
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
	MigrationResult r = migrate(machine, config_for(Strategy::kHint));
	EXPECT_TRUE(delivered);
	EXPECT_TRUE(r.verified) << r.error;
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

} // namespace
} // namespace vbsim::migration
