// SPDX-License-Identifier: GPL-2.0
//
// Parsing statsq buffers: 10-byte packed {le16 tag, le64 value} entries.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "balloon/guest_stats.h"

namespace vbsim
{
namespace
{

std::vector<uint8_t> encode(std::initializer_list<std::pair<uint16_t, uint64_t>> entries)
{
	std::vector<uint8_t> bytes;
	for (const auto& [tag, value] : entries) {
		uint8_t entry[VB_STAT_ENTRY_BYTES];
		std::memcpy(entry, &tag, 2); // the test host is little-endian, like the wire
		std::memcpy(entry + 2, &value, 8);
		bytes.insert(bytes.end(), entry, entry + sizeof(entry));
	}
	return bytes;
}

TEST(GuestStats, EntryIsTenBytes)
{
	EXPECT_EQ(sizeof(vb_stat_entry), 10u);
}

TEST(GuestStats, ReadsKnownTags)
{
	const auto bytes =
		encode({{VB_S_MEMFREE, 123456}, {VB_S_MEMTOT, 1ull << 33}, {VB_S_OOM_KILL, 2}});
	GuestStats stats;
	const StatsParseOutcome outcome = parse_stats_entries(bytes.data(), bytes.size(), stats);
	EXPECT_EQ(outcome.entries, 3u);
	EXPECT_EQ(outcome.unknown_tags, 0u);
	EXPECT_FALSE(outcome.partial_entry);
	EXPECT_EQ(stats.value(VB_S_MEMFREE), 123456u);
	EXPECT_EQ(stats.value(VB_S_MEMTOT), 1ull << 33);
	EXPECT_EQ(stats.value(VB_S_OOM_KILL), 2u);
	EXPECT_TRUE(stats.has(VB_S_MEMFREE));
	EXPECT_FALSE(stats.has(VB_S_SWAP_IN));
}

TEST(GuestStats, AcceptsTagsInAnyOrder)
{
	const auto sorted = encode({{VB_S_SWAP_IN, 1}, {VB_S_MEMFREE, 2}, {VB_S_MEMTOT, 3}, {VB_S_CACHES, 4}});
	const auto shuffled =
		encode({{VB_S_CACHES, 4}, {VB_S_MEMFREE, 2}, {VB_S_SWAP_IN, 1}, {VB_S_MEMTOT, 3}});
	GuestStats from_sorted, from_shuffled;
	parse_stats_entries(sorted.data(), sorted.size(), from_sorted);
	const StatsParseOutcome outcome = parse_stats_entries(shuffled.data(), shuffled.size(), from_shuffled);
	EXPECT_EQ(outcome.entries, 4u);
	EXPECT_EQ(from_shuffled.present_mask, from_sorted.present_mask);
	EXPECT_EQ(from_shuffled.values, from_sorted.values);
}

TEST(GuestStats, IgnoresUnknownTags)
{
	const auto bytes = encode({{VB_S_NR, 1}, {0xffff, 2}, {VB_S_AVAIL, 3}});
	GuestStats stats;
	const StatsParseOutcome outcome = parse_stats_entries(bytes.data(), bytes.size(), stats);
	EXPECT_EQ(outcome.unknown_tags, 2u);
	EXPECT_EQ(stats.present_mask, 1u << VB_S_AVAIL);
	EXPECT_EQ(stats.value(VB_S_AVAIL), 3u);
}

TEST(GuestStats, EachBufferReplacesThePreviousSet)
{
	GuestStats stats;
	auto first = encode({{VB_S_MEMFREE, 10}, {VB_S_CACHES, 20}});
	parse_stats_entries(first.data(), first.size(), stats);
	auto second = encode({{VB_S_MEMFREE, 11}});
	parse_stats_entries(second.data(), second.size(), stats);
	EXPECT_EQ(stats.value(VB_S_MEMFREE), 11u);
	EXPECT_FALSE(stats.has(VB_S_CACHES)); // not carried over
}

TEST(GuestStats, TrailingBytesAreFlaggedAndIgnored)
{
	auto bytes = encode({{VB_S_MINFLT, 5}});
	bytes.push_back(0xaa);
	bytes.push_back(0xbb);
	GuestStats stats;
	const StatsParseOutcome outcome = parse_stats_entries(bytes.data(), bytes.size(), stats);
	EXPECT_TRUE(outcome.partial_entry);
	EXPECT_EQ(outcome.entries, 1u);
	EXPECT_EQ(stats.value(VB_S_MINFLT), 5u);
}

TEST(GuestStats, LooksAtNoMoreThanTheBound)
{
	std::vector<uint8_t> bytes;
	for (uint32_t i = 0; i < kStatsEntriesMax; ++i) {
		const auto entry = encode({{VB_S_MAJFLT, i}});
		bytes.insert(bytes.end(), entry.begin(), entry.end());
	}
	const auto beyond = encode({{VB_S_SWAP_OUT, 99}});
	bytes.insert(bytes.end(), beyond.begin(), beyond.end());
	GuestStats stats;
	const StatsParseOutcome outcome = parse_stats_entries(bytes.data(), bytes.size(), stats);
	EXPECT_EQ(outcome.entries, kStatsEntriesMax);
	EXPECT_EQ(stats.value(VB_S_MAJFLT), kStatsEntriesMax - 1); // last duplicate wins
	EXPECT_FALSE(stats.has(VB_S_SWAP_OUT));
}

} // namespace
} // namespace vbsim
