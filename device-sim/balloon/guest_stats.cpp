// SPDX-License-Identifier: GPL-2.0
#include "balloon/guest_stats.h"

#include <cstring>

#include "vballoon/support/mutant.h"

namespace vbsim
{

StatsParseOutcome parse_stats_entries(const uint8_t* bytes, size_t len, GuestStats& stats,
				      ByteOrder order, unsigned known_tags)
{
	if (VB_MUTANT(DEV_LEG05_STATS_READ_LITTLE_ENDIAN))
		order = ByteOrder::kLittle;
	StatsParseOutcome outcome;
	stats.values.fill(0);
	stats.present_mask = 0;

	const size_t whole_entries = len / VB_STAT_ENTRY_BYTES;
	outcome.partial_entry = len % VB_STAT_ENTRY_BYTES != 0;
	const size_t entries = whole_entries < kStatsEntriesMax ? whole_entries : kStatsEntriesMax;
	for (size_t i = 0; i < entries; ++i) {
		const uint8_t* entry = bytes + i * VB_STAT_ENTRY_BYTES;
		uint16_t tag_wire;
		uint64_t value_wire;
		std::memcpy(&tag_wire, entry, sizeof(tag_wire));
		std::memcpy(&value_wire, entry + sizeof(tag_wire), sizeof(value_wire));
		const uint16_t tag = from_wire(tag_wire, order);
		++outcome.entries;
		if (tag >= VB_S_NR || tag >= known_tags) {
			++outcome.unknown_tags;
			if (VB_MUTANT(DEV_STATS02_STOP_AT_UNKNOWN_TAG))
				break;
			continue;
		}
		if (VB_MUTANT(DEV_STATS03_EXPECT_SORTED_TAGS) && stats.present_mask >> tag > 1)
			break;
		stats.values[tag] = from_wire(value_wire, order);
		stats.present_mask |= uint32_t{1} << tag;
	}
	return outcome;
}

} // namespace vbsim
