// SPDX-License-Identifier: GPL-2.0
//
// The byte order of a value a driver wrote into guest RAM. Under VERSION_1 every virtio
// value is little-endian (little_endian.h). A driver on the legacy interface writes some
// balloon payloads in its CPU's own order ("guest-native"), so the device has to know the
// guest's order to read them: a big-endian guest's numbers arrive byte-swapped on this
// little-endian host.
#ifndef VBSIM_MEMORY_GUEST_BYTE_ORDER_H
#define VBSIM_MEMORY_GUEST_BYTE_ORDER_H

#include <cstdint>

#include "memory/little_endian.h"

namespace vbsim
{

enum class ByteOrder : uint8_t { kLittle, kBig };

// The value of `wire`, read from guest RAM, when it was written in `order`.
template <class T> constexpr T from_wire(T wire, ByteOrder order)
{
	return order == ByteOrder::kLittle ? from_le(wire) : from_le(byte_swapped(wire));
}

// What a driver writing in `order` stores for `value`.
template <class T> constexpr T to_wire(T value, ByteOrder order)
{
	return from_wire(value, order);
}

} // namespace vbsim

#endif
