// SPDX-License-Identifier: GPL-2.0
//
// Wire values are little-endian. Every target we build for (x86-64, and arm64 in LE mode)
// is little-endian too, so the conversion is the identity; the static_assert keeps a
// big-endian build from silently sending byte-swapped PFNs.
#ifndef VBALLOON_SUPPORT_LITTLE_ENDIAN_H
#define VBALLOON_SUPPORT_LITTLE_ENDIAN_H

#include <stdint.h>

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "vballoon assumes a little-endian CPU");

namespace vb {
constexpr uint16_t to_le16(uint16_t v) { return v; }
constexpr uint32_t to_le32(uint32_t v) { return v; }
constexpr uint64_t to_le64(uint64_t v) { return v; }
constexpr uint16_t from_le16(uint16_t v) { return v; }
constexpr uint32_t from_le32(uint32_t v) { return v; }
constexpr uint64_t from_le64(uint64_t v) { return v; }
} // namespace vb

#endif
