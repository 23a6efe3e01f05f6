// SPDX-License-Identifier: GPL-2.0
//
// The fuzzer's bytes, read front to back. Every read succeeds: past the end it yields
// zeroes, so any input is a complete program and a mutation only changes what it touches.
// Values are little-endian, which keeps hand-made seeds (make_corpus.py) readable.
//
// FUZZ_CHECK is the harness's assertion: always on (also in release builds), it prints
// what broke and aborts, which libFuzzer reports as a crash with the input that caused it.
#ifndef VBALLOON_TESTS_FUZZ_FUZZ_INPUT_H
#define VBALLOON_TESTS_FUZZ_FUZZ_INPUT_H

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define FUZZ_CHECK(cond, ...)                                                                      \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			std::fprintf(stderr, "\nFUZZ_CHECK failed at %s:%d: %s\n  ", __FILE__,     \
				     __LINE__, #cond);                                             \
			std::fprintf(stderr, __VA_ARGS__);                                         \
			std::fprintf(stderr, "\n");                                                \
			std::abort();                                                              \
		}                                                                                  \
	} while (0)

namespace vbfuzz
{

// VB_FUZZ_TRACE=1: the harnesses narrate what they do, for reading a crashing input.
inline bool tracing()
{
	static const bool on = std::getenv("VB_FUZZ_TRACE") != nullptr;
	return on;
}

#define FUZZ_TRACE(...)                                                                            \
	do {                                                                                       \
		if (vbfuzz::tracing())                                                             \
			std::fprintf(stderr, __VA_ARGS__);                                         \
	} while (0)

class FuzzInput
{
public:
	FuzzInput(const uint8_t* data, size_t size) : data_(data), size_(size) {}

	bool empty() const { return offset_ >= size_; }
	size_t remaining() const { return empty() ? 0 : size_ - offset_; }

	// The next `len` bytes (or what is left) as an input of their own; this one skips them.
	FuzzInput split(size_t len)
	{
		size_t n = remaining() < len ? remaining() : len;
		FuzzInput part(data_ + offset_, n);
		offset_ += n;
		return part;
	}

	uint8_t u8() { return empty() ? 0 : data_[offset_++]; }
	uint16_t u16() { return static_cast<uint16_t>(u8() | u8() << 8); }
	uint32_t u32() { return static_cast<uint32_t>(u16()) | static_cast<uint32_t>(u16()) << 16; }
	uint64_t u64() { return static_cast<uint64_t>(u32()) | static_cast<uint64_t>(u32()) << 32; }
	bool boolean() { return u8() & 1; }
	// A value in [0, bound) (0 when bound is 0).
	uint32_t below(uint32_t bound) { return bound ? u16() % bound : 0; }
	// Up to `len` bytes into `dst`; the rest of `dst` is zeroed.
	void bytes(void* dst, size_t len)
	{
		size_t n = remaining() < len ? remaining() : len;
		if (n)
			std::memcpy(dst, data_ + offset_, n);
		std::memset(static_cast<uint8_t*>(dst) + n, 0, len - n);
		offset_ += n;
	}

	// A 64-bit guest-physical address or length, biased towards the places where bounds
	// checks live: small offsets, just below and just past `limit`, and wrap-around values.
	uint64_t near(uint64_t limit)
	{
		uint8_t how = u8();
		switch (how & 7) {
		case 0:
		case 1:
		case 2:
			return limit ? u32() % limit : 0;
		case 3:
			return limit - (u16() & 0x3fff);
		case 4:
			return limit + (u16() & 0x3fff);
		case 5:
			return UINT64_MAX - (u16() & 0x3fff);
		case 6:
			return u64();
		default:
			return (limit ? u32() % limit : 0) & ~uint64_t{0xfff};
		}
	}

private:
	const uint8_t* data_;
	size_t size_;
	size_t offset_ = 0;
};

} // namespace vbfuzz

#endif
