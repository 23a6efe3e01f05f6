// SPDX-License-Identifier: GPL-2.0
//
// A 64-bit digest of a 4 KiB page, what the destination keeps instead of the page: eight
// bytes per page let a 128 GiB guest's destination fit in 256 MiB, and a page whose
// content differs still gets another digest but for a 2^-64 chance.
#ifndef VBSIM_MIGRATION_PAGE_DIGEST_H
#define VBSIM_MIGRATION_PAGE_DIGEST_H

#include <cstdint>

namespace vbsim::migration
{

// XXH64 (seed 0) of the 4096 bytes: the same value Debian's libxxhash0 computes for them.
uint64_t xxh64_of_page(const uint8_t* page);

// The digest as the destination stores it: XXH64 shifted so that the all-zero page is 0.
// A zero-filled table then says "every page zero", as a fresh destination's RAM is, and
// pages that never receive data cost no memory. The shift (an XOR with a constant) keeps
// XXH64's collisions exactly where they were.
uint64_t page_digest(const uint8_t* page);

} // namespace vbsim::migration

#endif
