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
constexpr uint64_t kPageBytes = vbsim::GuestMemory::kWirePageBytes;

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

// MUST_TELL_HOST end to end: with `pages` ballooned and the device holding its deflate acks,
// the guest takes every page it can get, and none the host still owns may be among them; once
// the acks go out, every page comes back and the host owns none.
inline void expect_no_page_reused_before_its_deflate_ack(Machine& machine, uint32_t pages)
{
	ASSERT_TRUE(machine.guest.negotiated_features() & VB_FEATURE(VB_F_MUST_TELL_HOST));
	ASSERT_EQ(machine.balloon_to(pages), vb::StepResult::kSettled);

	machine.device.hold_deflate_acks();
	machine.device.set_target_wire_pages(0);
	ASSERT_TRUE(machine.device.wait_for_held_deflate_acks(1, kSettleTimeout));
	EXPECT_EQ(machine.device.host_owned_wire_pages(), pages);

	uint64_t free_pages = machine.guest.allocator().counts().free;
	vbsim::UserMemory grab = machine.guest.allocate_user_memory(free_pages, 0x11);
	EXPECT_EQ(grab.pages, free_pages);
	for (uint64_t pfn = machine.guest.allocator().first_pfn();
	     pfn < machine.guest.allocator().first_pfn() + machine.guest_pages(); pfn++) {
		if (machine.device.host_owns(pfn)) {
			ASSERT_NE(machine.guest.allocator().state(pfn),
				  vbsim::BuddyAllocator::FrameState::kFree)
				<< "page " << pfn
				<< " was freed before the host acknowledged its deflate";
		}
	}
	EXPECT_EQ(machine.guest.os().counters().must_tell_host_violations.load(), 0u);
	machine.guest.free_user_memory(grab);

	machine.device.release_deflate_acks();
	ASSERT_EQ(machine.guest.wait_until_settled(kSettleTimeout), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(machine.device.actual_wire_pages(), 0u);
	EXPECT_EQ(machine.guest.allocator().counts().free, machine.guest_pages());
}

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
