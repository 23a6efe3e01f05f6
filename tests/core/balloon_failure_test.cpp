// SPDX-License-Identifier: GPL-2.0
//
// The core when the device does not acknowledge: a queue that refuses, a device that goes
// away with messages in flight, rings too small for a message. Every page stays accounted
// for: acknowledged pages move, the rest stay where the host may still need them, and they
// reach the guest only after a reset (release_after_reset()).
#include <gtest/gtest.h>

#include "core_guest.h"

namespace vbtest {
namespace {

constexpr int kInflate = static_cast<int>(vb::QueueKind::kInflate);
constexpr int kDeflate = static_cast<int>(vb::QueueKind::kDeflate);

TEST(BalloonFailure, InflateRefusedGivesBackEveryPageAndStalls)
{
	Guest guest(kStandard);
	guest.os.refuse[kInflate] = true;
	guest.set_target(3000);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	expect_accounted(guest, 0);
	EXPECT_EQ(guest.balloon.counters().wire_pages_inflated.get(), 0u);
	EXPECT_GT(guest.balloon.counters().queue_failures.get(), 0u);
	EXPECT_FALSE(guest.os.events_of(Event::kFree).empty()) << "the allocated pages went back";

	// Once the queue works again the same target is reached.
	guest.os.refuse[kInflate] = false;
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	expect_accounted(guest, 3000);
}

TEST(BalloonFailure, DeflateRefusedKeepsThePagesBallooned)
{
	Guest guest(kWithMustTellHost);
	guest.set_target(2000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.os.events.clear();

	guest.os.refuse[kDeflate] = true;
	guest.set_target(500);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	EXPECT_TRUE(guest.os.events_of(Event::kFree).empty()) << "a page freed the host still holds";
	expect_accounted(guest, 2000);
	EXPECT_EQ(guest.balloon.deflate_for_oom(), 0u);

	guest.os.refuse[kDeflate] = false;
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	expect_accounted(guest, 500);
}

// A deflate the host refuses: its pages stay ballooned but off the balloon list (Linux
// could not put them back: compaction may hold their lock), so compaction never sees them;
// the next deflate asks for them first, and a reset gives back whatever is still held.
TEST(BalloonFailure, UnacknowledgedDeflatesAreHeldOffTheListAndRetriedFirst)
{
	Guest guest(kWithMustTellHost);
	guest.balloon.set_max_chunk_order(0);
	guest.set_target(2048);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);

	guest.os.refuse[kDeflate] = true;
	guest.set_target(1024);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	ASSERT_EQ(guest.os.held.size(), 1024u) << "the refused step's pages are held apart";
	EXPECT_EQ(guest.os.balloon_list.size(), 1024u);
	expect_accounted(guest, 2048);
	const std::set<uint64_t> held(guest.os.held.begin(), guest.os.held.end());
	for (uint64_t pfn : guest.os.balloon_list)
		EXPECT_EQ(held.count(pfn), 0u) << "a held page is on the list, where compaction reaches it";

	// Refused again (the OOM path too): still held, still counted.
	EXPECT_EQ(guest.balloon.deflate_for_oom(), 0u);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	expect_accounted(guest, 2048);

	// The host acknowledges again: the held pages are the first it is told of.
	guest.os.refuse[kDeflate] = false;
	guest.os.events.clear();
	guest.set_target(2048 - 300);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	std::set<uint64_t> deflated = sent_pfns(guest.os, vb::QueueKind::kDeflate);
	EXPECT_EQ(deflated.size(), 300u);
	for (uint64_t pfn : deflated)
		EXPECT_EQ(held.count(pfn), 1u) << "page " << pfn << " deflated before the held ones";
	expect_accounted(guest, 2048 - 300);
	EXPECT_EQ(guest.os.held.size(), 1024u - 300);

	// Refused once more, then the device is reset: everything comes back, nothing twice.
	guest.os.refuse[kDeflate] = true;
	guest.set_target(0);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	expect_accounted(guest, 2048 - 300);
	guest.balloon.release_all();
	guest.balloon.release_after_reset();
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 0u);
	EXPECT_TRUE(guest.os.held.empty());
	EXPECT_TRUE(guest.os.balloon_list.empty());
	EXPECT_TRUE(guest.os.dequeued.empty());
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
	EXPECT_EQ(guest.os.allocator.counts().balloon, 0u);
	EXPECT_EQ(guest.os.managed_pages, 0);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

// Compaction moves listed pages while some are held: the held ones are not its to move,
// and the counts still add up.
TEST(BalloonFailure, MigrationBesideHeldPagesKeepsTheAccounts)
{
	Guest guest(kWithMustTellHost);
	guest.balloon.set_max_chunk_order(0);
	guest.set_target(512);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.os.refuse[kDeflate] = true;
	guest.set_target(256);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	ASSERT_EQ(guest.os.held.size(), 256u);
	guest.os.refuse[kDeflate] = false;

	auto spare = guest.os.allocator.allocate(0);
	ASSERT_TRUE(spare);
	const uint64_t old_pfn = guest.os.balloon_list.front();
	ASSERT_TRUE(guest.balloon.migrate_page(old_pfn, *spare));
	EXPECT_TRUE(guest.os.allocator.free_run(old_pfn, 1));
	expect_accounted(guest, 512);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	expect_accounted(guest, 256);
	EXPECT_TRUE(guest.os.held.empty());
}

// Four messages go out at once; the device acknowledges one and goes away.
TEST(BalloonFailure, DeviceGoneMidInflateKeepsLostPagesUntilReset)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(0);
	guest.os.acks_before_gone = 1;
	guest.set_target(1024); // one step: 4 messages of 256 PFNs, all in flight
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	// One message acknowledged, then the device goes: three lost in flight. The host may
	// hold those, so they stay in the balloon.
	EXPECT_EQ(sent_pfns(guest.os, vb::QueueKind::kInflate).size(), 4u * 256);
	expect_accounted(guest, 4 * 256);
	EXPECT_TRUE(guest.os.events_of(Event::kFree).empty());

	guest.balloon.release_all(); // the device is gone: nothing can be deflated
	expect_accounted(guest, 4 * 256);
	guest.balloon.release_after_reset();
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 0u);
	EXPECT_EQ(guest.os.balloon_list.size(), 0u);
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
	EXPECT_EQ(guest.os.managed_pages, 0);
}

TEST(BalloonFailure, DeviceGoneMidDeflateFreesOnlyAcknowledgedRuns)
{
	Guest guest(kWithMustTellHost);
	guest.balloon.set_max_chunk_order(0);
	guest.set_target(2048);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.os.events.clear();

	guest.os.acks_before_gone = 2;
	guest.set_target(0);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	uint64_t freed = 0;
	for (const Event& e : guest.os.events_of(Event::kFree))
		freed += e.count;
	EXPECT_EQ(freed, 2u * 256);
	expect_accounted(guest, 2048 - 2 * 256);

	guest.balloon.release_after_reset();
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 0u);
}

TEST(BalloonFailure, MigrationFailsUnlessBothMessagesAreAcknowledged)
{
	Guest guest(kWithMustTellHost);
	guest.set_target(16);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	const std::vector<uint64_t> list = guest.os.balloon_list;
	uint64_t old_pfn = list.front();
	auto spare = guest.os.allocator.allocate(0);
	ASSERT_TRUE(spare);

	guest.os.refuse[kInflate] = true;
	EXPECT_FALSE(guest.balloon.migrate_page(old_pfn, *spare));
	EXPECT_EQ(guest.os.balloon_list, list);
	EXPECT_TRUE(guest.os.events_of(Event::kAdd).empty() ||
		    guest.os.events_of(Event::kAdd).back().queue != vb::QueueKind::kDeflate);

	guest.os.refuse[kInflate] = false;
	guest.os.refuse[kDeflate] = true;
	guest.os.events.clear();
	EXPECT_FALSE(guest.balloon.migrate_page(old_pfn, *spare));
	EXPECT_EQ(guest.os.balloon_list, list) << "the list changes only when both are acked";
	EXPECT_EQ(guest.os.allocator.state(old_pfn), vbsim::BuddyAllocator::FrameState::kBalloon);
	EXPECT_EQ(guest.os.allocator.state(*spare), vbsim::BuddyAllocator::FrameState::kUsed);
	EXPECT_EQ(guest.balloon.counters().migrations.get(), 0u);

	guest.os.refuse[kDeflate] = false;
	EXPECT_TRUE(guest.balloon.migrate_page(old_pfn, *spare));
	EXPECT_EQ(guest.os.balloon_list.front(), *spare);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 16u);
}

// Chunks per message follow each queue's ring, the bitmap counted only on inflate.
TEST(BalloonFailure, ChunksPerMessageFollowEachRing)
{
	Guest guest(VB_FEATURE(VB_F_X_CHUNKED) | VB_FEATURE(VB_F_X_INIT_ON_INFLATE), {},
		    [](FakeOs& os) {
			    os.chunked = true;
			    os.queue_sizes[kInflate] = 256;
			    os.queue_sizes[kDeflate] = 2;
		    });
	guest.balloon.set_max_chunk_order(0);
	// Every other page taken, so each ballooned page is a chunk of its own.
	std::vector<uint64_t> holes;
	for (uint64_t i = 0; i < 400; i++) {
		auto pfn = guest.os.allocator.allocate(0);
		ASSERT_TRUE(pfn);
		if (i % 2)
			holes.push_back(*pfn);
	}
	guest.set_target(100);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.set_target(0);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled) << "a deflate message fits its ring";
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 0u);
	EXPECT_GT(guest.os.events_of(Event::kAdd).size(), 0u);
}

TEST(BalloonFailure, ABitmapThatCanNeverFitIsNeverSent)
{
	Guest guest(VB_FEATURE(VB_F_X_INIT_ON_INFLATE), {},
		    [](FakeOs& os) { os.queue_sizes[kInflate] = 1; });
	guest.set_target(64);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	EXPECT_TRUE(guest.os.events_of(Event::kAdd).empty()) << "a chain longer than the ring";
	expect_accounted(guest, 0);
}

TEST(BalloonFailure, ErrorLogsAreRateLimited)
{
	Guest guest(kStandard);
	guest.os.refuse[kInflate] = true;
	guest.set_target(64);
	for (int i = 0; i < 1000; i++)
		EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	EXPECT_EQ(guest.balloon.counters().queue_failures.get(), 1000u);
	// The 1st, 2nd, 4th... 512th: ten lines for a thousand failures.
	EXPECT_EQ(guest.os.log_lines.size(), 10u);
	EXPECT_NE(guest.os.log_lines.back().find("512 times"), std::string::npos)
		<< guest.os.log_lines.back();
}

TEST(BalloonFailure, AllocationFailureEndsTheStepWithNothingSent)
{
	Guest guest(kStandard);
	guest.os.fail_allocations = true;
	guest.set_target(1000);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	EXPECT_EQ(guest.balloon.counters().alloc_failures.get(), 1u);
	EXPECT_TRUE(sent_pfns(guest.os, vb::QueueKind::kInflate).empty());
	expect_accounted(guest, 0);
	guest.os.fail_allocations = false;
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	expect_accounted(guest, 1000);
}

} // namespace
} // namespace vbtest
