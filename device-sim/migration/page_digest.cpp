// SPDX-License-Identifier: GPL-2.0
//
// Page digests through Debian's libxxhash. Why XXH64: a well-studied non-cryptographic hash
// with a 64-bit result, fast enough (four independent lanes) that the receivers keep up with
// the senders. Nobody here chooses page contents to collide, so a cryptographic hash would
// buy nothing.
#include "migration/page_digest.h"

#include <cstddef>

#include <xxhash.h>

#include "memory/guest_memory.h"
#include "migration/zero_page.h"

namespace vbsim::migration
{

namespace
{

constexpr size_t kPageBytes = GuestMemory::kWirePageBytes;

// XXH64 of 4096 zero bytes: what page_digest() maps to 0.
constexpr uint64_t kZeroPageXxh64 = 0xAC869B6F32D8BBDBull;

} // namespace

uint64_t xxh64_of_page(const uint8_t* page)
{
	return XXH64(page, kPageBytes, 0);
}

uint64_t page_digest(const uint8_t* page)
{
	// The vectorised zero check first: zero pages are common and it is cheaper than hashing.
	if (page_is_zero(page))
		return 0;
	return xxh64_of_page(page) ^ kZeroPageXxh64;
}

} // namespace vbsim::migration
