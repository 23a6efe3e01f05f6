// SPDX-License-Identifier: GPL-2.0
//
// The tiny part of the standard library the core needs, written for a freestanding build:
// the same lines compile in the kernel module (no libstdc++, -nostdinc) and in userspace.
#ifndef VBALLOON_SUPPORT_FREESTANDING_H
#define VBALLOON_SUPPORT_FREESTANDING_H

#include <stddef.h>
#include <stdint.h>

namespace vb {

template <class T> struct remove_reference { using type = T; };
template <class T> struct remove_reference<T&> { using type = T; };
template <class T> struct remove_reference<T&&> { using type = T; };

template <class T> constexpr typename remove_reference<T>::type&& move(T&& value) noexcept
{
	return static_cast<typename remove_reference<T>::type&&>(value);
}

template <class T> constexpr const T& min(const T& a, const T& b) { return b < a ? b : a; }
template <class T> constexpr const T& max(const T& a, const T& b) { return a < b ? b : a; }

template <class T, size_t N> constexpr size_t array_size(const T (&)[N]) { return N; }

constexpr uint64_t bit(unsigned n) { return 1ull << n; }

// Byte-by-byte copy and fill: the core must not depend on libc, and the compiler lowers
// these loops to memcpy/memset only where the target provides them (the kernel does).
inline void copy_bytes(void* dst, const void* src, size_t n)
{
	auto* d = static_cast<unsigned char*>(dst);
	auto* s = static_cast<const unsigned char*>(src);
	for (size_t i = 0; i < n; i++)
		d[i] = s[i];
}

inline void fill_bytes(void* dst, unsigned char value, size_t n)
{
	auto* d = static_cast<unsigned char*>(dst);
	for (size_t i = 0; i < n; i++)
		d[i] = value;
}

} // namespace vb

#endif
