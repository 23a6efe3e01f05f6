// SPDX-License-Identifier: GPL-2.0
//
// VB_INVARIANT() in userspace (the simulator's guest, the tests, the benches): a broken
// accounting rule ends the process, with the rule and where it is, so no test passes over it.
#include <cstdio>
#include <cstdlib>

#include "vballoon/support/invariant.h"

extern "C" void vb_invariant_failed(const char* condition, const char* file, int line)
{
	std::fprintf(stderr, "vballoon: invariant failed: %s (%s:%d)\n", condition, file, line);
	std::fflush(stderr);
	std::abort();
}
