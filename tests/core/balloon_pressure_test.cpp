// SPDX-License-Identifier: GPL-2.0
//
// The pressure governor inside the balloon (page_balloon.h, page_balloon_inflate.h): what a
// governed inflate allocates and how far, kHeld, the give-back through the deflate path
// and the resume on a tick, over FakeOs with pressure samples the tests move by hand.
#include <gtest/gtest.h>

#include "core_guest.h"

namespace vbtest
{
namespace
{

constexpr uint64_t kKept = 1024; // free_pages_kept()
constexpr uint64_t kHighKept = 12000;

vb::PressurePolicy governed(bool give_back = true)
{
	vb::PressurePolicy policy;
	policy.enabled = true;
	policy.give_back = give_back;
	return policy;
}

// A FakeOs guest whose pressure sample follows its allocator: free and available drop as
// the balloon takes pages, plus `cache` reclaimable pages the test sets (on the file LRU,
// `mapped` of them mapped by some process).
struct PressureGuest : Guest {
	explicit PressureGuest(uint64_t features, vb::PressurePolicy policy = governed())
	    : Guest(features)
	{
		os.kept_free_pages = kKept;
		os.pressure.now_ms = 1000;
		refresh();
		os.after_alloc = [this] { refresh(); };
		balloon.set_pressure_policy(policy);
	}
	void refresh()
	{
		const uint64_t free = os.allocator.counts().free;
		os.pressure.free_pages = free;
		os.pressure.available_pages = free + cache;
		os.pressure.file_lru_pages = cache;
		os.pressure.mapped_file_pages = mapped;
		// Without DEFLATE_ON_OOM the balloon's pages leave the guest's total.
		os.pressure.total_pages =
			static_cast<uint64_t>(static_cast<int64_t>(kGuestPages) + os.managed_pages);
	}
	bool tick()
	{
		os.pressure.now_ms += vb::PressureGovernor::kPressureTickMs;
		refresh();
		return balloon.pressure_tick();
	}
	// Inflates to `target`, then two thrashing ticks: the governor gives back a quantum.
	void balloon_then_thrash(uint32_t target)
	{
		set_target(target);
		ASSERT_EQ(settle(), vb::StepResult::kSettled);
		tick();
		for (int i = 0; i < 2; i++) {
			os.pressure.refaults += 1000;
			tick();
		}
	}
	uint64_t cache = 0;
	uint64_t mapped = 0;
};

TEST(BalloonPressure, WithoutThePolicyNothingChanges)
{
	Guest guest(kWithDeflateOnOom);
	guest.balloon.set_max_chunk_order(0);
	guest.set_target(12000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_FALSE(guest.balloon.pressure_tick());
	EXPECT_EQ(guest.balloon.counters().pressure_ticks.get(), 0u);
	EXPECT_EQ(guest.os.allocations_by_reclaim[static_cast<int>(vb::Reclaim::kLight)] > 0, true)
		<< "single pages still reclaim lightly, as Linux's balloon_page_alloc()";
}

TEST(BalloonPressure, AGovernedInflateTakesFreePagesWithoutReclaimAndStopsAtTheFloor)
{
	PressureGuest guest(kWithDeflateOnOom);
	guest.set_target(16000);
	EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
	const uint64_t floor = vb::PressureGovernor::hyperv_floor_pages(kGuestPages, 12); // 40 MiB
	EXPECT_EQ(floor, 10240u);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), kGuestPages - floor);
	EXPECT_LT(guest.actual(), 16000u) << "actual stays below num_pages";
	EXPECT_EQ(guest.actual(), guest.balloon.balloon_wire_pages());
	EXPECT_EQ(guest.os.allocations_by_reclaim[static_cast<int>(vb::Reclaim::kLight)], 0u);
	EXPECT_GE(guest.balloon.counters().pressure_held_steps.get(), 1u);
	EXPECT_EQ(guest.balloon.counters().pressure_refused_wire_pages.get() > 0, true);
	expect_accounted(guest, kGuestPages - floor);
	// Held: calling again changes nothing.
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kHeld);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), kGuestPages - floor);
}

TEST(BalloonPressure, BelowTheWatermarksACalmGuestReclaimsAProbeThatGrowsPerCalmTicks)
{
	PressureGuest guest(kWithDeflateOnOom);
	// Most free pages are below the watermarks; reclaimable page cache counts as available.
	guest.os.kept_free_pages = kHighKept;
	guest.balloon.set_max_chunk_order(0); // FakeOs hands out blocks below the watermarks
	guest.cache = 4096;
	guest.refresh();
	guest.set_target(16000);
	EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
	const uint64_t probe = vb::PressureGovernor::reclaim_probe(kGuestPages);
	EXPECT_EQ(probe, 16u);
	const uint64_t base = kGuestPages - kHighKept;
	// Free pages above the watermarks, then one probe with reclaim.
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), base + probe);
	EXPECT_EQ(guest.balloon.counters().pressure_reclaim_wire_pages.get(), probe);
	const auto light = [&] {
		return guest.os.allocations_by_reclaim[static_cast<int>(vb::Reclaim::kLight)];
	};
	EXPECT_EQ(light(), probe);
	// Calm ticks: each one lets another allowance go; every second calm tick after a
	// reclaim doubles it.
	EXPECT_FALSE(guest.tick()); // the first sample starts the rates
	const uint64_t expected[] = {base + 2 * probe, base + 3 * probe, base + 5 * probe,
				     base + 7 * probe, base + 11 * probe};
	for (uint64_t balloon : expected) {
		EXPECT_TRUE(guest.tick());
		EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
		EXPECT_EQ(guest.balloon.balloon_wire_pages(), balloon);
	}
	EXPECT_EQ(light(), 11 * probe);
	// Refaults during its reclaim streak: the balloon gives back at once what the streak
	// reclaimed since the first tick measured it (1+1+2+2+4 probes), and takes nothing more.
	guest.os.pressure.refaults += 1000;
	EXPECT_FALSE(guest.tick());
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), base + probe);
	EXPECT_EQ(guest.balloon.counters().pressure_give_back_wire_pages.get(), 10 * probe);
	EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), base + probe);
	EXPECT_EQ(light(), 11 * probe);
}

TEST(BalloonPressure, SustainedThrashingGivesBackThroughTheDeflatePathOnlyWithDeflateOnOom)
{
	for (uint64_t features : {kStandard, kWithDeflateOnOom}) {
		PressureGuest guest(features);
		guest.set_target(5000);
		ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
		guest.tick();
		const size_t before = guest.os.events.size();
		for (int i = 0; i < 2; i++) {
			guest.os.pressure.refaults += 1000;
			EXPECT_FALSE(guest.tick());
		}
		const bool doo = features == kWithDeflateOnOom;
		const uint64_t quantum = doo ? 256 : 0;
		EXPECT_EQ(guest.balloon.balloon_wire_pages(), 5000 - quantum);
		EXPECT_EQ(guest.actual(), 5000 - quantum);
		EXPECT_EQ(guest.balloon.counters().pressure_give_back_wire_pages.get(), quantum);
		EXPECT_EQ(guest.balloon.counters().wire_pages_deflated.get(), quantum);
		bool deflate_sent = false;
		for (size_t i = before; i < guest.os.events.size(); i++) {
			EXPECT_NE(guest.os.events[i].kind, Event::kAlloc);
			deflate_sent |= guest.os.events[i].kind == Event::kAdd &&
					guest.os.events[i].queue == vb::QueueKind::kDeflate;
		}
		EXPECT_EQ(deflate_sent, doo);
		expect_accounted(guest, 5000 - quantum);
		// Held: the next adjust does not take the pages straight back.
		if (doo) {
			EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
		}
		EXPECT_EQ(guest.balloon.balloon_wire_pages(), 5000 - quantum);
	}
}

TEST(BalloonPressure, AGiveBackIsHeldUntilCalmThenTheInflateResumes)
{
	PressureGuest guest(kWithDeflateOnOom);
	guest.balloon_then_thrash(5000);
	ASSERT_EQ(guest.balloon.balloon_wire_pages(), 5000u - 256);
	// The learned floor is where the refaults began plus a margin; the workload then
	// lets go of some cache, so there is room above it again.
	EXPECT_EQ(guest.balloon.governor().floor_pages(kGuestPages),
		  kGuestPages - 5000 + kGuestPages / 32);
	guest.cache = 2000;
	int ticks = 0;
	while (!guest.tick()) {
		EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
		ASSERT_LT(++ticks, 100);
	}
	EXPECT_EQ(ticks, static_cast<int>(vb::PressureGovernor::kHoldCalmTicks) - 1);
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 5000u);
}

TEST(BalloonPressure, ANewTargetEndsTheHold)
{
	PressureGuest guest(kWithDeflateOnOom);
	guest.balloon_then_thrash(5000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kHeld);
	guest.tick(); // calm again, still in the hold
	guest.cache = 2000;
	guest.refresh();
	EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
	guest.set_target(5200);
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 5200u);
}

TEST(BalloonPressure, AnOomDeflateIsNotTakenStraightBack)
{
	PressureGuest guest(kWithDeflateOnOom);
	guest.set_target(5000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.deflate_for_oom(), 256u);
	EXPECT_EQ(guest.settle(), vb::StepResult::kHeld);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 5000u - 256);
}

// VB_F_X_PRESSURE's tags 27-29 (BAL-DRV-PRS-13): what the governor keeps below the
// target, what it gave back early and the floor it leaves, in bytes.
TEST(BalloonPressure, StatisticsSayWhatTheGovernorHeldBackGaveBackAndLeaves)
{
	PressureGuest guest(kWithDeflateOnOom | VB_FEATURE(VB_F_X_PRESSURE));
	guest.balloon_then_thrash(5000); // gives back one quantum
	const uint64_t given_back = guest.balloon.counters().pressure_give_back_wire_pages.get();
	ASSERT_GT(given_back, 0u);
	guest.set_target(16000); // a new target ends the hold; the learned floor stops it
	guest.tick();
	ASSERT_EQ(guest.settle(), vb::StepResult::kHeld);
	const uint64_t floor_pages = guest.balloon.counters().pressure_floor_pages.get();
	ASSERT_GT(floor_pages, 0u);

	ASSERT_TRUE(guest.os.request_stats());
	guest.balloon.handle_stats_request();
	auto sent = decode_stats_entries(guest.os.last_stats);
	EXPECT_EQ(sent[VB_S_X_HELD_BACK], (16000 - guest.balloon.balloon_wire_pages()) * 4096);
	EXPECT_EQ(sent[VB_S_X_GIVEN_BACK], given_back * 4096);
	EXPECT_EQ(sent[VB_S_X_FLOOR], floor_pages * 4096);
}

} // namespace
} // namespace vbtest
