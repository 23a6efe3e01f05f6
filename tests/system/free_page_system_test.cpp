// SPDX-License-Identifier: GPL-2.0
//
// Free page hinting and free page reporting end to end: the driver core in the simulated
// guest (hint work item, shrinker, reporting passes) against the simulated device, with
// real guest RAM. Counts are exact; memory really leaves the host (resident size); pages
// read back as zero or poison.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "../sim/support/free_page_recorder.h"
#include "system_fixture.h"

namespace vbtest {
namespace {

using Recorder = vbsim::test::FreePageRecorder;
using RecordedEvent = Recorder::Event;

constexpr uint64_t kBlockPages = 1024; // order 10, what hinting hands over

MachineOptions hinting_machine(vbsim::BalloonProfile profile = vbsim::qemu_7_2_profile(
				       VB_FEATURE(VB_F_FREE_PAGE_HINT)))
{
	MachineOptions options;
	options.device.profile = profile;
	options.guest.free_page_hinting = true;
	return options;
}

MachineOptions reporting_machine(vbsim::BalloonProfile profile = vbsim::qemu_7_2_profile(
					 VB_FEATURE(VB_F_PAGE_REPORTING)))
{
	MachineOptions options;
	options.device.profile = profile;
	options.guest.page_reporting = true;
	return options;
}

struct HintMachine {
	explicit HintMachine(const MachineOptions& options = hinting_machine()) : machine(options)
	{
		machine.device.set_free_page_events(&recorder);
		machine.boot();
	}
	~HintMachine() { machine.device.set_free_page_events(nullptr); }

	const vb::BalloonCounters& core() { return machine.guest.core()->counters(); }
	// Starts a round and waits until the driver closed it with STOP.
	uint32_t run_round()
	{
		uint64_t stopped = machine.device.counters().hint_rounds_stopped.load();
		uint32_t id = machine.device.start_hint_round();
		EXPECT_TRUE(machine.device.transport().wait_until(
			[&] { return machine.device.counters().hint_rounds_stopped.load() > stopped; },
			kSettleTimeout))
			<< "the driver never closed round " << id;
		return id;
	}
	// The host says DONE; waits until the driver holds no hint.
	void finish()
	{
		machine.device.finish_hinting();
		EXPECT_TRUE(machine.guest.wait_for(
			[&] { return machine.guest.core()->hint_held_pages() == 0; }, kSettleTimeout));
	}

	Recorder recorder;
	Machine machine;
};

TEST(FreePageHintSystem, EveryFreeBlockIsHintedOnceAndDoneGivesEachBack)
{
	HintMachine m;
	ASSERT_TRUE(m.machine.guest.negotiated_features() & VB_FEATURE(VB_F_FREE_PAGE_HINT));
	// A workload holds 8 MiB and writes it.
	vbsim::UserMemory user = m.machine.guest.allocate_user_memory(2048, 0x5a);
	ASSERT_FALSE(user.oom_killed);
	const uint64_t free_before = m.machine.guest.allocator().counts().free;

	const uint32_t id = m.run_round();
	const uint64_t held = m.machine.guest.core()->hint_held_pages();
	EXPECT_EQ(held, free_before) << "all free memory sits in 4 MiB blocks here";
	EXPECT_EQ(m.machine.guest.allocator().free_blocks(vbsim::BuddyAllocator::kMaxOrder), 0u);
	EXPECT_EQ(m.recorder.bytes(RecordedEvent::kHinted, id), held * kPageBytes);
	EXPECT_EQ(m.machine.device.counters().wire_pages_hinted.load(), held);
	// Every hinted range is a whole block the guest really holds, none twice, none the
	// workload's.
	std::set<uint64_t> user_pfns;
	for (const vb::PageRun& run : user.runs)
		for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++)
			user_pfns.insert(pfn);
	// A chain merges neighbouring blocks into one range: each range is whole blocks.
	constexpr uint64_t kBlockBytes = kBlockPages * kPageBytes;
	std::set<uint64_t> hinted;
	for (const auto& e : m.recorder.events()) {
		if (e.kind != RecordedEvent::kHinted)
			continue;
		EXPECT_EQ(e.gpa % kBlockBytes, 0u);
		EXPECT_EQ(e.bytes % kBlockBytes, 0u);
		for (uint64_t gpa = e.gpa; gpa < e.gpa + e.bytes; gpa += kBlockBytes) {
			EXPECT_TRUE(hinted.insert(gpa).second) << "block hinted twice";
			EXPECT_TRUE(m.machine.guest.os().hint_list_contains(gpa / kPageBytes));
			EXPECT_FALSE(user_pfns.count(gpa / kPageBytes));
		}
	}
	auto events = m.recorder.events();
	ASSERT_GE(events.size(), 2u);
	EXPECT_EQ(events.front().kind, RecordedEvent::kStarted);
	EXPECT_EQ(events.back().kind, RecordedEvent::kStopped);

	m.finish();
	EXPECT_EQ(m.machine.guest.allocator().counts().free, free_before);
	EXPECT_EQ(m.core().hint_wire_pages_returned.get(), held);
	EXPECT_EQ(m.core().hint_wire_pages_released_early.get(), 0u);
	EXPECT_EQ(m.machine.guest.check_accounting(), "");
	m.machine.guest.free_user_memory(user);
}

TEST(FreePageHintSystem, AGuestWithLinuxsWatermarkKeepsItsMinFreePagesOutOfTheHints)
{
	// Linux refuses an allocation without reclaim below the min watermark, and below the
	// high watermarks (plus the DMA zone's lowmem reserve) the next allocation reclaims,
	// which hands the held blocks back through the shrinker. So a round leaves what the
	// allocator keeps (free_pages_kept(), derived from the min watermark as Linux derives
	// it) free and unhinted, and the host scans it. Smaller blocks, down to 64 KiB, also
	// leave a reserve of 1/64 of RAM, so the round ends within one smallest block of both.
	MachineOptions options = hinting_machine();
	const uint64_t watermark = 4 * kBlockPages + 100;
	options.guest.min_free_pages = watermark;
	HintMachine m(options);
	const uint64_t free_before = m.machine.guest.allocator().counts().free;
	const uint64_t kept = m.machine.guest.os().free_pages_kept();
	const uint64_t reserve = m.machine.guest_pages() / vbsim::SimGuest::Core::kHintReserveShare;
	// Linux's rule: min + 2 * max(min / 4, managed / 1000), and the DMA zone's reserve.
	ASSERT_GE(kept, watermark + 2 * (watermark / 4));
	ASSERT_GT(free_before, kept + reserve + kBlockPages);
	constexpr uint64_t kSmallestBlockPages = kBlockPages >> vbsim::SimGuest::Core::kHintOrdersBelowLargest;

	const uint32_t id = m.run_round();
	const uint64_t held = m.machine.guest.core()->hint_held_pages();
	const uint64_t left = m.machine.guest.allocator().counts().free;
	EXPECT_EQ(held + left, free_before);
	EXPECT_EQ(m.recorder.bytes(RecordedEvent::kHinted, id), held * kPageBytes);
	EXPECT_GE(left, kept) << "the hints took memory the allocator keeps free";
	EXPECT_LT(left, kept + reserve + kSmallestBlockPages) << "a block above what is kept was not hinted";
	// Not a whole number of 4 MiB blocks: the round went on with smaller ones (a chain
	// merges neighbours, so the ranges are whole smallest blocks, not single blocks).
	for (const auto& e : m.recorder.events()) {
		if (e.kind != RecordedEvent::kHinted)
			continue;
		EXPECT_EQ(e.bytes % (kSmallestBlockPages * kPageBytes), 0u);
	}
	EXPECT_NE(held % kBlockPages, 0u);
	m.finish();
	EXPECT_EQ(m.machine.guest.allocator().counts().free, free_before);
	EXPECT_EQ(m.machine.guest.check_accounting(), "");
}

TEST(FreePageHintSystem, LinuxsMinWatermarkForTheCalibrationGuest)
{
	// /proc/zoneinfo of the 2 GiB calibration guest (Debian 12, 6.1): min 86 (DMA) +
	// 11177 (DMA32); khugepaged's 11 pageblocks per zone set it.
	EXPECT_EQ(vbsim::linux_min_free_pages(2048ull << 20), 11264u);
	// Past 4 GiB a third zone (Normal) is populated.
	EXPECT_EQ(vbsim::linux_min_free_pages(8192ull << 20), 16896u);
	// A small guest: at most 5% of RAM.
	EXPECT_EQ(vbsim::linux_min_free_pages(256ull << 20), (256ull << 20) / 20 / 4096);
}

TEST(FreePageHintSystem, ANewRoundHintsOnlyWhatWasFreedSinceAndHeldBlocksStayHeld)
{
	HintMachine m;
	vbsim::UserMemory user = m.machine.guest.allocate_user_memory(2048, 0x5a); // 8 MiB
	const uint32_t first = m.run_round();
	const uint64_t held_first = m.machine.guest.core()->hint_held_pages();
	m.machine.guest.free_user_memory(user);
	const uint32_t second = m.run_round();
	EXPECT_GT(second, first);
	EXPECT_EQ(m.recorder.bytes(RecordedEvent::kHinted, second), 2048 * kPageBytes);
	EXPECT_EQ(m.machine.guest.core()->hint_held_pages(), held_first + 2048);
	EXPECT_EQ(m.machine.guest.allocator().counts().free, 0u);
	m.finish();
	EXPECT_EQ(m.machine.guest.allocator().counts().free, m.machine.guest_pages());
}

TEST(FreePageHintSystem, ADeviceThatNeverSaysDoneLeavesAllMemoryToTheGuestThroughTheShrinker)
{
	MachineOptions options = hinting_machine();
	options.guest.free_policy = {true, 0xaa}; // a guest that keeps a pattern in free pages
	HintMachine m(options);
	m.run_round();
	const uint64_t held = m.machine.guest.core()->hint_held_pages();
	ASSERT_EQ(m.machine.guest.allocator().counts().free, 0u);
	ASSERT_EQ(held, m.machine.guest_pages());

	// The workload wants every page: memory pressure runs the shrinker, block by block.
	vbsim::UserMemory user = m.machine.guest.allocate_user_memory(m.machine.guest_pages(), 0x33);
	EXPECT_FALSE(user.oom_killed);
	EXPECT_EQ(user.pages, m.machine.guest_pages());
	EXPECT_EQ(m.machine.guest.oom_notifications(), 0u);
	EXPECT_EQ(m.machine.guest.core()->hint_held_pages(), 0u);
	EXPECT_EQ(m.core().hint_wire_pages_released_early.get(), held);
	// Hinted pages reused before DONE were written first (the spec's rule), with the
	// guest's pattern, once each.
	EXPECT_GE(m.machine.guest.os().counters().pages_initialised_by_guest.load(), held);
	m.machine.guest.free_user_memory(user);
	EXPECT_EQ(m.machine.guest.check_accounting(), "");
}

// Without a pattern (Debian's default) the blocks the shrinker takes back are not written:
// the process that gets them writes them, which is all the host's dirty log needs.
TEST(FreePageHintSystem, WithoutAPatternEarlyReleaseWritesNothing)
{
	HintMachine m;
	m.run_round();
	const uint64_t held = m.machine.guest.core()->hint_held_pages();
	ASSERT_EQ(held, m.machine.guest_pages());
	const uint64_t written = m.machine.guest.os().counters().pages_initialised_by_guest.load();
	EXPECT_EQ(m.machine.guest.shrink_free_page_hints(~0ull), held);
	EXPECT_EQ(m.core().hint_wire_pages_released_early.get(), held);
	EXPECT_EQ(m.machine.guest.os().counters().pages_initialised_by_guest.load(), written);
	EXPECT_EQ(m.machine.guest.check_accounting(), "");
}

TEST(FreePageHintSystem, TheShrinkerReturnsWholeBlocksAndHintingGoesOnAfterwards)
{
	HintMachine m;
	m.run_round();
	const uint64_t held = m.machine.guest.core()->hint_held_pages();
	EXPECT_EQ(m.machine.guest.shrink_free_page_hints(128), kBlockPages) << "rounded up to a block";
	EXPECT_EQ(m.machine.guest.allocator().counts().free, kBlockPages);
	EXPECT_EQ(m.machine.guest.core()->hint_held_pages(), held - kBlockPages);
	// The next round picks the returned block up again.
	uint32_t id = m.run_round();
	EXPECT_EQ(m.recorder.bytes(RecordedEvent::kHinted, id), kBlockPages * kPageBytes);
	m.finish();
}

TEST(FreePageHintSystem, InflateAndDeflateGoOnWhileBlocksAreHeld)
{
	HintMachine m;
	vbsim::UserMemory user = m.machine.guest.allocate_user_memory(4096, 0x5a);
	m.run_round();
	m.machine.guest.free_user_memory(user); // 16 MiB the balloon can take
	EXPECT_EQ(m.machine.balloon_to(4096), vb::StepResult::kSettled);
	EXPECT_EQ(m.machine.device.host_owned_wire_pages(), 4096u);
	EXPECT_EQ(m.machine.balloon_to(0), vb::StepResult::kSettled);
	EXPECT_EQ(m.machine.device.host_owned_wire_pages(), 0u);
	m.finish();
	EXPECT_EQ(m.machine.guest.allocator().counts().free, m.machine.guest_pages());
}

TEST(FreePageHintSystem, ARoundWaitingOnASlowHostBlocksNeitherInflateNorDeflate)
{
	vbsim::BalloonProfile profile = vbsim::qemu_7_2_profile(VB_FEATURE(VB_F_FREE_PAGE_HINT));
	profile.free_page_queue_size = 8;
	HintMachine m(hinting_machine(profile));
	const vb::Balloon<vbsim::SimOs>* core = m.machine.guest.core();
	m.machine.device.hold_free_page_queue();
	m.machine.device.start_hint_round();
	// The round fills the ring (the id and six blocks; one slot stays for STOP) and waits
	// for the host, which takes nothing.
	ASSERT_TRUE(m.machine.device.transport().wait_until(
		[&] { return core->hint_held_pages() == 6 * kBlockPages; }, kSettleTimeout));

	EXPECT_EQ(m.machine.balloon_to(4096), vb::StepResult::kSettled);
	EXPECT_EQ(m.machine.device.host_owned_wire_pages(), 4096u);
	EXPECT_EQ(m.machine.balloon_to(0), vb::StepResult::kSettled);
	EXPECT_EQ(m.machine.device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(core->hint_held_pages(), 6 * kBlockPages) << "the round is still waiting";
	EXPECT_EQ(m.machine.device.counters().hint_rounds_started.load(), 0u);

	m.machine.device.release_free_page_queue();
	ASSERT_TRUE(m.machine.device.transport().wait_until(
		[&] { return m.machine.device.counters().hint_rounds_stopped.load() == 1; }, kSettleTimeout));
	EXPECT_EQ(core->hint_held_pages(), m.machine.guest_pages());
	m.finish();
	EXPECT_EQ(m.machine.guest.allocator().counts().free, m.machine.guest_pages());
}

TEST(FreePageHintSystem, UnbindingMidHintGivesEveryHeldBlockBack)
{
	HintMachine m;
	m.run_round();
	ASSERT_GT(m.machine.guest.core()->hint_held_pages(), 0u);
	m.machine.guest.remove();
	EXPECT_EQ(m.machine.guest.allocator().counts().free, m.machine.guest_pages());
	EXPECT_EQ(m.machine.guest.os().hint_list_pages(), 0u);
	EXPECT_EQ(m.machine.guest.allocator().check_consistency(), "");
}

TEST(FreePageHintSystem, APatternGuestRewritesTheHintedPagesItGetsBackAfterDone)
{
	MachineOptions options = hinting_machine();
	options.guest.free_policy = {true, 0xaa};
	HintMachine m(options);
	m.run_round();
	const uint64_t held = m.machine.guest.core()->hint_held_pages();
	const uint64_t written = m.machine.guest.os().counters().pages_initialised_by_guest.load();
	m.finish();
	// The device may have changed hinted pages before DONE: their content is undefined, so
	// a guest that keeps a pattern in free pages writes it again.
	EXPECT_EQ(m.machine.guest.os().counters().pages_initialised_by_guest.load(), written + held);
	auto block = m.machine.guest.allocator().allocate(10);
	ASSERT_TRUE(block);
	const uint8_t* p = m.machine.memory.translate(*block * kPageBytes, kBlockPages * kPageBytes);
	for (uint64_t i = 0; i < kBlockPages * kPageBytes; i++)
		ASSERT_EQ(p[i], 0xaa);
	EXPECT_TRUE(m.machine.guest.allocator().free_run(*block, kBlockPages));
}

TEST(FreePageHintSystem, AResetDuringARoundLosesNoBlock)
{
	vbsim::BalloonProfile profile = vbsim::qemu_7_2_profile(VB_FEATURE(VB_F_FREE_PAGE_HINT));
	profile.free_page_queue_size = 8; // the round must wait on the device, which then breaks
	MachineOptions options = hinting_machine(profile);
	// The id and a chain of 6 blocks (all the ring holds but STOP's slot) are served; the
	// block added when the id came back breaks the device.
	options.device.faults.on(VB_QUEUE_FREE_PAGE).break_after_chains = 2;
	HintMachine m(options);
	const auto* core = m.machine.guest.core();
	m.machine.device.start_hint_round();
	// The round stops when its wait finds the device asking for a reset; the work item ends.
	ASSERT_TRUE(m.machine.guest.wait_for(
		[&] { return m.machine.device.fault_counters().broke.load() && core->counters().queue_failures.get() > 0; },
		kSettleTimeout));
	const uint64_t held = core->hint_held_pages();
	EXPECT_GT(held, 0u);
	EXPECT_EQ(m.machine.guest.allocator().counts().free + held, m.machine.guest_pages());
	EXPECT_EQ(m.recorder.bytes(RecordedEvent::kHinted, m.machine.device.hint_cmd_id()),
		  6 * kBlockPages * kPageBytes)
		<< "the id and a chain of six blocks were served before the device broke";
	m.machine.guest.remove();
	EXPECT_EQ(m.machine.guest.allocator().counts().free, m.machine.guest_pages()) << "every held block came back";
	EXPECT_EQ(m.machine.guest.os().hint_list_pages(), 0u);
	EXPECT_EQ(m.machine.guest.allocator().check_consistency(), "");
}

TEST(FreePageHintSystem, FirecrackerOffersHintingOnRequest)
{
	HintMachine m(hinting_machine(vbsim::firecracker_profile(VB_FEATURE(VB_F_FREE_PAGE_HINT))));
	ASSERT_TRUE(m.machine.guest.negotiated_features() & VB_FEATURE(VB_F_FREE_PAGE_HINT));
	m.run_round();
	EXPECT_EQ(m.machine.device.queue_index(VB_QUEUE_FREE_PAGE), 2) << "dense: no statsq here";
	EXPECT_EQ(m.machine.guest.core()->hint_held_pages(), m.machine.guest_pages());
	m.finish();
}

// ---- Free page reporting ---------------------------------------------------------------

struct ReportMachine {
	explicit ReportMachine(const MachineOptions& options = reporting_machine()) : machine(options)
	{
		machine.device.set_free_page_events(&recorder);
		machine.boot();
	}
	~ReportMachine() { machine.device.set_free_page_events(nullptr); }

	// Waits until every free page of the guest is marked reported.
	bool all_free_reported()
	{
		auto& allocator = machine.guest.allocator();
		return machine.guest.wait_for(
			[&] {
				return allocator.isolated_pages() == 0 &&
				       allocator.reported_pages() == allocator.counts().free;
			},
			kSettleTimeout);
	}
	// The guest dirties all its memory and frees it again (after the reports in flight,
	// so none of it is isolated).
	void dirty_and_free(uint8_t byte)
	{
		ASSERT_TRUE(all_free_reported());
		vbsim::UserMemory user = machine.guest.allocate_user_memory(machine.guest_pages(), byte);
		ASSERT_FALSE(user.oom_killed);
		ASSERT_EQ(managed_resident(), machine.guest_pages() * kPageBytes) << "the workload touched it all";
		machine.guest.free_user_memory(user);
	}
	uint64_t managed_resident() const
	{
		return machine.memory.resident_bytes(machine.guest.allocator().first_pfn() * kPageBytes,
						     machine.guest_pages() * kPageBytes);
	}

	Recorder recorder;
	Machine machine;
};

bool bytes_are(const vbsim::GuestMemory& memory, uint64_t pfn, uint64_t pages, uint8_t value)
{
	const uint8_t* p = memory.translate(pfn * kPageBytes, pages * kPageBytes);
	for (uint64_t i = 0; i < pages * kPageBytes; i++)
		if (p[i] != value)
			return false;
	return true;
}

TEST(FreePageReportSystem, FreedMemoryLeavesTheHostAndComesBackAsZero)
{
	ReportMachine m;
	ASSERT_TRUE(m.machine.guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_REPORTING));
	m.dirty_and_free(0x5a);
	ASSERT_TRUE(m.all_free_reported());

	EXPECT_EQ(m.managed_resident(), 0u) << "every free page was reported and discarded";
	EXPECT_GE(m.machine.device.counters().wire_pages_reported_discarded.load(),
		  m.machine.guest_pages());
	EXPECT_EQ(m.machine.guest.core()->counters().report_failures.get(), 0u);
	EXPECT_GT(m.recorder.count(RecordedEvent::kReported), 0u);
	for (const auto& e : m.recorder.events())
		EXPECT_GE(e.bytes, 512 * kPageBytes) << "only large blocks are reported (pageblock order)";

	// Reported pages are ordinary free pages: allocated again they read as zero.
	auto block = m.machine.guest.allocator().allocate(9);
	ASSERT_TRUE(block);
	EXPECT_TRUE(bytes_are(m.machine.memory, *block, 512, 0));
	EXPECT_TRUE(m.machine.guest.allocator().free_run(*block, 512));
	// And usable: the workload gets every page back and writes it.
	vbsim::UserMemory user = m.machine.guest.allocate_user_memory(m.machine.guest_pages(), 0x77);
	EXPECT_FALSE(user.oom_killed);
	EXPECT_TRUE(bytes_are(m.machine.memory, user.runs[0].first_pfn, user.runs[0].count, 0x77));
	m.machine.guest.free_user_memory(user);
}

TEST(FreePageReportSystem, AReportedBlockIsReportedOnceUntilItIsUsedAgain)
{
	ReportMachine m;
	ASSERT_TRUE(m.all_free_reported());
	const uint64_t reported = m.machine.device.counters().wire_pages_reported_discarded.load();
	EXPECT_EQ(reported, m.machine.guest_pages());
	// Free memory that was never used again is not reported again, however long we wait
	// for passes to run (a pass only runs when a block forms).
	vbsim::UserMemory user = m.machine.guest.allocate_user_memory(1024, 0x11);
	ASSERT_FALSE(user.oom_killed);
	m.machine.guest.free_user_memory(user);
	ASSERT_TRUE(m.all_free_reported());
	EXPECT_EQ(m.machine.device.counters().wire_pages_reported_discarded.load(), reported + 1024)
		<< "exactly the reused block was reported again";
}

TEST(FreePageReportSystem, WithANonZeroPoisonReportedPagesKeepThePoison)
{
	MachineOptions options = reporting_machine();
	options.guest.free_policy = {true, 0xaa};
	ReportMachine m(options);
	ASSERT_TRUE(m.machine.guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_POISON));
	ASSERT_EQ(m.machine.device.poison_value(), 0xaaaaaaaau);
	m.dirty_and_free(0x5a); // freed memory is poisoned by the guest
	ASSERT_TRUE(m.all_free_reported());
	EXPECT_EQ(m.machine.device.counters().wire_pages_reported_discarded.load(), 0u);
	EXPECT_GE(m.machine.device.counters().wire_pages_reported_kept.load(),
		  m.machine.guest_pages());
	auto block = m.machine.guest.allocator().allocate(9);
	ASSERT_TRUE(block);
	EXPECT_TRUE(bytes_are(m.machine.memory, *block, 512, 0xaa)) << "reused pages hold the poison";
	EXPECT_TRUE(m.machine.guest.allocator().free_run(*block, 512));
}

TEST(FreePageReportSystem, WithAZeroPatternReportedPagesAreDiscardedAndReadAsThePattern)
{
	MachineOptions options = reporting_machine();
	options.guest.free_policy = {true, 0}; // init_on_free
	ReportMachine m(options);
	ASSERT_TRUE(m.machine.guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_POISON));
	m.dirty_and_free(0x5a);
	ASSERT_TRUE(m.all_free_reported());
	EXPECT_EQ(m.managed_resident(), 0u);
	auto block = m.machine.guest.allocator().allocate(9);
	ASSERT_TRUE(block);
	EXPECT_TRUE(bytes_are(m.machine.memory, *block, 512, 0));
	EXPECT_TRUE(m.machine.guest.allocator().free_run(*block, 512));
}

TEST(FreePageReportSystem, APatternGuestDoesNotReportToAHostThatCannotKeepThePattern)
{
	// cloud-hypervisor offers reporting but not PAGE_POISON.
	MachineOptions options = reporting_machine(vbsim::cloud_hypervisor_profile(VB_FEATURE(VB_F_PAGE_REPORTING)));
	options.guest.free_policy = {true, 0xaa};
	Machine machine(options);
	machine.boot();
	EXPECT_FALSE(machine.guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_REPORTING));
	EXPECT_EQ(machine.device.queue_index(VB_QUEUE_REPORTING), -1);
}

TEST(FreePageReportSystem, CloudHypervisorAndFirecrackerReportToo)
{
	for (const auto& profile : {vbsim::cloud_hypervisor_profile(VB_FEATURE(VB_F_PAGE_REPORTING)),
				    vbsim::firecracker_profile(VB_FEATURE(VB_F_PAGE_REPORTING))}) {
		ReportMachine m(reporting_machine(profile));
		ASSERT_TRUE(m.machine.guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_REPORTING)) << profile.name;
		m.dirty_and_free(0x5a);
		ASSERT_TRUE(m.all_free_reported()) << profile.name;
		EXPECT_EQ(m.managed_resident(), 0u) << profile.name;
	}
}

TEST(FreePageReportSystem, AProgramStartedAfterAReportPassGetsTheBottomOfRAMAsOnLinux)
{
	// Linux's pass puts each reported batch back where it was in its list and the blocks it
	// has not reported yet in front: a booted guest's memory still comes from the bottom of
	// RAM up after its first pass (the simulated guest once put every block back reversed,
	// so a program started after reporting got the top of RAM, and a migration's bulk pass
	// reached its data only after the untouched memory).
	Machine machine(reporting_machine());
	machine.boot();
	auto& allocator = machine.guest.allocator();
	ASSERT_TRUE(machine.guest.wait_for(
		[&] {
			return allocator.isolated_pages() == 0 &&
			       allocator.reported_pages() == allocator.counts().free;
		},
		kSettleTimeout));
	const uint64_t quarter = machine.guest_pages() / 4;
	vbsim::UserMemory user = machine.guest.allocate_user_memory(quarter, 0x5a);
	ASSERT_FALSE(user.oom_killed);
	ASSERT_EQ(user.pages, quarter);
	uint64_t highest = 0;
	for (const vb::PageRun& run : user.runs)
		highest = std::max(highest, run.first_pfn + run.count - allocator.first_pfn());
	EXPECT_LT(highest, machine.guest_pages() / 2)
		<< "a quarter of RAM allocated after the pass reaches " << highest << " of "
		<< machine.guest_pages() << " pages";
	machine.guest.free_user_memory(user);
	machine.guest.remove();
}

TEST(FreePageReportSystem, HeldReportingRunsNoPassUntilReleasedAndAProgramAllocatesBelowIt)
{
	// 512 MiB: 128 blocks of 4 MiB, a batch of 32 per pass, four passes. After all of them
	// the last batch (the top 128 MiB) heads the list, as in Linux, so a program that
	// allocates after a complete report starts at the top; one that allocates while
	// reporting is held (Linux: before its first passes) gets the bottom.
	MachineOptions options = reporting_machine();
	options.ram_bytes = 512ull << 20;
	options.guest.hold_reporting = true;
	Machine machine(options);
	machine.boot();
	auto& allocator = machine.guest.allocator();
	EXPECT_FALSE(machine.guest.wait_for([&] { return machine.guest.report_passes() > 0; },
					    std::chrono::milliseconds(200)))
		<< "a pass ran while reporting was held (report_delay is 2 ms)";
	EXPECT_EQ(allocator.reported_pages(), 0u);

	const uint64_t quarter = machine.guest_pages() / 4;
	vbsim::UserMemory early = machine.guest.allocate_user_memory(quarter, 0x5a);
	ASSERT_EQ(early.pages, quarter);
	uint64_t highest = 0;
	for (const vb::PageRun& run : early.runs)
		highest = std::max(highest, run.first_pfn + run.count - allocator.first_pfn());
	EXPECT_LT(highest, machine.guest_pages() / 2);

	machine.guest.release_reporting();
	ASSERT_TRUE(machine.guest.wait_for(
		[&] {
			return machine.guest.reporting_idle() &&
			       allocator.unreported_free_blocks(9) == 0 &&
			       allocator.unreported_free_blocks(10) == 0;
		},
		kSettleTimeout));
	EXPECT_GE(machine.guest.report_passes(), 3u);
	// After the complete report the top comes first.
	vbsim::UserMemory late = machine.guest.allocate_user_memory(1024, 0x5a);
	ASSERT_EQ(late.pages, 1024u);
	EXPECT_GE(late.runs.at(0).first_pfn - allocator.first_pfn(), machine.guest_pages() * 3 / 4);
	machine.guest.free_user_memory(late);
	machine.guest.free_user_memory(early);
	machine.guest.remove();
}

TEST(FreePageReportSystem, ADeviceThatVanishesMidReportLosesNoPageAndMarksNothing)
{
	MachineOptions options = reporting_machine();
	options.device.faults.on(VB_QUEUE_REPORTING).vanish_after_chains = 1;
	Machine machine(options);
	machine.boot();
	auto& allocator = machine.guest.allocator();
	// The first report (all free memory at boot) is acknowledged...
	ASSERT_TRUE(machine.guest.wait_for(
		[&] { return allocator.isolated_pages() == 0 && allocator.reported_pages() == allocator.counts().free; },
		kSettleTimeout));
	// ...the next one, for a block the workload used and freed, is taken and never returned.
	vbsim::UserMemory user = machine.guest.allocate_user_memory(1024, 0x5a);
	ASSERT_FALSE(user.oom_killed);
	const uint64_t used_pfn = user.runs.at(0).first_pfn;
	machine.guest.free_user_memory(user);
	ASSERT_TRUE(machine.guest.wait_for(
		[&] {
			return machine.guest.core()->counters().report_failures.get() > 0 &&
			       allocator.isolated_pages() == 0;
		},
		kSettleTimeout));
	EXPECT_TRUE(machine.device.fault_counters().vanished.load());
	EXPECT_EQ(machine.guest.core()->counters().reports.get(), 1u);
	// Exactly the acknowledged report's blocks are marked; every page is free again.
	EXPECT_EQ(allocator.reported_pages(), machine.guest_pages() - 1024)
		<< "the block of the lost report is not marked";
	EXPECT_FALSE(allocator.is_reported(used_pfn));
	EXPECT_EQ(allocator.counts().free, machine.guest_pages());
	machine.guest.remove();
	EXPECT_EQ(allocator.counts().free, machine.guest_pages());
	EXPECT_EQ(allocator.check_consistency(), "");
}

TEST(FreePageReportSystem, BallooningAndReportingShareTheGuestWithoutLosingPages)
{
	MachineOptions options = reporting_machine();
	ReportMachine m(options);
	ASSERT_TRUE(m.all_free_reported());
	EXPECT_EQ(m.machine.balloon_to(4096), vb::StepResult::kSettled);
	ASSERT_TRUE(m.all_free_reported());
	vbsim::UserMemory user = m.machine.guest.allocate_user_memory(m.machine.guest.allocator().counts().free, 0x5a);
	ASSERT_FALSE(user.oom_killed);
	m.machine.guest.free_user_memory(user);
	ASSERT_TRUE(m.all_free_reported());
	EXPECT_EQ(m.machine.balloon_to(0), vb::StepResult::kSettled);
	ASSERT_TRUE(m.all_free_reported());
	EXPECT_EQ(m.machine.device.counters().rejected_by(vbsim::BalloonRejection::kReportedBalloonPage), 0u);
	EXPECT_EQ(m.machine.guest.check_accounting(), "");
}

} // namespace
} // namespace vbtest
