// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "buddy_allocator.h"

namespace {

using vbsim::BuddyAllocator;

TEST(BuddyAllocator, StartsWithMaximalAlignedBlocks)
{
	BuddyAllocator allocator(1024, 4096); // 16 MiB at 4 MiB alignment: four order-10 blocks
	EXPECT_EQ(allocator.free_blocks(10), 4u);
	EXPECT_EQ(allocator.counts().free, 4096u);
	EXPECT_EQ(allocator.check_consistency(), "");

	BuddyAllocator ragged(3, 13); // frames 3..15
	EXPECT_EQ(ragged.free_blocks(0), 1u); // 3
	EXPECT_EQ(ragged.free_blocks(2), 1u); // 4..7
	EXPECT_EQ(ragged.free_blocks(3), 1u); // 8..15
	EXPECT_EQ(ragged.check_consistency(), "");
}

TEST(BuddyAllocator, BlocksAreNaturallyAlignedAndMergeBack)
{
	BuddyAllocator allocator(0, 2048);
	auto block = allocator.allocate(9);
	ASSERT_TRUE(block);
	EXPECT_EQ(*block % 512, 0u);
	auto page = allocator.allocate(0);
	ASSERT_TRUE(page);
	EXPECT_EQ(allocator.counts().used, 513u);
	EXPECT_TRUE(allocator.free_run(*page, 1));
	EXPECT_TRUE(allocator.free_run(*block, 512));
	EXPECT_EQ(allocator.free_blocks(BuddyAllocator::kMaxOrder), 2u) << "fully merged again";
	EXPECT_EQ(allocator.check_consistency(), "");
}

TEST(BuddyAllocator, AFreshAllocatorHandsOutTheLowestFramesFirstAsABootedLinux)
{
	// Linux frees boot memory to the tail of its free lists in address order: a booted
	// guest's memory comes from the bottom of RAM up, the untouched rest lies at the top.
	BuddyAllocator allocator(0, 4 * 1024); // four 4 MiB blocks
	std::vector<uint64_t> pages;
	for (int i = 0; i < 3; i++) {
		auto page = allocator.allocate(0);
		ASSERT_TRUE(page);
		pages.push_back(*page);
	}
	EXPECT_EQ(pages, (std::vector<uint64_t>{0, 1, 2}));
	auto block = allocator.allocate(9);
	ASSERT_TRUE(block);
	EXPECT_EQ(*block, 512u) << "the lowest free 2 MiB block, not one from the top";
	auto big = allocator.allocate(BuddyAllocator::kMaxOrder);
	ASSERT_TRUE(big);
	EXPECT_EQ(*big, 1024u) << "the lowest whole 4 MiB block";
	EXPECT_EQ(allocator.state(4095), BuddyAllocator::FrameState::kFree) << "the top is untouched";
	EXPECT_EQ(allocator.check_consistency(), "");
}

TEST(BuddyAllocator, APre510GuestsOrderHandsOutTheTopFirst)
{
	BuddyAllocator allocator(0, 4 * 1024);
	allocator.order_free_lists_top_first();
	auto big = allocator.allocate(BuddyAllocator::kMaxOrder);
	ASSERT_TRUE(big);
	EXPECT_EQ(*big, 3u * 1024) << "the highest 4 MiB block";
	EXPECT_EQ(allocator.state(0), BuddyAllocator::FrameState::kFree) << "the bottom is untouched";
	EXPECT_EQ(allocator.check_consistency(), "");
}

TEST(BuddyAllocator, ReportedBlocksGoBehindTheUnreportedOnesAsLinuxRotatesItsFreeList)
{
	// One batch of a reporting pass over 16 blocks in address order: the four lowest taken,
	// the list rotated to the first block not reported, the batch put back last first.
	BuddyAllocator allocator(0, 16 * 1024);
	uint64_t taken[4];
	ASSERT_EQ(allocator.isolate_unreported(10, taken, 4), 4u);
	EXPECT_EQ(std::vector<uint64_t>(taken, taken + 4),
		  (std::vector<uint64_t>{0, 1024, 2048, 3072}));
	allocator.rotate_unreported_to_front(10);
	for (size_t i = 4; i-- > 0;)
		ASSERT_TRUE(allocator.put_back_isolated(taken[i], 10, true));
	EXPECT_EQ(allocator.reported_pages(), 4u * 1024);
	allocator.rotate_unreported_to_front(10); // the pass ends
	EXPECT_EQ(allocator.check_consistency(), "");

	// Unreported memory first, from the bottom up; then the reported blocks, in their order.
	std::vector<uint64_t> order;
	for (int i = 0; i < 16; i++) {
		auto block = allocator.allocate(10);
		ASSERT_TRUE(block);
		order.push_back(*block / 1024);
	}
	EXPECT_EQ(order,
		  (std::vector<uint64_t>{4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3}));
	EXPECT_EQ(allocator.reported_pages(), 0u);
	EXPECT_EQ(allocator.check_consistency(), "");
}

TEST(BuddyAllocator, RotatingAListWithNothingUnreportedOrAnUnreportedHeadChangesNothing)
{
	BuddyAllocator allocator(0, 4 * 1024);
	allocator.rotate_unreported_to_front(10); // nothing reported: the head stays
	uint64_t taken[4];
	ASSERT_EQ(allocator.isolate_unreported(10, taken, 4), 4u);
	for (size_t i = 4; i-- > 0;)
		ASSERT_TRUE(allocator.put_back_isolated(taken[i], 10, true));
	allocator.rotate_unreported_to_front(10); // everything reported: the order stays
	allocator.rotate_unreported_to_front(BuddyAllocator::kMaxOrder + 1); // no such list
	EXPECT_EQ(allocator.check_consistency(), "");
	for (uint64_t expected = 0; expected < 4; expected++) {
		auto block = allocator.allocate(10);
		ASSERT_TRUE(block);
		EXPECT_EQ(*block, expected * 1024);
	}
}

TEST(BuddyAllocator, RefusesDoubleFreesAndFreesOfBalloonPages)
{
	BuddyAllocator allocator(0, 64);
	auto page = allocator.allocate(0);
	ASSERT_TRUE(page);
	EXPECT_TRUE(allocator.move_to_balloon(*page, 1));
	EXPECT_FALSE(allocator.free_run(*page, 1)) << "balloon pages are not the guest's to free";
	EXPECT_TRUE(allocator.move_from_balloon(*page, 1));
	EXPECT_TRUE(allocator.free_run(*page, 1));
	EXPECT_FALSE(allocator.free_run(*page, 1)) << "double free";
	EXPECT_FALSE(allocator.free_run(60, 10)) << "beyond the managed range";
	EXPECT_EQ(allocator.counts().free, 64u);
	EXPECT_EQ(allocator.check_consistency(), "");
}

TEST(BuddyAllocator, RandomWorkloadKeepsEveryInvariant)
{
	BuddyAllocator allocator(512, 8192);
	std::mt19937_64 random(12345);
	std::vector<std::pair<uint64_t, uint64_t>> held;
	std::set<uint64_t> owned;

	for (int round = 0; round < 20000; round++) {
		if (held.empty() || random() % 3 != 0) {
			unsigned order = random() % 6;
			auto block = allocator.allocate(order);
			if (!block)
				continue;
			for (uint64_t i = 0; i < (1ull << order); i++) {
				ASSERT_TRUE(owned.insert(*block + i).second) << "handed out twice";
			}
			held.push_back({*block, 1ull << order});
		} else {
			size_t pick = random() % held.size();
			auto [pfn, count] = held[pick];
			// Free in two pieces sometimes: runs need not match the allocation.
			uint64_t split = count > 1 && random() % 2 ? count / 2 : count;
			ASSERT_TRUE(allocator.free_run(pfn, split));
			if (split != count) {
				ASSERT_TRUE(allocator.free_run(pfn + split, count - split));
			}
			for (uint64_t i = 0; i < count; i++)
				owned.erase(pfn + i);
			held.erase(held.begin() + pick);
		}
	}
	EXPECT_EQ(allocator.counts().used, owned.size());
	EXPECT_EQ(allocator.check_consistency(), "");
}

} // namespace
