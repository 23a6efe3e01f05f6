// SPDX-License-Identifier: GPL-2.0
#include "migration/dirty_log.h"

#include <gtest/gtest.h>

#include <atomic>
#include <algorithm>
#include <bit>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "memory/guest_memory.h"

namespace vbsim
{
namespace
{

std::vector<uint64_t> marked_pages(DirtyLog& log)
{
	std::vector<uint64_t> bits(log.words(), 0);
	log.harvest_final(bits.data());
	std::vector<uint64_t> pages;
	for (uint64_t w = 0; w < bits.size(); w++)
		for (uint64_t b = bits[w]; b != 0; b &= b - 1)
			pages.push_back(w * 64 + std::countr_zero(b));
	return pages;
}

TEST(DirtyLog, MarkRangeSetsExactlyTheRangeAcrossWordEdges)
{
	DirtyLog log(1000);
	log.mark_range(60, 70);	 // words 0, 1 and 2
	log.mark_range(995, 50); // clipped at the end
	std::vector<uint64_t> expected;
	for (uint64_t p = 60; p < 130; p++)
		expected.push_back(p);
	for (uint64_t p = 995; p < 1000; p++)
		expected.push_back(p);
	EXPECT_EQ(marked_pages(log), expected);
	EXPECT_EQ(log.count_marked(), 0u); // the final harvest cleared both bitmaps
}

TEST(DirtyLog, HarvestReturnsNewBitsAndSwapsBitmaps)
{
	DirtyLog log(256);
	std::vector<uint64_t> into(log.words(), 0);
	log.mark_page(3);
	log.mark_page(200);
	EXPECT_EQ(log.harvest(into.data()), 2u);
	EXPECT_EQ(into[0], uint64_t{1} << 3);
	EXPECT_EQ(into[3], uint64_t{1} << (200 - 192));
	// Marks after the swap land in the other bitmap and come with the next harvest.
	log.mark_page(3);
	log.mark_page(4);
	EXPECT_EQ(log.harvest(into.data()), 1u); // page 3 was already in `into`
	EXPECT_EQ(into[0], (uint64_t{1} << 3) | (uint64_t{1} << 4));
	std::vector<uint64_t> fresh(log.words(), 0);
	EXPECT_EQ(log.harvest(fresh.data()), 0u);
}

TEST(DirtyLog, GetAndClearSeesTheSameBitsAsSwap)
{
	DirtyLog log(4096);
	std::mt19937_64 random(7);
	std::vector<uint64_t> pages;
	for (int i = 0; i < 300; i++)
		pages.push_back(random() % 4096);
	for (uint64_t p : pages)
		log.mark_page(p);
	std::vector<uint64_t> by_clear(log.words(), 0), by_swap(log.words(), 0);
	log.harvest_get_and_clear(by_clear.data());
	for (uint64_t p : pages)
		log.mark_page(p);
	log.harvest(by_swap.data());
	EXPECT_EQ(by_clear, by_swap);
}

TEST(DirtyMarker, SequentialRandomAndStridedMarksAllArrive)
{
	for (int pattern = 0; pattern < 3; pattern++) {
		DirtyLog log(1 << 16);
		std::vector<uint64_t> expected;
		std::mt19937_64 random(pattern);
		{
			DirtyMarker marker(&log);
			for (uint64_t i = 0; i < 20000; i++) {
				const uint64_t page = pattern == 0 ? i : pattern == 1 ? random() % log.pages() : (i * 67) % log.pages();
				marker.mark(page);
				expected.push_back(page);
			}
		} // the destructor flushes
		std::sort(expected.begin(), expected.end());
		expected.erase(std::unique(expected.begin(), expected.end()), expected.end());
		EXPECT_EQ(marked_pages(log), expected) << "pattern " << pattern;
	}
}

TEST(DirtyMarker, HeldMarksArriveOnFlushNotBefore)
{
	DirtyLog log(128);
	DirtyMarker marker(&log);
	marker.mark(5);
	marker.mark(6);
	EXPECT_EQ(log.count_marked(), 0u);
	marker.flush();
	EXPECT_EQ(log.count_marked(), 2u);
}

// Writers publish a new value for a page, then mark it; a harvester copies the value of
// every harvested page, as the migration sender copies pages. When the writers are done, a
// final harvest must leave every copied value equal to the last one written: a dirty bit
// lost anywhere would leave a stale copy. Everything shared is atomic, so this runs
// cleanly under ThreadSanitizer. Harvests must overlap the writes for the test to mean
// anything, and on a loaded machine the writers could finish before the harvester ran at
// all: so they wait half-way until it has harvested twice, which no scheduling can skip.
TEST(DirtyLog, ConcurrentWritersNeverLoseAWrite)
{
	constexpr uint64_t kPages = 1 << 14;
	constexpr unsigned kWriters = 3;
	constexpr uint64_t kWritesPerWriter = 200000;
	DirtyLog log(kPages);
	std::vector<std::atomic<uint64_t>> source(kPages);
	std::vector<uint64_t> destination(kPages, 0);
	std::atomic<unsigned> writers_left{kWriters};
	std::atomic<uint64_t> harvests_done{0};

	auto copy_harvested = [&](const std::vector<uint64_t>& bits) {
		for (uint64_t w = 0; w < bits.size(); w++)
			for (uint64_t b = bits[w]; b != 0; b &= b - 1) {
				const uint64_t page = w * 64 + std::countr_zero(b);
				destination[page] = source[page].load(std::memory_order_acquire);
			}
	};

	std::vector<std::thread> writers;
	for (unsigned t = 0; t < kWriters; t++)
		writers.emplace_back([&, t] {
			std::mt19937_64 random(t + 1);
			DirtyMarker marker(&log);
			for (uint64_t i = 0; i < kWritesPerWriter; i++) {
				// Pages shared between writers; runs, single pages and batched marks mixed.
				const uint64_t page = (i % 3 == 0) ? (i / 3) % kPages : random() % kPages;
				const uint64_t value = (uint64_t{t} << 56) | (i + 1);
				source[page].store(value, std::memory_order_release);
				switch (i % 4) {
				case 0: log.mark_page(page); break;
				case 1: log.mark_range(page, 1); break;
				default: marker.mark(page); break;
				}
				if (i % 64 == 0)
					marker.flush();
				if (i == kWritesPerWriter / 2)
					while (harvests_done.load(std::memory_order_acquire) < 2)
						std::this_thread::yield();
			}
			marker.flush();
			writers_left.fetch_sub(1, std::memory_order_release);
		});

	uint64_t harvests = 0;
	while (writers_left.load(std::memory_order_acquire) != 0) {
		std::vector<uint64_t> bits(log.words(), 0);
		log.harvest(bits.data());
		copy_harvested(bits);
		harvests++;
		harvests_done.store(harvests, std::memory_order_release);
	}
	for (std::thread& writer : writers)
		writer.join();
	std::vector<uint64_t> bits(log.words(), 0);
	log.harvest_final(bits.data());
	copy_harvested(bits);

	uint64_t stale = 0;
	for (uint64_t page = 0; page < kPages; page++)
		stale += destination[page] != source[page].load(std::memory_order_relaxed);
	EXPECT_EQ(stale, 0u);
	EXPECT_GT(harvests, 1u);
}

TEST(GuestMemoryDirtyLog, EveryWriteHelperMarksItsPagesOnlyWhileAttached)
{
	GuestMemory memory({.size_bytes = 64 * GuestMemory::kWirePageBytes});
	DirtyLog log(64);
	const uint8_t bytes[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
	ASSERT_TRUE(memory.write(0, bytes, sizeof(bytes))); // not attached: not marked
	memory.attach_dirty_log(&log);
	ASSERT_TRUE(memory.write(4096 - 4, bytes, sizeof(bytes))); // pages 0 and 1
	ASSERT_TRUE(memory.fill(5 * 4096, 0xaa, 2 * 4096));	   // 5 and 6
	ASSERT_TRUE(memory.store_le16_release(10 * 4096 + 8, 7));  // 10
	ASSERT_TRUE(memory.write_le<uint32_t>(20 * 4096, 9));	   // 20
	ASSERT_EQ(memory.discard(30 * 4096, 4096), 0);		   // 30
	ASSERT_FALSE(memory.write(64 * 4096, bytes, 1));		   // outside RAM: nothing
	{
		DirtyMarker marker(memory.dirty_log());
		ASSERT_TRUE(memory.write(40 * 4096, bytes, sizeof(bytes), marker)); // 40
		ASSERT_TRUE(memory.write(41 * 4096 + 4090, bytes, sizeof(bytes), marker)); // 41, 42
	}
	EXPECT_EQ(marked_pages(log), (std::vector<uint64_t>{0, 1, 5, 6, 10, 20, 30, 40, 41, 42}));
	memory.attach_dirty_log(nullptr);
	ASSERT_TRUE(memory.fill(50 * 4096, 1, 4096));
	EXPECT_EQ(log.count_marked(), 0u);
}

} // namespace
} // namespace vbsim
