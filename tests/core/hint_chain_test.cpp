// SPDX-License-Identifier: GPL-2.0
//
// The free page hinter's chains (hint_chain_packer.h): the packer on its own (order, merges,
// limits, tokens, and a property test over random block sets), then through a hinting round
// against the inline device of fake_os.h (what the device sees, the 16-chain limit, room
// given back per block, refusals and stops that lose no block).
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <vector>

#include "fake_os.h"
#include "vballoon/core/hint_chain_packer.h"

namespace vb
{

// For EXPECT_EQ on segments (found by argument-dependent lookup).
static bool operator==(const Segment& a, const Segment& b)
{
	return a.phys_addr == b.phys_addr && a.len == b.len;
}

[[maybe_unused]] static void PrintTo(const Segment& s, std::ostream* os)
{
	*os << "{page " << s.phys_addr / 4096 << " +" << s.len / 4096 << " pages}";
}

} // namespace vb

namespace vbtest
{
namespace
{

constexpr uint64_t kPage = 4096;
constexpr uint64_t kBlock = 4ull << 20; // order 10

using Packer = vb::HintChainPacker;

struct PackerFixture {
	Packer::Blocks blocks;
	Packer packer{blocks};

	std::vector<vb::Segment> merged()
	{
		uint32_t count = packer.merge();
		return std::vector<vb::Segment>(packer.merged(), packer.merged() + count);
	}
};

TEST(HintChain, BlocksAreSortedAndOnlyNeighboursMerged)
{
	PackerFixture f;
	// Blocks 5, 1, 2, 7, 0, 9 (in units of a block), as an allocator may hand them out.
	for (uint64_t block : {5, 1, 2, 7, 0, 9})
		f.packer.add({block * kBlock, static_cast<uint32_t>(kBlock)});
	EXPECT_EQ(f.packer.pending_count(), 6u);
	const std::vector<vb::Segment> want = {
		{0, static_cast<uint32_t>(3 * kBlock)},
		{5 * kBlock, static_cast<uint32_t>(kBlock)},
		{7 * kBlock, static_cast<uint32_t>(kBlock)},
		{9 * kBlock, static_cast<uint32_t>(kBlock)},
	};
	EXPECT_EQ(f.merged(), want);
	// The blocks as added stay for a chain that goes one buffer per block.
	EXPECT_EQ(f.packer.pending()[0].phys_addr, 5 * kBlock);
	EXPECT_EQ(f.packer.pending()[5].phys_addr, 9 * kBlock);
}

TEST(HintChain, AMergedSegmentNeverOutgrowsADescriptor)
{
	PackerFixture f;
	// 1024 neighbouring blocks of 4 MiB would be 4 GiB: one descriptor holds 4 GiB - 1.
	for (uint64_t block = 0; block < Packer::kBlocksPerChainMax; block++)
		f.packer.add({block * 2 * kBlock, static_cast<uint32_t>(2 * kBlock)});
	EXPECT_TRUE(f.packer.full());
	const auto segments = f.merged();
	uint64_t bytes = 0;
	for (const vb::Segment& segment : segments) {
		EXPECT_GT(segment.len, 0u);
		bytes += segment.len;
	}
	EXPECT_EQ(bytes, Packer::kBlocksPerChainMax * 2 * kBlock);
	EXPECT_EQ(segments.size(), 2u) << "each segment as long as 32 bits allow, in whole blocks";
}

// Firecracker's compact_page_frame_numbers property: over random block sets in random
// order, no page lost or added, sorted, and no two segments that could have been one.
TEST(HintChain, AnyBlockSetIsCarriedWholeSortedAndMerged)
{
	std::mt19937_64 random(29);
	for (int round = 0; round < 500; round++) {
		PackerFixture f;
		std::set<uint64_t> pages;
		std::vector<vb::Segment> added;
		const uint32_t count = 1 + random() % Packer::kBlocksPerChainMax;
		uint64_t next = random() % 64;
		for (uint32_t i = 0; i < count; i++) {
			const unsigned order = random() % 4;
			const uint64_t pages_of_block = 1ull << order;
			next = (next + pages_of_block - 1) / pages_of_block *
			       pages_of_block; // aligned
			added.push_back(
				{next * kPage, static_cast<uint32_t>(pages_of_block * kPage)});
			for (uint64_t p = next; p < next + pages_of_block; p++)
				pages.insert(p);
			next += pages_of_block + (random() % 3 == 0 ? random() % 8 : 0);
		}
		std::shuffle(added.begin(), added.end(), random);
		for (const vb::Segment& block : added)
			f.packer.add(block);
		const auto segments = f.merged();
		std::set<uint64_t> carried;
		for (size_t i = 0; i < segments.size(); i++) {
			for (uint64_t p = segments[i].phys_addr / kPage;
			     p < (segments[i].phys_addr + segments[i].len) / kPage; p++)
				ASSERT_TRUE(carried.insert(p).second)
					<< "page " << p << " carried twice, round " << round;
			if (i > 0) {
				const uint64_t end =
					segments[i - 1].phys_addr + segments[i - 1].len;
				ASSERT_LT(end, segments[i].phys_addr)
					<< "unsorted or unmerged neighbours, round " << round;
			}
		}
		ASSERT_EQ(carried, pages) << "round " << round;
	}
}

TEST(HintChain, ChainTokensGiveBackTheirBlocksOnce)
{
	PackerFixture f;
	std::vector<void*> tokens;
	for (uint32_t i = 0; i < Packer::kChainsInFlightMax; i++) {
		void* token = f.packer.claim_chain(i + 2);
		ASSERT_NE(token, nullptr);
		EXPECT_EQ(std::count(tokens.begin(), tokens.end(), token), 0)
			<< "a slot taken twice";
		tokens.push_back(token);
	}
	EXPECT_EQ(f.packer.claim_chain(2), nullptr) << "more than 16 chains in flight";
	EXPECT_EQ(f.packer.take_used(tokens[3]), 5u);
	EXPECT_EQ(f.packer.take_used(tokens[3]), 0u) << "a chain returned twice";
	int other = 0;
	EXPECT_EQ(f.packer.take_used(&other), 0u) << "a token that is no chain";
	EXPECT_EQ(f.packer.claim_chain(7), tokens[3]) << "the returned chain's slot is free again";
	f.packer.release_chain(tokens[0]);
	EXPECT_EQ(f.packer.take_used(tokens[0]), 0u) << "a refused chain is no chain on the ring";
	f.packer.reset();
	for (void* token : tokens)
		EXPECT_EQ(f.packer.take_used(token), 0u) << "a chain survived the reset";
}

// ---- Through a hinting round ------------------------------------------------------------

constexpr uint64_t kFirstPfn = 1024;
constexpr uint64_t kBlockPages = kBlock / kPage;
constexpr uint64_t kHint = VB_FEATURE(VB_F_FREE_PAGE_HINT);

struct RoundGuest {
	explicit RoundGuest(uint64_t pages, vb::GuestTraits traits = {})
	    : os(kFirstPfn, pages), balloon(os, kHint, traits, workspace)
	{
		EXPECT_TRUE(balloon.prepare());
		balloon.start();
	}
	void round(uint32_t cmd_id)
	{
		os.config[VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET / 4] = cmd_id;
		EXPECT_TRUE(balloon.hint_config_changed());
		balloon.handle_free_page_hint();
	}
	std::vector<FakeOs::FreePageBuffer> chains() const
	{
		std::vector<FakeOs::FreePageBuffer> out;
		for (const auto& b : os.free_page_buffers)
			if (!b.is_id)
				out.push_back(b);
		return out;
	}
	uint64_t held_pages_on_list() const
	{
		uint64_t pages = 0;
		for (const vb::PageRun& run : os.hint_list)
			pages += run.count;
		return pages;
	}

	FakeOs os;
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon;
};

// Free blocks 0-2, 4-6, 8-10 and 12-15 (3, 7 and 11 in use): the round's one chain names
// them as four sorted segments, and nothing between them.
TEST(HintChain, ARoundsBlocksTravelAsOneSortedChainOfNeighbourRuns)
{
	RoundGuest guest(16 * kBlockPages);
	std::vector<uint64_t> blocks;
	while (auto pfn = guest.os.allocator.allocate(10))
		blocks.push_back(*pfn);
	ASSERT_EQ(blocks.size(), 16u);
	for (uint64_t pfn : blocks) {
		const uint64_t block = (pfn - kFirstPfn) / kBlockPages;
		if (block != 3 && block != 7 && block != 11) {
			ASSERT_TRUE(guest.os.allocator.free_run(pfn, kBlockPages));
		}
	}
	guest.round(2);

	const auto chains = guest.chains();
	ASSERT_EQ(chains.size(), 1u) << "every block of the round in one chain";
	const uint64_t base = kFirstPfn * kPage;
	const std::vector<vb::Segment> want = {
		{base, static_cast<uint32_t>(3 * kBlock)},
		{base + 4 * kBlock, static_cast<uint32_t>(3 * kBlock)},
		{base + 8 * kBlock, static_cast<uint32_t>(3 * kBlock)},
		{base + 12 * kBlock, static_cast<uint32_t>(4 * kBlock)},
	};
	EXPECT_EQ(chains[0].segments, want);
	EXPECT_EQ(guest.held_pages_on_list(), 13 * kBlockPages);
	EXPECT_EQ(guest.os.free_page_buffers.back().cmd_id, VB_CMD_ID_STOP);
}

// Single pages as blocks (a guest whose largest order is 0): 16384 blocks, 32 chains of
// 512. The first 16 go as chains; with all 16 on the ring (this device returns nothing
// until the driver waits) the rest go one buffer per block. Then the device returns
// them all and every block's descriptor is free again.
TEST(HintChain, NoMoreThanSixteenChainsInFlightAndTheRestOneBufferPerBlock)
{
	vb::GuestTraits traits;
	traits.max_alloc_order = 0;
	constexpr uint64_t kPages = 16384;
	RoundGuest guest(kPages, traits);
	guest.os.hint_block_bytes = kPage;
	guest.os.queue_capacity = 20000;
	guest.round(3);

	const auto chains = guest.chains();
	size_t multi = 0, single = 0;
	uint64_t pages = 0;
	for (const auto& chain : chains) {
		pages += chain.bytes() / kPage;
		if (chain.bytes() > kPage)
			multi++;
		else
			single++;
	}
	EXPECT_EQ(pages, kPages);
	EXPECT_EQ(guest.os.max_free_page_chains_in_flight, vb::HintChainPacker::kChainsInFlightMax);
	EXPECT_EQ(multi, vb::HintChainPacker::kChainsInFlightMax);
	EXPECT_EQ(single, kPages - vb::HintChainPacker::kChainsInFlightMax *
					   vb::HintChainPacker::kBlocksPerChainMax);

	// The next round reaps everything the device returned: no token is foreign, and the
	// ring is empty again (one descriptor per block given back).
	auto& q = guest.os.queues[static_cast<int>(vb::QueueKind::kFreePage)];
	for (void* token : q.pending)
		q.used.push_back(token);
	for (void* token : q.in_device)
		q.used.push_back(token);
	q.pending.clear();
	q.in_device.clear();
	guest.round(VB_CMD_ID_DONE);
	guest.round(4);
	EXPECT_EQ(guest.balloon.counters().foreign_used_buffers.get(), 0u);
	EXPECT_EQ(guest.balloon.hint_held_pages(), kPages);
}

// A ring of 8: the round fills it (the id, 6 blocks, a slot kept for STOP), kicks its
// chain and waits. The used chain must give back room for all 6 blocks: counted as one,
// the ring looks all but full from then on, and every later block goes on its own.
TEST(HintChain, AUsedChainGivesBackRoomForEveryBlock)
{
	RoundGuest guest(64 * kBlockPages);
	guest.os.queue_capacity = 8;
	guest.round(5);
	EXPECT_EQ(guest.held_pages_on_list(), 64 * kBlockPages);
	uint64_t pages = 0;
	size_t chains_of_six = 0;
	for (const auto& chain : guest.chains()) {
		pages += chain.bytes() / kPage;
		chains_of_six += chain.bytes() == 6 * kBlock;
	}
	EXPECT_EQ(pages, 64 * kBlockPages) << "every free block offered";
	// Each wait returns one buffer: a chain of 6, then the one block added meanwhile, so
	// the round alternates 6 and 1 (9 times, then the last 1).
	EXPECT_EQ(chains_of_six, 9u);
	EXPECT_LE(guest.os.max_free_page_in_flight, 8u);
	EXPECT_EQ(guest.balloon.counters().foreign_used_buffers.get(), 0u);
	EXPECT_EQ(guest.os.free_page_buffers.back().cmd_id, VB_CMD_ID_STOP);
}

// Every chain slot on the ring, so the blocks go one buffer each, and the queue refuses
// one halfway (the device broke): the round stops, and every block, hinted or refused,
// stays held until the reset gives it back. None is lost, none freed twice.
TEST(HintChain, ABufferRefusedHalfwayThroughAChainLosesNoBlock)
{
	vb::GuestTraits traits;
	traits.max_alloc_order = 0;
	constexpr uint64_t kPages = 16384;
	RoundGuest guest(kPages, traits);
	guest.os.hint_block_bytes = kPage;
	guest.os.queue_capacity = 20000;
	// The id, 16 chains, then 100 single blocks of the 17th chain.
	guest.os.free_page_adds_before_refusal = 1 + 16 + 100;
	guest.round(6);

	EXPECT_EQ(guest.chains().size(), 16u + 100u);
	EXPECT_EQ(guest.os.free_page_buffers.back().is_id, false) << "no STOP after the refusal";
	EXPECT_EQ(guest.balloon.counters().hint_blocks.get(), 17u * 512u)
		<< "the round stopped at the first refused chain";
	EXPECT_EQ(guest.balloon.hint_held_pages(), 17u * 512u);
	EXPECT_EQ(guest.held_pages_on_list(), 17u * 512u);
	EXPECT_EQ(guest.os.allocator.counts().free + guest.balloon.hint_held_pages(), kPages);
	ASSERT_EQ(guest.os.log_lines.size(), 1u);
	EXPECT_NE(guest.os.log_lines[0].find("refused 412 hint blocks"), std::string::npos)
		<< guest.os.log_lines[0];
	// The queue takes nothing more until the reset.
	guest.round(7);
	EXPECT_EQ(guest.os.free_page_buffers.size(), 1u + 16u + 100u);

	guest.balloon.hint_device_reset();
	guest.os.reset_free_page_queue();
	EXPECT_EQ(guest.os.allocator.counts().free, kPages);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
	guest.os.free_page_adds_before_refusal = -1;
	guest.round(8);
	EXPECT_EQ(guest.balloon.hint_held_pages(), kPages) << "hinting runs again after the reset";
}

} // namespace
} // namespace vbtest
