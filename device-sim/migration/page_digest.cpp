// SPDX-License-Identifier: GPL-2.0
//
// XXH64, written out for a whole 4 KiB page only (xxHash's doc/xxhash_spec.md, "XXH64
// algorithm"). Why not link libxxhash: Debian ships it, but a build dependency in both build
// roots (Debian 12 and the Debian 13 root) for 30 lines of a fixed-length case is more than
// it saves. Why XXH64: a well-studied non-cryptographic hash with a 64-bit result, fast
// enough (four independent lanes) that the receivers keep up with the senders. Nobody here
// chooses page contents to collide, so a cryptographic hash would buy nothing.
// tests/migration/destination_image_test.cpp checks it against libxxhash0's values.
#include "migration/page_digest.h"

#include <cstring>

#include "migration/zero_page.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPageBytes = 4096;
constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime4 = 0x85EBCA77C2B2AE63ull;

// XXH64 of 4096 zero bytes: what page_digest() maps to 0.
constexpr uint64_t kZeroPageXxh64 = 0xAC869B6F32D8BBDBull;

uint64_t rotate_left(uint64_t value, unsigned bits)
{
	return (value << bits) | (value >> (64 - bits));
}

uint64_t mix_lane(uint64_t accumulator, uint64_t lane)
{
	return rotate_left(accumulator + lane * kPrime2, 31) * kPrime1;
}

uint64_t merge_accumulator(uint64_t hash, uint64_t accumulator)
{
	return (hash ^ mix_lane(0, accumulator)) * kPrime1 + kPrime4;
}

uint64_t load_lane(const uint8_t* bytes)
{
	uint64_t lane;
	std::memcpy(&lane, bytes, sizeof(lane)); // little-endian, as XXH64 reads it
	return lane;
}

} // namespace

uint64_t xxh64_of_page(const uint8_t* page)
{
	uint64_t lanes[4] = {kPrime1 + kPrime2, kPrime2, 0, 0 - kPrime1};
	for (uint64_t stripe = 0; stripe < kPageBytes; stripe += 32)
		for (unsigned i = 0; i < 4; i++)
			lanes[i] = mix_lane(lanes[i], load_lane(page + stripe + 8 * i));
	uint64_t hash = rotate_left(lanes[0], 1) + rotate_left(lanes[1], 7) +
			rotate_left(lanes[2], 12) + rotate_left(lanes[3], 18);
	for (uint64_t lane : lanes)
		hash = merge_accumulator(hash, lane);
	hash += kPageBytes; // a multiple of 32: no tail to mix in
	hash ^= hash >> 33;
	hash *= kPrime2;
	hash ^= hash >> 29;
	hash *= kPrime3;
	hash ^= hash >> 32;
	return hash;
}

uint64_t page_digest(const uint8_t* page)
{
	// The vectorised zero check first: zero pages are common and it is cheaper than hashing.
	if (page_is_zero(page))
		return 0;
	return xxh64_of_page(page) ^ kZeroPageXxh64;
}

} // namespace vbsim::migration
