// SPDX-License-Identifier: GPL-2.0
//
// What guest RAM holds, for tests that check the device left bytes alone, zeroed them or
// wrote a pattern.
#ifndef VBSIM_TESTS_SIM_SUPPORT_GUEST_BYTES_H
#define VBSIM_TESTS_SIM_SUPPORT_GUEST_BYTES_H

#include <cstdint>

#include "memory/guest_memory.h"

namespace vbsim::test
{

// Whether every byte of [gpa, gpa + len) is `value`.
inline bool bytes_are(const GuestMemory& memory, uint64_t gpa, uint64_t len, uint8_t value)
{
	const uint8_t* p = memory.translate(gpa, len);
	for (uint64_t i = 0; i < len; i++)
		if (p[i] != value)
			return false;
	return true;
}

} // namespace vbsim::test

#endif
