// SPDX-License-Identifier: GPL-2.0
//
// One simulated machine for a test: guest RAM, the host's balloon device on its thread,
// and the guest running the driver core. Everything is real: an mmap, eventfds, madvise.
#ifndef VBALLOON_TESTS_SYSTEM_FIXTURE_H
#define VBALLOON_TESTS_SYSTEM_FIXTURE_H

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "machine/sim_machine.h"

namespace vbtest {

using namespace std::chrono_literals;

// Long enough for the slowest sanitizer run; only a hung device ever reaches it.
constexpr auto kSettleTimeout = 60s;
constexpr uint64_t kPageBytes = 4096;

// Defaults: 64 MiB of 4 KiB pages, the full device profile.
using MachineOptions = vbsim::MachineConfig;

// The shared simulated machine, checked when it goes away: a test that leaves the guest's
// accounting broken or reused a page the host owned fails here.
class Machine : public vbsim::SimMachine {
public:
	explicit Machine(const MachineOptions& options = {}) : SimMachine(options) {}

	~Machine()
	{
		EXPECT_EQ(guest.check_accounting(), "");
		EXPECT_EQ(guest.os().counters().must_tell_host_violations.load(), 0u);
		EXPECT_EQ(guest.os().counters().bad_page_operations.load(), 0u);
	}

	void boot() { ASSERT_EQ(SimMachine::boot(), ""); }

	// Sets the target and waits for the driver to settle or stall.
	vb::StepResult balloon_to(uint32_t pages)
	{
		auto result = settle_at(pages, kSettleTimeout);
		EXPECT_TRUE(result) << "the driver did not settle";
		return result.value_or(vb::StepResult::kMoreWork);
	}
};

inline bool page_is_zero(const vbsim::GuestMemory& memory, uint64_t pfn)
{
	const uint8_t* page = memory.translate(pfn * kPageBytes, kPageBytes);
	for (uint64_t i = 0; i < kPageBytes; i++) {
		if (page[i])
			return false;
	}
	return true;
}

} // namespace vbtest

#endif
