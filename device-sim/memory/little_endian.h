// SPDX-License-Identifier: GPL-2.0
//
// Every value in guest RAM that belongs to the virtio protocol is little-endian. The
// conversions are the identity on every host we run on; spelling them out keeps the wire
// format visible at each access and makes a big-endian host correct instead of silently
// wrong.
#ifndef VBSIM_MEMORY_LITTLE_ENDIAN_H
#define VBSIM_MEMORY_LITTLE_ENDIAN_H

#include <bit>
#include <cstdint>
#include <type_traits>

namespace vbsim
{

template <class T> constexpr T byte_swapped(T value)
{
	static_assert(std::is_unsigned_v<T> && sizeof(T) <= 8);
	if constexpr (sizeof(T) == 1)
		return value;
	else if constexpr (sizeof(T) == 2)
		return __builtin_bswap16(value);
	else if constexpr (sizeof(T) == 4)
		return __builtin_bswap32(value);
	else
		return __builtin_bswap64(value);
}

template <class T> constexpr T from_le(T wire)
{
	static_assert(std::is_unsigned_v<T> && sizeof(T) <= 8);
	if constexpr (std::endian::native == std::endian::little)
		return wire;
	else
		return byte_swapped(wire);
}

template <class T> constexpr T to_le(T value)
{
	return from_le(value);
}

} // namespace vbsim

#endif
