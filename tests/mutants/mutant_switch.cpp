// SPDX-License-Identifier: GPL-2.0
//
// The run-time switch behind VB_MUTANT() in the mutant build: the mutant named by the
// VB_MUTANT environment variable is on, every other one is off. The first time the active
// mutant is reached it says so on stderr, so ci/mutants.sh can tell a mutant the tests
// never reach from one they reach and miss.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

extern "C" bool vb_mutant_active(const char* id)
{
	static const char* const active = std::getenv("VB_MUTANT");
	static std::atomic<bool> announced{false};

	if (!active || std::strcmp(active, id) != 0)
		return false;
	if (!announced.exchange(true))
		std::fprintf(stderr, "vballoon mutant %s reached\n", id);
	return true;
}
