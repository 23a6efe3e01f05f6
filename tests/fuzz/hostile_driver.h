// SPDX-License-Identifier: GPL-2.0
//
// What the harnesses of fuzz_device_queue share: a hostile driver's raw writes into guest RAM
// (anything inside RAM, silently nothing outside it), overflow-free range checks, and
// descriptor fields biased towards what the ring's checks look at.
#ifndef VBALLOON_TESTS_FUZZ_HOSTILE_DRIVER_H
#define VBALLOON_TESTS_FUZZ_HOSTILE_DRIVER_H

#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "memory/guest_memory.h"
#include "vballoon/spec/virtio_ring.h"

namespace vbfuzz
{

// Operations a harness reads from one input, at most.
inline constexpr size_t kMaxOps = 512;

// Raw writes of a hostile driver: anything inside RAM, silently nothing outside it.
inline void poke(vbsim::GuestMemory& memory, uint64_t gpa, const void* src, uint64_t len)
{
	(void)memory.write(gpa, src, len);
}

inline void poke_le16(vbsim::GuestMemory& memory, uint64_t gpa, uint16_t value)
{
	(void)memory.write_le(gpa, value);
}

inline void poke_descriptor(vbsim::GuestMemory& memory, uint64_t gpa, uint64_t addr, uint32_t len,
			    uint16_t flags, uint16_t next)
{
	(void)(memory.write_le(gpa, addr) && memory.write_le(gpa + 8, len) &&
	       memory.write_le(gpa + 12, flags) && memory.write_le(gpa + 14, next));
}

inline uint16_t peek_le16(const vbsim::GuestMemory& memory, uint64_t gpa)
{
	uint16_t value = 0;
	FUZZ_CHECK(memory.read_le(gpa, &value), "harness read outside RAM at %#llx",
		   (unsigned long long)gpa);
	return value;
}

// Whether [addr, addr + len) lies in RAM of `ram` bytes, computed without overflow.
inline bool inside(uint64_t addr, uint64_t len, uint64_t ram)
{
	return static_cast<unsigned __int128>(addr) + len <= ram;
}

inline bool ranges_overlap(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len)
{
	return static_cast<unsigned __int128>(a) < static_cast<unsigned __int128>(b) + b_len &&
	       static_cast<unsigned __int128>(b) < static_cast<unsigned __int128>(a) + a_len;
}

// Descriptor fields biased towards what the ring's checks look at.
inline uint16_t fuzz_flags(FuzzInput& in)
{
	uint8_t how = in.u8();
	uint16_t flags =
		how & (VB_VRING_DESC_F_NEXT | VB_VRING_DESC_F_WRITE | VB_VRING_DESC_F_INDIRECT);
	if (how & 0x80)
		flags |= static_cast<uint16_t>(in.u16() & ~7u); // undefined bits: ignored
	return flags;
}

inline uint32_t fuzz_len(FuzzInput& in, uint64_t ram)
{
	uint8_t how = in.u8();
	switch (how & 3) {
	case 0:
		return in.u8();
	case 1:
		return static_cast<uint32_t>(in.near(ram));
	case 2:
		return UINT32_MAX - in.u8();
	default:
		return in.u32();
	}
}

} // namespace vbfuzz

#endif
