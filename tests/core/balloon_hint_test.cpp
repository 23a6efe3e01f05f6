// SPDX-License-Identifier: GPL-2.0
//
// Free page hinting in the core, against the inline device of fake_os.h: the command-id
// state machine case by case, with exact page counts.
#include <gtest/gtest.h>

#include <set>

#include "fake_os.h"

namespace vbtest {
namespace {

constexpr uint64_t kFirstPfn = 1024;
constexpr uint64_t kGuestPages = 16384; // 64 MiB: sixteen 4 MiB blocks
constexpr uint64_t kBlockPages = 1024;  // order 10
constexpr uint64_t kBlocks = kGuestPages / kBlockPages;
constexpr uint64_t kHint = VB_FEATURE(VB_F_FREE_PAGE_HINT);

struct HintGuest {
	explicit HintGuest(uint64_t features = kHint, vb::GuestTraits traits = {})
	    : os(kFirstPfn, kGuestPages), balloon(os, features, traits, workspace)
	{
		EXPECT_TRUE(balloon.prepare());
		balloon.start();
	}

	// The device writes a command id and raises a config change; the OS's callback notes
	// it. The OS's work item runs later (handle()).
	void device_writes(uint32_t cmd_id)
	{
		os.config[VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET / 4] = cmd_id;
		EXPECT_TRUE(balloon.hint_config_changed());
	}
	void handle() { balloon.handle_free_page_hint(); }

	std::vector<FakeOs::FreePageBuffer> ids() const
	{
		std::vector<FakeOs::FreePageBuffer> out;
		for (const auto& b : os.free_page_buffers)
			if (b.is_id)
				out.push_back(b);
		return out;
	}
	// Pages the device was told about, over every chain (a page hinted twice counts twice).
	uint64_t pages_sent() const
	{
		uint64_t bytes = 0;
		for (const auto& b : os.free_page_buffers)
			bytes += b.bytes();
		return bytes / 4096;
	}
	// In rounds that take blocks of the largest order only.
	uint64_t blocks_sent() const { return pages_sent() / kBlockPages; }
	uint64_t free_pages() const { return os.allocator.counts().free; }

	FakeOs os;
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon;
};

// The id, then chains of blocks, then STOP: the shape of every round. `blocks`: how many
// blocks of the largest order its chains carried.
void expect_round_shape(const std::vector<FakeOs::FreePageBuffer>& buffers, size_t first,
			uint32_t cmd_id, size_t* end, uint64_t* blocks = nullptr)
{
	ASSERT_LT(first, buffers.size());
	EXPECT_TRUE(buffers[first].is_id);
	EXPECT_EQ(buffers[first].cmd_id, cmd_id);
	size_t i = first + 1;
	uint64_t bytes = 0;
	while (i < buffers.size() && !buffers[i].is_id) {
		for (const vb::Segment& segment : buffers[i].segments) {
			EXPECT_EQ(segment.len % (kBlockPages * 4096), 0u)
				<< "hints are blocks of the largest order";
			EXPECT_EQ(segment.phys_addr % (kBlockPages * 4096), 0u)
				<< "blocks are naturally aligned";
			bytes += segment.len;
		}
		i++;
	}
	if (blocks)
		*blocks = bytes / (kBlockPages * 4096);
	ASSERT_LT(i, buffers.size()) << "round " << cmd_id << " was never closed";
	EXPECT_EQ(buffers[i].cmd_id, VB_CMD_ID_STOP);
	*end = i + 1;
}

TEST(FreePageHint, ARoundSendsTheIdThenEveryFreeBlockThenStop)
{
	HintGuest guest;
	guest.device_writes(5);
	guest.handle();

	size_t end;
	expect_round_shape(guest.os.free_page_buffers, 0, 5, &end);
	EXPECT_EQ(end, guest.os.free_page_buffers.size());
	for (const auto& id : guest.ids())
		EXPECT_EQ(id.len, 4u) << "every out buffer on free_page_vq is 4 bytes";
	EXPECT_EQ(guest.blocks_sent(), kBlocks);
	EXPECT_EQ(guest.free_pages(), 0u) << "every free block was hinted";
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages);
	EXPECT_EQ(guest.os.hint_list.size(), kBlocks);
	EXPECT_EQ(guest.balloon.counters().hint_rounds.get(), 1u);
	for (const Event& e : guest.os.events_of(Event::kConfigWrite))
		EXPECT_NE(e.first_pfn, VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET) << "the driver only reads the id";

	// The hinted blocks are exactly the ones on the hint list, each sent once.
	std::set<uint64_t> sent, held;
	for (const auto& b : guest.os.free_page_buffers) {
		for (const vb::Segment& segment : b.segments) {
			for (uint64_t pfn = segment.phys_addr / 4096;
			     pfn < (segment.phys_addr + segment.len) / 4096; pfn += kBlockPages)
				EXPECT_TRUE(sent.insert(pfn).second);
		}
	}
	for (const auto& run : guest.os.hint_list)
		held.insert(run.first_pfn);
	EXPECT_EQ(sent, held);
}

TEST(FreePageHint, OnlyBlocksOfTheLargestOrderAreTaken)
{
	HintGuest guest;
	// Fragment one block: its pages stay free, but no 4 MiB block contains them.
	auto page = guest.os.allocator.allocate(0);
	ASSERT_TRUE(page);
	guest.device_writes(2);
	guest.handle();
	EXPECT_EQ(guest.blocks_sent(), kBlocks - 1);
	EXPECT_EQ(guest.free_pages(), kBlockPages - 1) << "smaller free blocks stay with the guest";
}

// A round leaves what the guest's allocator keeps free for itself (in Linux the zones'
// high watermarks): below it the next allocation reclaims, and reclaim's shrinker pass
// would hand the blocks straight back. Largest-order blocks stop there, smaller ones keep
// 1/64 of the guest free besides.
TEST(FreePageHint, ARoundLeavesWhatTheAllocatorKeepsFree)
{
	HintGuest guest;
	guest.os.stats.present_mask = (1u << VB_S_MEMFREE) | (1u << VB_S_MEMTOT);
	guest.os.stats.value[VB_S_MEMTOT] = kGuestPages * 4096;
	guest.os.stats.value[VB_S_MEMFREE] = guest.free_pages() * 4096;
	guest.os.kept_free_pages = 2 * kBlockPages + kBlockPages / 2;
	const uint64_t reserve = kGuestPages / 64;
	guest.device_writes(26);
	guest.handle();

	// 16384 - 2560 = 13824 pages to take: 13 whole blocks, then of the 512 left the 256
	// that keep the reserve (one order-8 block).
	EXPECT_EQ(guest.balloon.counters().hint_blocks.get(), 14u);
	EXPECT_EQ(guest.pages_sent(), 13 * kBlockPages + 256);
	EXPECT_EQ(guest.balloon.hint_held_pages(), 13 * kBlockPages + 256);
	EXPECT_EQ(guest.free_pages(), guest.os.kept_free_pages + reserve);
	EXPECT_EQ(guest.os.free_page_buffers.back().cmd_id, VB_CMD_ID_STOP);

	guest.device_writes(VB_CMD_ID_DONE);
	guest.handle();
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

// Once the 4 MiB blocks run out, a round goes on with smaller ones (the host takes a hint of
// any length), down to order 4 and only while 1/64 of the guest stays free besides.
TEST(FreePageHint, SmallerBlocksFollowTheLargestAboveAReserve)
{
	HintGuest guest;
	auto page = guest.os.allocator.allocate(0); // one block left as 512+256+...+1 free pages
	ASSERT_TRUE(page);
	guest.os.stats.present_mask = (1u << VB_S_MEMFREE) | (1u << VB_S_MEMTOT);
	guest.os.stats.value[VB_S_MEMTOT] = kGuestPages * 4096;
	guest.os.stats.value[VB_S_MEMFREE] = guest.free_pages() * 4096;
	const uint64_t reserve = kGuestPages / 64;
	guest.device_writes(25);
	guest.handle();

	// 15 whole blocks leave 16383 - 15360 - 256 = 767 pages of budget: 512, (256 would
	// break the reserve) 128, 64, 32, 16, and nothing under order 4.
	const uint64_t small = 512 + 128 + 64 + 32 + 16;
	EXPECT_EQ(guest.balloon.hint_held_pages(), (kBlocks - 1) * kBlockPages + small);
	EXPECT_EQ(guest.balloon.counters().hint_wire_pages.get(),
		  (kBlocks - 1) * kBlockPages + small);
	EXPECT_GE(guest.free_pages(), reserve) << "the round drained the guest";
	std::set<uint64_t> sizes;
	for (const auto& run : guest.os.hint_list) {
		EXPECT_EQ(run.first_pfn % run.count, 0u) << "blocks are naturally aligned";
		sizes.insert(run.count);
	}
	EXPECT_EQ(sizes, (std::set<uint64_t>{16, 32, 64, 128, 512, kBlockPages}));
	EXPECT_EQ(guest.pages_sent(), (kBlocks - 1) * kBlockPages + small)
		<< "the chains carry every block";
	EXPECT_EQ(guest.os.free_page_buffers.back().cmd_id, VB_CMD_ID_STOP);

	guest.device_writes(VB_CMD_ID_DONE);
	guest.handle();
	EXPECT_EQ(guest.free_pages(), kGuestPages - 1);
	EXPECT_EQ(guest.os.freed_whole_block_pages, (kBlocks - 1) * kBlockPages + small);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

TEST(FreePageHint, ARepeatedIdIsAnsweredOnce)
{
	HintGuest guest;
	guest.device_writes(7);
	guest.handle();
	size_t after_first = guest.os.free_page_buffers.size();
	guest.device_writes(7); // the same id again, no STOP or DONE between
	guest.handle();
	EXPECT_EQ(guest.os.free_page_buffers.size(), after_first) << "the id must not travel twice";
	EXPECT_EQ(guest.balloon.counters().hint_rounds.get(), 1u);
	EXPECT_EQ(guest.balloon.counters().hint_ids_ignored.get(), 1u);
}

TEST(FreePageHint, StopKeepsTheBlocksAndAllowsTheIdAgain)
{
	HintGuest guest;
	guest.device_writes(9);
	guest.handle();
	guest.device_writes(VB_CMD_ID_STOP);
	guest.handle();
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages) << "STOP does not release hints";
	EXPECT_EQ(guest.free_pages(), 0u);
	// After STOP the device may issue the same id again: a new round (with nothing left
	// to hint, since every block is still held).
	guest.device_writes(9);
	guest.handle();
	ASSERT_EQ(guest.ids().size(), 4u);
	EXPECT_EQ(guest.ids()[2].cmd_id, 9u);
	EXPECT_EQ(guest.ids()[3].cmd_id, VB_CMD_ID_STOP);
	EXPECT_EQ(guest.balloon.counters().hint_rounds.get(), 2u);
}

TEST(FreePageHint, DoneGivesEveryBlockBackAndTheCountsBalance)
{
	HintGuest guest;
	guest.device_writes(3);
	guest.handle();
	ASSERT_EQ(guest.free_pages(), 0u);
	guest.device_writes(VB_CMD_ID_DONE);
	guest.handle();

	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.balloon.hint_held_pages(), 0u);
	EXPECT_TRUE(guest.os.hint_list.empty());
	EXPECT_EQ(guest.balloon.counters().hint_wire_pages_returned.get(), kGuestPages);
	EXPECT_EQ(guest.balloon.counters().hint_wire_pages_released_early.get(), 0u);
	EXPECT_TRUE(guest.os.events_of(Event::kInitialise).empty())
		<< "after DONE the driver need not write the pages";
	// Each block goes back as the one block it was taken as, and says so.
	EXPECT_EQ(guest.os.freed_whole_block_pages, kGuestPages);
	EXPECT_EQ(guest.os.events_of(Event::kFree).size(), kBlocks);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
	// A second DONE has nothing left to give: nothing is freed twice (the allocator
	// would fail the test on a double free).
	guest.device_writes(VB_CMD_ID_DONE);
	guest.handle();
	EXPECT_EQ(guest.free_pages(), kGuestPages);
}

TEST(FreePageHint, ANewIdDuringARoundClosesItAndStartsTheNext)
{
	HintGuest guest;
	int inserted = 0;
	guest.os.after_hint_insert = [&] {
		if (++inserted == 3)
			guest.device_writes(11);
	};
	guest.device_writes(10);
	guest.handle();

	const auto& buffers = guest.os.free_page_buffers;
	size_t end_first, end_second;
	uint64_t first_blocks;
	expect_round_shape(buffers, 0, 10, &end_first, &first_blocks);
	EXPECT_EQ(first_blocks, 3u) << "the round stops right after the id changed";
	EXPECT_EQ(end_first, 1 + 1 + 1u) << "its blocks go as one chain";
	expect_round_shape(buffers, end_first, 11, &end_second);
	EXPECT_EQ(end_second, buffers.size());
	EXPECT_EQ(guest.blocks_sent(), kBlocks);
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages) << "blocks of the old round stay held";
	EXPECT_EQ(guest.balloon.counters().hint_rounds.get(), 2u);
}

TEST(FreePageHint, DoneDuringARoundClosesItAndGivesEverythingBack)
{
	HintGuest guest;
	int inserted = 0;
	guest.os.after_hint_insert = [&] {
		if (++inserted == 2)
			guest.device_writes(VB_CMD_ID_DONE);
	};
	guest.device_writes(12);
	guest.handle();

	size_t end;
	expect_round_shape(guest.os.free_page_buffers, 0, 12, &end);
	EXPECT_EQ(guest.blocks_sent(), 2u);
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.balloon.hint_held_pages(), 0u);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

TEST(FreePageHint, StopDuringARoundClosesItAndKeepsTheBlocks)
{
	HintGuest guest;
	int inserted = 0;
	guest.os.after_hint_insert = [&] {
		if (++inserted == 4)
			guest.device_writes(VB_CMD_ID_STOP);
	};
	guest.device_writes(13);
	guest.handle();
	EXPECT_EQ(guest.blocks_sent(), 4u);
	EXPECT_EQ(guest.balloon.hint_held_pages(), 4 * kBlockPages);
	EXPECT_EQ(guest.free_pages(), kGuestPages - 4 * kBlockPages);
}

vb::GuestTraits pattern_guest()
{
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = true;
	traits.free_page_pattern = 0xaaaaaaaa;
	return traits;
}

TEST(FreePageHint, TheShrinkerTakesBlocksBackMidRoundAndTheRoundGoesOn)
{
	HintGuest guest(kHint, pattern_guest());
	int inserted = 0;
	uint64_t released = 0;
	guest.os.after_hint_insert = [&] {
		if (++inserted == 4)
			released = guest.balloon.hint_release(1); // rounded up to one block
	};
	guest.device_writes(14);
	guest.handle();

	EXPECT_EQ(released, kBlockPages);
	EXPECT_EQ(guest.balloon.counters().hint_wire_pages_released_early.get(), kBlockPages);
	// Released before DONE: the guest keeps a pattern, so the block goes back unmarked and
	// the OS writes the pattern as it frees it (the spec's rule for early reuse), once.
	EXPECT_EQ(guest.os.freed_initialised, 0u);
	EXPECT_EQ(guest.os.freed_whole_block_pages, kBlockPages);
	EXPECT_TRUE(guest.os.events_of(Event::kInitialise).empty()) << "the pattern written twice";
	// The round went on: the released block was free again and was hinted again.
	EXPECT_EQ(guest.blocks_sent(), kBlocks + 1);
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages);
	size_t end;
	expect_round_shape(guest.os.free_page_buffers, 0, 14, &end);
}

TEST(FreePageHint, TheShrinkerCountsAndReleasesWhatIsHeld)
{
	HintGuest guest;
	guest.device_writes(15);
	guest.handle();
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages);
	EXPECT_EQ(guest.balloon.hint_release(kBlockPages + 1), 2 * kBlockPages);
	EXPECT_EQ(guest.free_pages(), 2 * kBlockPages);
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages - 2 * kBlockPages);
	// Everything, even far more than is held.
	EXPECT_EQ(guest.balloon.hint_release(~0ull), kGuestPages - 2 * kBlockPages);
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.os.freed_whole_block_pages, kGuestPages) << "released early, still whole blocks";
	EXPECT_EQ(guest.balloon.hint_release(1), 0u);
	// DONE afterwards finds nothing to free twice.
	guest.device_writes(VB_CMD_ID_DONE);
	guest.handle();
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

TEST(FreePageHint, AfterDoneTheShrinkerNeedNotInitialise)
{
	HintGuest guest(kHint, pattern_guest());
	guest.device_writes(16);
	guest.handle();
	// DONE seen by the config callback but the work item has not run yet: the block still
	// goes back for the OS to write its pattern into, as does every block after DONE.
	guest.device_writes(VB_CMD_ID_DONE);
	EXPECT_EQ(guest.balloon.hint_release(1), kBlockPages);
	guest.handle();
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.os.freed_initialised, 0u) << "a hinted block trusted to hold the pattern";
	EXPECT_TRUE(guest.os.events_of(Event::kInitialise).empty());
	EXPECT_EQ(guest.balloon.counters().hint_wire_pages_released_early.get(), kBlockPages);
	EXPECT_EQ(guest.balloon.counters().hint_wire_pages_returned.get(),
		  kGuestPages - kBlockPages);
}

// A guest that keeps no pattern in free pages (Debian's default) writes nothing into the
// blocks it takes back early: no 4 MiB write per block in the middle of a migration.
TEST(FreePageHint, EarlyReleaseWritesNothingWithoutAPattern)
{
	HintGuest guest;
	guest.device_writes(24);
	guest.handle();
	EXPECT_EQ(guest.balloon.hint_release(~0ull), kGuestPages);
	guest.balloon.hint_device_reset();
	EXPECT_TRUE(guest.os.events_of(Event::kInitialise).empty());
	EXPECT_EQ(guest.free_pages(), kGuestPages);
}

TEST(FreePageHint, ASmallRingKeepsASlotForStopAndStillCarriesEveryBlock)
{
	HintGuest guest;
	guest.os.queue_capacity = 4;
	guest.device_writes(17);
	guest.handle();
	EXPECT_EQ(guest.blocks_sent(), kBlocks);
	EXPECT_LE(guest.os.max_free_page_in_flight, 4u);
	size_t end;
	expect_round_shape(guest.os.free_page_buffers, 0, 17, &end);
	EXPECT_EQ(end, guest.os.free_page_buffers.size());
}

TEST(FreePageHint, ADeviceResetMidRoundLosesNoBlock)
{
	HintGuest guest;
	guest.os.queue_capacity = 4; // the round must wait on the device, which then goes away
	int inserted = 0;
	guest.os.after_hint_insert = [&] {
		if (++inserted == 2)
			guest.os.device_gone = true;
	};
	guest.device_writes(18);
	guest.handle();
	EXPECT_LT(guest.blocks_sent(), kBlocks);
	uint64_t held = guest.balloon.hint_held_pages();
	EXPECT_GT(held, 0u);
	EXPECT_EQ(guest.free_pages() + held, kGuestPages);

	guest.balloon.hint_device_reset();
	EXPECT_EQ(guest.balloon.hint_held_pages(), 0u);
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.balloon.counters().hint_wire_pages_released_early.get(), held);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
	// After the reset, the same id starts a fresh round.
	guest.os.device_gone = false;
	guest.os.reset_free_page_queue();
	guest.os.queue_capacity = 128;
	guest.device_writes(18);
	guest.handle();
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages);
}

// Surprise removal mid-round with room on the ring: the next block finds the queue broken
// and ends the round. Nothing more is allocated, the chain gathered so far is refused (one
// warning), and the reset gives every held block back: none is lost.
TEST(FreePageHint, ADeviceGoneMidRoundStopsAtItsFirstFailure)
{
	HintGuest guest;
	int inserted = 0;
	guest.os.after_hint_insert = [&] {
		if (++inserted == 3)
			guest.os.device_gone = true;
	};
	guest.device_writes(20);
	guest.handle();
	EXPECT_EQ(guest.blocks_sent(), 0u) << "the broken queue took the chain";
	EXPECT_EQ(guest.balloon.counters().hint_blocks.get(), 3u);
	EXPECT_EQ(guest.balloon.hint_held_pages(), 3 * kBlockPages);
	// One more block was taken and, refused, went straight back: four allocations.
	EXPECT_EQ(guest.os.events_of(Event::kAlloc).size(), 4u);
	EXPECT_EQ(guest.free_pages(), kGuestPages - 3 * kBlockPages);
	EXPECT_GE(guest.balloon.counters().queue_failures.get(), 1u);
	ASSERT_EQ(guest.os.log_lines.size(), 1u);
	EXPECT_NE(guest.os.log_lines[0].find("refused 3 hint blocks"), std::string::npos)
		<< guest.os.log_lines[0];

	guest.balloon.hint_device_reset();
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.balloon.hint_held_pages(), 0u);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

// Remove or freeze asks a running round to stop: it closes with STOP at its next block,
// no new id starts a round until the reset, and the reset gives everything back.
TEST(FreePageHint, HintStopEndsARunningRoundUntilTheReset)
{
	HintGuest guest;
	int inserted = 0;
	guest.os.after_hint_insert = [&] {
		if (++inserted == 2)
			guest.balloon.hint_stop();
	};
	guest.device_writes(21);
	guest.handle();
	size_t end;
	uint64_t blocks;
	expect_round_shape(guest.os.free_page_buffers, 0, 21, &end, &blocks);
	EXPECT_EQ(blocks, 2u) << "the round closed right after the stop";
	EXPECT_EQ(end, 1 + 1 + 1u) << "with the chain gathered so far before its STOP";
	EXPECT_EQ(guest.balloon.hint_held_pages(), 2 * kBlockPages);
	EXPECT_TRUE(guest.balloon.hint_stopping()) << "what the OS's wait on free_page_vq reads";

	guest.device_writes(22);
	guest.handle();
	EXPECT_EQ(guest.os.free_page_buffers.size(), end) << "a round after the stop";

	guest.balloon.hint_device_reset();
	EXPECT_FALSE(guest.balloon.hint_stopping());
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	guest.os.reset_free_page_queue();
	guest.os.after_hint_insert = nullptr;
	guest.device_writes(23);
	guest.handle();
	EXPECT_EQ(guest.balloon.hint_held_pages(), kGuestPages) << "hinting runs again after the reset";
}

TEST(FreePageHint, NothingHappensWithoutTheFeature)
{
	HintGuest guest(0);
	guest.os.config[VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET / 4] = 5;
	EXPECT_FALSE(guest.balloon.hint_config_changed());
	guest.handle();
	EXPECT_TRUE(guest.os.free_page_buffers.empty());
	EXPECT_EQ(guest.balloon.hint_release(~0ull), 0u);
	EXPECT_EQ(guest.free_pages(), kGuestPages);
}

TEST(FreePageHint, HintingAndInflateShareNoPagesAndBothBalance)
{
	HintGuest guest(kHint | VB_FEATURE(VB_F_STATS_VQ));
	guest.os.config[VB_CONFIG_NUM_PAGES_OFFSET / 4] = 4096;
	while (guest.balloon.adjust_towards_target() == vb::StepResult::kMoreWork) {
	}
	const uint64_t balloon_allocations = guest.os.allocations_by_use[0];
	EXPECT_GT(balloon_allocations, 0u);
	EXPECT_EQ(guest.os.allocations_by_use[1], 0u) << "inflate asked for hint blocks";
	guest.device_writes(19);
	guest.handle();
	// Each hint block is asked for as one (kept whole, unmovable), never as balloon pages.
	EXPECT_EQ(guest.os.allocations_by_use[0], balloon_allocations);
	EXPECT_EQ(guest.os.allocations_by_use[1], guest.blocks_sent() + 1) << "the last one failed";
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 4096u);
	EXPECT_EQ(guest.balloon.hint_held_pages() + guest.os.allocator.counts().balloon, kGuestPages);
	for (const auto& run : guest.os.hint_list) {
		for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++)
			ASSERT_EQ(guest.os.allocator.state(pfn), vbsim::BuddyAllocator::FrameState::kUsed);
	}
	// Deflate while hints are held: unaffected.
	guest.os.config[VB_CONFIG_NUM_PAGES_OFFSET / 4] = 0;
	while (guest.balloon.adjust_towards_target() == vb::StepResult::kMoreWork) {
	}
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 0u);
	EXPECT_EQ(guest.free_pages(), 4096u);
	EXPECT_EQ(guest.os.freed_whole_block_pages, 0u) << "deflated runs are no hint blocks";
	guest.device_writes(VB_CMD_ID_DONE);
	guest.handle();
	EXPECT_EQ(guest.free_pages(), kGuestPages);
	EXPECT_EQ(guest.os.freed_whole_block_pages, kGuestPages - 4096u);
}

} // namespace
} // namespace vbtest
