// SPDX-License-Identifier: GPL-2.0
//
// One simulated machine for a test: guest RAM, the host's balloon device on its thread,
// and the guest running the driver core. Everything is real: an mmap, eventfds, madvise.
#ifndef VBALLOON_TESTS_SYSTEM_FIXTURE_H
#define VBALLOON_TESTS_SYSTEM_FIXTURE_H

#include <gtest/gtest.h>

#include <chrono>
#include <memory>

#include "balloon/balloon_device.h"
#include "sim_guest.h"

namespace vbtest {

using namespace std::chrono_literals;

// Long enough for the slowest sanitizer run; only a hung device ever reaches it.
constexpr auto kSettleTimeout = 60s;
constexpr uint64_t kPageBytes = 4096;

struct MachineOptions {
	uint64_t ram_bytes = 64ull << 20;
	vbsim::PageBacking backing = vbsim::PageBacking::kSmallPages;
	vbsim::BalloonDeviceOptions device;
	vbsim::SimGuestOptions guest;
};

class Machine {
public:
	explicit Machine(const MachineOptions& options = {})
		: memory({options.ram_bytes, options.backing}), device(memory, options.device),
		  guest(memory, device.transport(), options.guest)
	{
		guest.set_host_owns_probe([this](uint64_t pfn) { return device.host_owns(pfn); });
	}

	~Machine()
	{
		EXPECT_EQ(guest.check_accounting(), "");
		EXPECT_EQ(guest.os().counters().must_tell_host_violations.load(), 0u);
		EXPECT_EQ(guest.os().counters().bad_page_operations.load(), 0u);
	}

	void boot() { ASSERT_EQ(guest.probe(), ""); }

	// Sets the target and waits for the driver to settle or stall.
	vb::StepResult balloon_to(uint32_t pages)
	{
		device.set_target_pages(pages);
		auto result = guest.wait_until_settled(kSettleTimeout);
		EXPECT_TRUE(result) << "the driver did not settle";
		return result.value_or(vb::StepResult::kMoreWork);
	}

	uint64_t guest_pages() const { return guest.allocator().frame_count(); }

	vbsim::GuestMemory memory;
	vbsim::BalloonDevice device;
	vbsim::SimGuest guest;
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
