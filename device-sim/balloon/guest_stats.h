// SPDX-License-Identifier: GPL-2.0
//
// The memory statistics a driver sends on the statsq: packed 10-byte entries
// {le16 tag, le64 value} (5.5.6.3; the normative text's "multiple of 6 bytes" is an
// erratum from the 6-byte era). Unknown tags are ignored as the spec requires, and every
// buffer replaces the previous set whole: a tag missing from the new buffer reads as
// absent, not as its old value (QEMU resets to -1 before each parse for the same reason).
#ifndef VBSIM_BALLOON_GUEST_STATS_H
#define VBSIM_BALLOON_GUEST_STATS_H

#include <array>
#include <cstddef>
#include <cstdint>

#include "memory/guest_byte_order.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

// Entries read from one buffer at most; Firecracker bounds a stats descriptor the same
// way. 256 is sixteen times the tags Linux knows.
inline constexpr uint32_t kStatsEntriesMax = 256;

struct GuestStats {
	std::array<uint64_t, VB_S_NR> values{};
	uint32_t present_mask = 0; // bit `tag` set when the last buffer carried that tag
	uint64_t update_count = 0; // buffers parsed so far

	bool has(unsigned tag) const { return tag < VB_S_NR && (present_mask >> tag) & 1; }
	uint64_t value(unsigned tag) const { return has(tag) ? values[tag] : 0; }
};

struct StatsParseOutcome {
	uint32_t entries = 0;	    // entries read (known or not)
	uint32_t unknown_tags = 0;  // entries ignored for a tag past `known_tags`
	bool partial_entry = false; // trailing bytes that do not make a whole entry
};

// Replaces the values and presence in `stats` with what `bytes` carries (at most
// kStatsEntriesMax entries are looked at; the caller bounds `len`). Does not touch
// update_count. Tags and values are little-endian, or in the guest's order for a legacy
// driver ("transitional devices and drivers MUST format the stats in guest-native endian").
// Tags from `known_tags` on are unknown: VB_S_FIRST_PRESSURE_TAG unless VB_F_X_PRESSURE was
// negotiated, as for a device that never heard of them.
StatsParseOutcome parse_stats_entries(const uint8_t* bytes, size_t len, GuestStats& stats,
				      ByteOrder order = ByteOrder::kLittle,
				      unsigned known_tags = VB_S_NR);

} // namespace vbsim

#endif
