// SPDX-License-Identifier: GPL-2.0
//
// The pressure governor alone (pressure_governor.h): its levels, pacing, floor, give-back
// and hold, fed PressureSamples by hand. No balloon, no OS.
#include <gtest/gtest.h>

#include <tuple>

#include "vballoon/core/pressure_governor.h"

namespace
{

using vb::GovernorInput;
using vb::InflatePlan;
using vb::PressureGovernor;
using vb::PressureLevel;
using vb::PressurePolicy;
using vb::TickDecision;

constexpr uint64_t kMiB = 256;	       // 4 KiB pages
constexpr uint64_t kRam = 1024 * kMiB; // a 1 GiB guest

uint64_t mib(uint64_t pages)
{
	return pages / kMiB;
}

// A guest whose counters the test moves, one tick (one second) at a time.
struct Guest {
	GovernorInput in{};
	Guest()
	{
		in.sample.now_ms = 5000;
		in.sample.total_pages = kRam;
		in.sample.free_pages = 500 * kMiB;
		in.sample.available_pages = 800 * kMiB;
		in.sample.file_pages = 300 * kMiB;
		in.sample.file_lru_pages = 300 * kMiB; // none of it mapped
		in.kept_free_pages = 20 * kMiB;
		in.ram_pages = kRam;
	}
	void second() { in.sample.now_ms += PressureGovernor::kPressureTickMs; }
	// Thrashing: the working set read back at 4 MiB/s.
	void refault()
	{
		in.sample.refaults += 4 * kMiB;
		in.sample.major_faults += 4 * kMiB;
	}
};

PressurePolicy enabled(bool give_back = true, uint64_t floor = 0)
{
	PressurePolicy policy;
	policy.enabled = true;
	policy.floor_pages = floor;
	policy.give_back = give_back;
	return policy;
}

struct Governed {
	explicit Governed(bool deflate_on_oom = true, PressurePolicy policy = enabled())
	    : governor(12)
	{
		governor.set_policy(policy, deflate_on_oom);
		EXPECT_FALSE(tick().resume); // the first sample only starts the rates
	}
	TickDecision tick(bool below_target = true)
	{
		guest.second();
		return governor.tick(guest.in, below_target);
	}
	Guest guest;
	PressureGovernor governor;
};

TEST(PressureGovernor, HypervFloorFollowsItsTable)
{
	// hv_balloon's table, in MiB of RAM -> MiB kept.
	const struct {
		uint64_t ram_mib, floor_mib;
	} table[] = {{16, 16},	  {32, 24},    {128, 72},    {512, 168},
		     {2048, 360}, {8192, 744}, {32768, 1512}};
	for (const auto& row : table) {
		EXPECT_EQ(PressureGovernor::hyperv_floor_pages(row.ram_mib * kMiB, 12),
			  row.floor_mib * kMiB)
			<< row.ram_mib << " MiB";
		// The same in 64 KiB pages.
		EXPECT_EQ(PressureGovernor::hyperv_floor_pages(row.ram_mib * 16, 16),
			  row.floor_mib * 16)
			<< row.ram_mib << " MiB of 64 KiB pages";
	}
	// Continuous: one page more of RAM never lowers it.
	for (uint64_t ram = 1; ram < 40000 * kMiB; ram = ram * 3 / 2 + 1)
		EXPECT_LE(PressureGovernor::hyperv_floor_pages(ram, 12),
			  PressureGovernor::hyperv_floor_pages(ram + 1, 12));
}

TEST(PressureGovernor, FloorIsTheLargestOfPolicyHypervAndTheLearnedWorkingSet)
{
	Governed derived;
	EXPECT_EQ(derived.governor.floor_pages(kRam),
		  PressureGovernor::hyperv_floor_pages(kRam, 12));
	Governed with_policy(true, enabled(true, 600 * kMiB));
	EXPECT_EQ(with_policy.governor.floor_pages(kRam), 600 * kMiB);
	Governed with_small_policy(true, enabled(true, 10 * kMiB));
	EXPECT_EQ(with_small_policy.governor.floor_pages(kRam),
		  232 * kMiB); // Hyper-V's 1 GiB floor
}

TEST(PressureGovernor, CalmGuestGivesFreePagesWithoutReclaimThenAReclaimProbePerTick)
{
	Governed g;
	g.guest.in.sample.free_pages = 100 * kMiB;
	InflatePlan plan = g.governor.plan(g.guest.in);
	EXPECT_EQ(plan.free_pages, 80 * kMiB); // above the watermarks only
	EXPECT_EQ(plan.max_pages, 80 * kMiB + PressureGovernor::reclaim_probe(kRam));
	EXPECT_TRUE(plan.reclaim);
	EXPECT_EQ(PressureGovernor::reclaim_probe(kRam), 1 * kMiB);
	EXPECT_EQ(PressureGovernor::reclaim_quantum(kRam), 16 * kMiB);

	// The allowance is per tick: once reclaimed, nothing more until the next tick.
	g.governor.note_inflated(80 * kMiB, 1 * kMiB);
	g.guest.in.sample.free_pages = 20 * kMiB;
	plan = g.governor.plan(g.guest.in);
	EXPECT_EQ(plan.max_pages, 0u);
	EXPECT_FALSE(plan.reclaim);
	g.governor.note_held();
	// The balloon's own reclaim stalls are not the guest's pressure.
	g.guest.in.sample.alloc_stalls += 1 * kMiB;
	g.guest.in.sample.direct_scans += 4 * kMiB;
	EXPECT_TRUE(g.tick().resume);
	EXPECT_EQ(g.governor.level(), PressureLevel::kCalm);
	EXPECT_EQ(g.governor.plan(g.guest.in).max_pages, 1 * kMiB);
}

TEST(PressureGovernor, TheReclaimAllowanceDoublesEveryTwoCalmTicksAfterAReclaimUpToTheQuantum)
{
	Governed g;
	g.guest.in.sample.free_pages = 20 * kMiB; // nothing above the watermarks
	const auto reclaim_what_is_allowed = [&] {
		const uint64_t allowed = g.governor.plan(g.guest.in).max_pages;
		g.governor.note_inflated(0, allowed);
		return allowed;
	};
	// Ticks without a reclaim teach nothing: the allowance stays the probe.
	for (int i = 0; i < 5; i++)
		g.tick();
	EXPECT_EQ(g.governor.reclaim_allowance(kRam), 1 * kMiB);
	const uint64_t expected_mib[] = {1, 1, 2, 2, 4, 4, 8, 8, 16, 16, 16, 16};
	for (uint64_t mib_allowed : expected_mib) {
		EXPECT_EQ(reclaim_what_is_allowed(), mib_allowed * kMiB);
		g.tick();
		ASSERT_EQ(g.governor.level(), PressureLevel::kCalm);
	}
	// A tight tick (someone else's direct reclaim) sets it back to the probe.
	g.guest.in.sample.alloc_stalls += 2 * kMiB;
	g.tick();
	ASSERT_EQ(g.governor.level(), PressureLevel::kTight);
	EXPECT_EQ(g.governor.reclaim_allowance(kRam), 1 * kMiB);
}

TEST(PressureGovernor, PressureRightAfterItsOwnReclaimIsUndoneAtOnceAndMarksTheKnee)
{
	for (bool thrashing : {false, true}) {
		Governed g;
		g.guest.in.balloon_pages = 300 * kMiB;
		g.guest.in.sample.free_pages = 20 * kMiB;
		g.governor.note_inflated(0, g.governor.plan(g.guest.in).max_pages); // 1 MiB
		g.tick();
		g.governor.note_inflated(0, g.governor.plan(g.guest.in).max_pages); // 1 MiB
		g.tick();
		g.governor.note_inflated(0, g.governor.plan(g.guest.in).max_pages); // 2 MiB
		g.guest.in.sample.available_pages = 500 * kMiB;
		// What evicting working set looks like one tick later: refaults above T/4
		// (tight), or above T.
		g.guest.in.sample.refaults += thrashing ? 4 * kMiB : kMiB / 8;
		const TickDecision undo = g.tick();
		EXPECT_EQ(g.governor.level(),
			  thrashing ? PressureLevel::kThrashing : PressureLevel::kTight);
		EXPECT_EQ(undo.give_back_pages, 4 * kMiB) << "the streak's reclaim";
		EXPECT_FALSE(undo.resume);
		EXPECT_EQ(g.governor.knee_available_pages(), 500 * kMiB);
		EXPECT_TRUE(g.governor.holding());
		EXPECT_EQ(g.governor.plan(g.guest.in).max_pages, 0u);
		// Undone once: the next tick gives back only if thrashing goes on (sustained).
		g.guest.in.sample.refaults += thrashing ? 4 * kMiB : kMiB / 8;
		EXPECT_EQ(g.tick().give_back_pages,
			  thrashing ? g.governor.give_back_quantum(kRam) : 0u);
	}
	// A long streak gives back at most a reclaim quantum; two ticks without a reclaim end
	// the streak.
	Governed streak;
	streak.guest.in.balloon_pages = 300 * kMiB;
	for (int i = 0; i < 12; i++) {
		streak.governor.note_inflated(0, 2 * kMiB);
		streak.tick();
	}
	streak.guest.in.sample.refaults += kMiB / 8;
	EXPECT_EQ(streak.tick().give_back_pages, PressureGovernor::reclaim_quantum(kRam));
	Governed ended;
	ended.guest.in.balloon_pages = 300 * kMiB;
	ended.governor.note_inflated(0, 1 * kMiB);
	ended.tick();
	ended.tick();
	ended.tick();
	ended.guest.in.sample.refaults += kMiB / 8;
	EXPECT_EQ(ended.tick().give_back_pages, 0u);
	EXPECT_FALSE(ended.governor.holding()) << "tight alone does not hold";
	// The same pressure with no reclaim of its own behind it gives nothing back at once.
	Governed other;
	other.guest.in.balloon_pages = 300 * kMiB;
	other.guest.in.sample.refaults += 4 * kMiB;
	EXPECT_EQ(other.tick().give_back_pages, 0u);
	// Nor does a balloon that cannot give back; it still learns the knee and holds.
	Governed no_doo(false);
	no_doo.guest.in.balloon_pages = 300 * kMiB;
	no_doo.governor.note_inflated(0, 1 * kMiB); // only a mutant reclaims here
	no_doo.guest.in.sample.refaults += 4 * kMiB;
	EXPECT_EQ(no_doo.tick().give_back_pages, 0u);
	EXPECT_TRUE(no_doo.governor.holding());
}

TEST(PressureGovernor, ReclaimThatScansMuchAndFreesLittleStopsTheReclaimBeforeAnyRefault)
{
	// Cold cache: reclaim frees what it scans, however much it scans. The guest stays calm
	// and the allowance keeps growing.
	Governed cold;
	cold.guest.in.sample.free_pages = 20 * kMiB;
	for (int i = 0; i < 4; i++) {
		cold.governor.note_inflated(0, cold.governor.plan(cold.guest.in).max_pages);
		cold.guest.in.sample.reclaim_scanned += 64 * kMiB;
		cold.guest.in.sample.reclaim_stolen += 60 * kMiB;
		EXPECT_EQ(cold.tick().give_back_pages, 0u);
		EXPECT_EQ(cold.governor.level(), PressureLevel::kCalm) << "tick " << i;
	}
	EXPECT_EQ(cold.governor.plan(cold.guest.in).max_pages, 4 * kMiB);

	// Only the working set left: the probe's reclaim scans 1 GiB/s to free 2 MiB. No
	// refault yet, but the streak is undone at once and the knee learned there.
	Governed hot;
	hot.guest.in.balloon_pages = 300 * kMiB;
	hot.guest.in.sample.free_pages = 20 * kMiB;
	hot.governor.note_inflated(0, hot.governor.plan(hot.guest.in).max_pages); // 1 MiB
	hot.tick();
	hot.governor.note_inflated(0, hot.governor.plan(hot.guest.in).max_pages); // 1 MiB
	hot.guest.in.sample.available_pages = 450 * kMiB;
	hot.guest.in.sample.reclaim_scanned += 1024 * kMiB;
	hot.guest.in.sample.reclaim_stolen += 2 * kMiB;
	const TickDecision undo = hot.tick();
	EXPECT_EQ(hot.governor.level(), PressureLevel::kTight);
	EXPECT_EQ(undo.give_back_pages, 2 * kMiB);
	EXPECT_EQ(hot.governor.knee_available_pages(), 450 * kMiB);
	EXPECT_EQ(hot.governor.plan(hot.guest.in).max_pages, 0u);

	// The ratio's edge: one page freed in eight scanned is still cold cache; fewer is not.
	// And scanning below T per second is too little to judge.
	for (const auto& [scanned, freed, level] :
	     {std::tuple{64 * kMiB, 8 * kMiB, PressureLevel::kCalm},
	      std::tuple{64 * kMiB, 8 * kMiB - 1, PressureLevel::kTight},
	      std::tuple{PressureGovernor::refault_threshold(kRam) - 1, uint64_t{0},
			 PressureLevel::kCalm}}) {
		Governed g;
		g.guest.in.sample.reclaim_scanned += scanned;
		g.guest.in.sample.reclaim_stolen += freed;
		g.tick();
		EXPECT_EQ(g.governor.level(), level)
			<< scanned << " scanned, " << freed << " freed";
	}
}

TEST(PressureGovernor, ReclaimsNoMoreThanThePageCacheNoProcessMaps)
{
	Governed g;
	g.guest.in.sample.free_pages = 20 * kMiB; // nothing above the watermarks
	// 300 MiB on the file LRU, all but 512 KiB of it mapped: the 1 MiB probe is cut short.
	g.guest.in.sample.mapped_file_pages = 300 * kMiB - kMiB / 2;
	InflatePlan plan = g.governor.plan(g.guest.in);
	EXPECT_EQ(plan.max_pages, kMiB / 2);
	EXPECT_TRUE(plan.reclaim);
	// All of it mapped, or more mapped than the LRU holds (mapped shmem): no reclaim.
	for (const uint64_t mapped : {300 * kMiB, 400 * kMiB}) {
		g.guest.in.sample.mapped_file_pages = mapped;
		plan = g.governor.plan(g.guest.in);
		EXPECT_EQ(plan.max_pages, 0u) << mib(mapped) << " MiB mapped";
		EXPECT_FALSE(plan.reclaim);
	}
	// Free pages above the watermarks still go, without reclaim.
	g.guest.in.sample.free_pages = 100 * kMiB;
	plan = g.governor.plan(g.guest.in);
	EXPECT_EQ(plan.max_pages, 80 * kMiB);
	EXPECT_EQ(plan.free_pages, 80 * kMiB);
	EXPECT_FALSE(plan.reclaim);
}

TEST(PressureGovernor, ABalloonThatCannotGiveBackNeverReclaims)
{
	for (bool doo : {false, true}) {
		for (bool give_back : {false, true}) {
			Governed g(doo, enabled(give_back));
			const InflatePlan plan = g.governor.plan(g.guest.in);
			EXPECT_EQ(plan.reclaim, doo && give_back) << doo << give_back;
			EXPECT_EQ(plan.max_pages, 480 * kMiB + (doo && give_back ? 1 * kMiB : 0));
		}
	}
}

TEST(PressureGovernor, BatchesShrinkAndReclaimStopsAsPressureRises)
{
	Governed g;
	const uint64_t quantum = PressureGovernor::reclaim_quantum(kRam);
	EXPECT_TRUE(g.governor.plan(g.guest.in).reclaim);
	uint64_t last = g.governor.plan(g.guest.in).max_pages;
	// Someone else reclaims directly: tight.
	for (unsigned i = 1; i <= 3; i++) {
		g.guest.in.sample.alloc_stalls += 2 * kMiB;
		g.tick(false);
		ASSERT_EQ(g.governor.level(), PressureLevel::kTight);
		const InflatePlan plan = g.governor.plan(g.guest.in);
		EXPECT_FALSE(plan.reclaim) << "tick " << i;
		EXPECT_EQ(plan.max_pages, quantum >> i) << "tick " << i;
		EXPECT_LT(plan.max_pages, last);
		last = plan.max_pages;
	}
	// Refaults: nothing at all.
	g.guest.refault();
	g.tick(false);
	EXPECT_EQ(g.governor.level(), PressureLevel::kThrashing);
	EXPECT_EQ(g.governor.plan(g.guest.in).max_pages, 0u);
	// PSI-like stall time where the OS has it: 6% of the time stalled is thrashing.
	Governed s;
	s.guest.in.sample.has_stall_time = true;
	s.tick(false);
	s.guest.in.sample.stall_us += 60000;
	s.tick(false);
	EXPECT_EQ(s.governor.level(), PressureLevel::kThrashing);
}

TEST(PressureGovernor, NeverPlansBelowTheFloor)
{
	Governed g;
	const uint64_t floor = g.governor.floor_pages(kRam);
	for (uint64_t available = 0; available < 600 * kMiB; available += 7 * kMiB) {
		g.guest.in.sample.available_pages = available;
		g.guest.in.sample.free_pages = available;
		const InflatePlan plan = g.governor.plan(g.guest.in);
		EXPECT_LE(plan.max_pages, available > floor ? available - floor : 0)
			<< mib(available) << " MiB";
	}
}

TEST(PressureGovernor, LearnsTheWorkingSetFromWhereRefaultsBegan)
{
	Governed g;
	g.guest.in.sample.available_pages = 400 * kMiB;
	g.guest.refault();
	g.tick();
	EXPECT_EQ(g.governor.knee_available_pages(), 400 * kMiB);
	EXPECT_EQ(g.governor.floor_pages(kRam), 400 * kMiB + kRam / 32);
	// Later thrashing episodes raise it, never lower it.
	for (int i = 0; i < 20; i++)
		g.tick();
	g.guest.in.sample.available_pages = 300 * kMiB;
	g.guest.refault();
	g.tick();
	EXPECT_EQ(g.governor.knee_available_pages(), 400 * kMiB);
	// Once learned, the next inflate stops above it.
	for (int i = 0; i < 20; i++)
		g.tick();
	g.guest.in.sample.available_pages = 500 * kMiB;
	EXPECT_EQ(g.governor.plan(g.guest.in).max_pages, 500 * kMiB - (400 * kMiB + kRam / 32));
}

TEST(PressureGovernor, SustainedPressureGivesBackOnlyWithDeflateOnOom)
{
	for (bool doo : {false, true}) {
		Governed g(doo);
		g.guest.in.balloon_pages = 500 * kMiB;
		g.guest.refault();
		EXPECT_EQ(g.tick().give_back_pages, 0u) << "one tick is not sustained";
		g.guest.refault();
		const TickDecision second = g.tick();
		EXPECT_EQ(second.give_back_pages, doo ? g.governor.give_back_quantum(kRam) : 0u);
		EXPECT_FALSE(second.resume);
	}
	Governed off(true, enabled(false));
	off.guest.in.balloon_pages = 500 * kMiB;
	for (int i = 0; i < 5; i++) {
		off.guest.refault();
		EXPECT_EQ(off.tick().give_back_pages, 0u);
	}
	EXPECT_EQ(Governed().governor.give_back_quantum(kRam), 16 * kMiB);
}

TEST(PressureGovernor, HoldsReinflationUntilCalmForTheHoldTimeThenResumes)
{
	Governed g;
	g.guest.in.balloon_pages = 500 * kMiB;
	g.guest.refault();
	g.tick();
	g.guest.refault();
	EXPECT_NE(g.tick().give_back_pages, 0u);
	g.guest.in.sample.available_pages = 900 * kMiB; // plenty, once the hold is over
	for (uint32_t i = 1; i < PressureGovernor::kHoldCalmTicks; i++) {
		EXPECT_FALSE(g.tick().resume) << "calm tick " << i;
		EXPECT_EQ(g.governor.plan(g.guest.in).max_pages, 0u) << "calm tick " << i;
	}
	EXPECT_TRUE(g.tick().resume);
	EXPECT_GT(g.governor.plan(g.guest.in).max_pages, 0u);
	// Resumed once: the next tick has nothing to say until the inflate is held again.
	EXPECT_FALSE(g.tick().resume);
	// A tight tick does not count towards the hold.
	Governed t;
	t.guest.refault();
	t.tick();
	for (uint32_t i = 0; i < PressureGovernor::kHoldCalmTicks; i++) {
		t.guest.in.sample.alloc_stalls += 2 * kMiB;
		EXPECT_FALSE(t.tick().resume);
	}
	EXPECT_TRUE(t.governor.holding());
}

TEST(PressureGovernor, ANewTargetEndsTheHoldButNotTheFloor)
{
	Governed g;
	g.governor.note_target(1000);
	g.guest.in.sample.available_pages = 400 * kMiB;
	g.guest.refault();
	g.tick();
	g.tick();
	EXPECT_TRUE(g.governor.holding());
	g.governor.note_target(1000); // the same target read again: still held
	EXPECT_TRUE(g.governor.holding());
	g.governor.note_target(2000);
	EXPECT_FALSE(g.governor.holding());
	g.guest.in.sample.available_pages = 450 * kMiB;
	EXPECT_EQ(g.governor.plan(g.guest.in).max_pages, 450 * kMiB - (400 * kMiB + kRam / 32));
}

TEST(PressureGovernor, AGuestAtItsFloorIsNotWokenEveryTick)
{
	Governed g;
	g.guest.in.sample.available_pages = g.governor.floor_pages(kRam) + 1;
	g.governor.note_held();
	for (int i = 0; i < 30; i++)
		EXPECT_FALSE(g.tick().resume);
}

} // namespace
