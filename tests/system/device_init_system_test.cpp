// SPDX-License-Identifier: GPL-2.0
//
// The DEVICE_INIT proposals end to end (bits 7 and 6, as on mst's branches): the core in
// the simulated guest against the simulated device. Deflated pages the device initialised
// are not initialised again by the guest; reported pages the device zeroed are handed out
// by an init_on_alloc guest without zeroing them again; and every page so skipped really
// reads zero. Neither bit is taken unless the guest opts in (the module's device_init).
#include <gtest/gtest.h>

#include <optional>

#include "system_fixture.h"

namespace vbtest
{
namespace
{

constexpr uint64_t kBit6 = VB_FEATURE(VB_F_DEVICE_INIT_REPORTED);
constexpr uint64_t kBit7 = VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);

MachineOptions deflate_machine(bool opt_in)
{
	MachineOptions options;
	options.device.device_init_on_inflate = true;
	options.guest.free_policy = {true, 0}; // init_on_free
	options.guest.device_init = opt_in;
	return options;
}

bool user_memory_is_zero(const vbsim::GuestMemory& memory, const vbsim::UserMemory& user)
{
	for (const vb::PageRun& run : user.runs)
		for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++)
			if (!page_is_zero(memory, pfn))
				return false;
	return true;
}

TEST(DeviceInitSystem, DeflatedPagesTheDeviceInitialisedAreNotInitialisedAgain)
{
	Machine machine(deflate_machine(true));
	machine.boot();
	ASSERT_TRUE(machine.guest.negotiated_features() & kBit7);
	ASSERT_FALSE(machine.guest.negotiated_features() & VB_FEATURE(VB_F_X_INIT_ON_INFLATE));
	// Dirty memory first, so the balloon's pages held data the device had to get rid of.
	vbsim::UserMemory dirty = machine.guest.allocate_user_memory(machine.guest_pages(), 0x5a);
	machine.guest.free_user_memory(dirty);
	const uint64_t written_before =
		machine.guest.os().counters().pages_initialised_by_guest.load();

	ASSERT_EQ(machine.balloon_to(4096), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.counters().wire_pages_reported_initialised.load(), 4096u);
	EXPECT_EQ(machine.guest.core()->counters().wire_pages_device_initialised.get(), 4096u);
	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	const auto& guest = machine.guest.os().counters();
	EXPECT_EQ(guest.pages_initialised_by_guest.load(), written_before) << "the device did it";
	EXPECT_EQ(guest.pages_skipped_initialising.load(), 4096u);

	// What was skipped reads zero: hand every free page out and look.
	vbsim::UserMemory user =
		machine.guest.allocate_user_memory(machine.guest_pages(), std::nullopt);
	ASSERT_FALSE(user.oom_killed);
	EXPECT_TRUE(user_memory_is_zero(machine.memory, user));
	machine.guest.free_user_memory(user);
}

TEST(DeviceInitSystem, WithoutTheOptInNeitherBitIsTakenAndTheGuestInitialisesItself)
{
	MachineOptions options = deflate_machine(false);
	options.device.device_init_reported = vbsim::OnOffAuto::kOn;
	options.guest.page_reporting = true;
	Machine machine(options);
	machine.boot();
	ASSERT_TRUE(machine.device.transport().device_features() & (kBit6 | kBit7));
	EXPECT_FALSE(machine.guest.negotiated_features() & (kBit6 | kBit7));
	// Boot's first reporting pass isolates free blocks while the device handles them; an
	// inflate racing it could find too few free pages and stall (retried later, as in
	// Linux). The rule under test is the negotiation, so inflate once reporting is idle.
	ASSERT_TRUE(machine.guest.wait_for([&] { return machine.guest.reporting_idle(); },
					   kSettleTimeout));
	ASSERT_EQ(machine.balloon_to(2048), vb::StepResult::kSettled);
	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	EXPECT_EQ(machine.guest.os().counters().pages_skipped_initialising.load(), 0u);
	EXPECT_GE(machine.guest.os().counters().pages_initialised_by_guest.load(), 2048u);
	EXPECT_EQ(machine.device.counters().wire_pages_reported_initialised.load(), 0u);
}

TEST(DeviceInitSystem, APoisoningGuestLeavesBit7Alone)
{
	MachineOptions options = deflate_machine(true);
	options.guest.free_policy = {true, 0xaa};
	Machine machine(options);
	machine.boot();
	EXPECT_FALSE(machine.guest.negotiated_features() & kBit7)
		<< "bit 7 promises zero, never poison";
	ASSERT_EQ(machine.balloon_to(1024), vb::StepResult::kSettled);
	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	EXPECT_EQ(machine.guest.os().counters().pages_skipped_initialising.load(), 0u);
}

// Reporting with an init_on_alloc guest: what the device zeroed is handed out unzeroed.
struct ReportRun {
	uint64_t zeroed = 0, skipped = 0;
	bool reads_zero = false;
};

ReportRun reuse_reported_memory(bool opt_in)
{
	MachineOptions options;
	options.device.profile = vbsim::qemu_7_2_profile(VB_FEATURE(VB_F_PAGE_REPORTING));
	options.device.device_init_reported = vbsim::OnOffAuto::kAuto;
	options.guest.page_reporting = true;
	options.guest.zero_on_alloc = true;
	options.guest.device_init = opt_in;
	Machine machine(options);
	machine.boot();
	EXPECT_EQ(bool(machine.guest.negotiated_features() & kBit6), opt_in);
	auto all_reported = [&] {
		auto& allocator = machine.guest.allocator();
		return machine.guest.wait_for(
			[&] {
				return allocator.isolated_pages() == 0 &&
				       allocator.reported_pages() == allocator.counts().free;
			},
			kSettleTimeout);
	};
	EXPECT_TRUE(all_reported());
	vbsim::UserMemory dirty = machine.guest.allocate_user_memory(machine.guest_pages(), 0x5a);
	machine.guest.free_user_memory(dirty);
	EXPECT_TRUE(all_reported());

	const auto& counters = machine.guest.os().counters();
	const uint64_t zeroed = counters.pages_zeroed_on_alloc.load();
	const uint64_t skipped = counters.pages_alloc_zeroing_skipped.load();
	vbsim::UserMemory user =
		machine.guest.allocate_user_memory(machine.guest_pages(), std::nullopt);
	EXPECT_FALSE(user.oom_killed);
	ReportRun run;
	run.zeroed = counters.pages_zeroed_on_alloc.load() - zeroed;
	run.skipped = counters.pages_alloc_zeroing_skipped.load() - skipped;
	run.reads_zero = user_memory_is_zero(machine.memory, user);
	EXPECT_EQ(run.zeroed + run.skipped, machine.guest_pages());
	if (opt_in) {
		EXPECT_EQ(machine.guest.core()
				  ->counters()
				  .wire_pages_reported_device_initialised.get(),
			  machine.guest.core()->counters().wire_pages_reported.get());
	}
	machine.guest.free_user_memory(user);
	return run;
}

TEST(DeviceInitSystem, ReportedPagesTheDeviceZeroedAreReusedWithoutZeroing)
{
	const ReportRun with = reuse_reported_memory(true);
	EXPECT_TRUE(with.reads_zero);
	EXPECT_EQ(with.zeroed, 0u) << "every free page was reported and zeroed by the device";
	EXPECT_GT(with.skipped, 0u);

	const ReportRun without = reuse_reported_memory(false);
	EXPECT_TRUE(without.reads_zero);
	EXPECT_EQ(without.skipped, 0u);
}

} // namespace
} // namespace vbtest
