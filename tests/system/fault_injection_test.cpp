// SPDX-License-Identifier: GPL-2.0
//
// The driver against a device that fails on purpose (device-sim/balloon/fault_plan.h):
// stalls, lost notifications both ways, a queue that refuses to go on, the target changing
// during inflate, a reset during deflate, surprise removal. In every case the driver either
// recovers or stops cleanly, and every page is accounted for: the allocator, the balloon
// list, the driver's count, `actual` and the host's view agree; after the OS resets the
// device (remove) every page is the guest's again. The Machine checks the guest's
// accounting and MUST_TELL_HOST on the way out of every test.
#include <gtest/gtest.h>

#include "system_fixture.h"

namespace vbtest {
namespace {

MachineOptions with_faults(const vbsim::FaultPlan& faults)
{
	MachineOptions options;
	options.device.profile = vbsim::full_profile(); // MUST_TELL_HOST, DEFLATE_ON_OOM, stats
	options.device.faults = faults;
	return options;
}

// While the device serves: the driver's count, the list, `actual` and the host agree.
void expect_agreement(Machine& machine, uint64_t ballooned)
{
	EXPECT_EQ(machine.guest.check_accounting(), "");
	EXPECT_EQ(machine.guest.core()->balloon_wire_pages(), ballooned);
	EXPECT_EQ(machine.device.actual_wire_pages(), ballooned);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), ballooned);
}

// After a failure: nothing is lost. The host holds no page the driver does not count (it
// may count pages the host never got: those wait for the reset).
void expect_nothing_lost(Machine& machine)
{
	EXPECT_EQ(machine.guest.check_accounting(), "");
	EXPECT_LE(machine.device.host_owned_wire_pages(),
		  machine.guest.core()->balloon_wire_pages());
	const auto counts = machine.guest.allocator().counts();
	EXPECT_EQ(counts.balloon, machine.guest.core()->balloon_wire_pages());
}

// Remove: the OS resets the device and every page comes back.
void remove_and_expect_every_page_back(Machine& machine)
{
	machine.guest.remove();
	EXPECT_EQ(machine.guest.os().balloon_list().pages(), 0u);
	EXPECT_EQ(machine.guest.allocator().counts().free, machine.guest_pages());
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 0u);
}

TEST(Faults, AStalledHostIsWaitedFor)
{
	vbsim::FaultPlan faults;
	faults.on(VB_QUEUE_INFLATE).stall_per_chain = std::chrono::milliseconds(3);
	faults.on(VB_QUEUE_DEFLATE).stall_per_chain = std::chrono::milliseconds(3);
	Machine machine(with_faults(faults));
	machine.boot();
	ASSERT_EQ(machine.balloon_to(3000), vb::StepResult::kSettled);
	expect_agreement(machine, 3000);
	ASSERT_EQ(machine.balloon_to(1000), vb::StepResult::kSettled);
	expect_agreement(machine, 1000);
	EXPECT_GT(machine.device.fault_counters().stalls.load(), 0u);
}

TEST(Faults, LostInterruptsAreFoundByLookingAgain)
{
	vbsim::FaultPlan faults;
	faults.on(VB_QUEUE_INFLATE).drop_interrupt_every = 2;
	faults.on(VB_QUEUE_DEFLATE).drop_interrupt_every = 2;
	// A host slower than the driver, so the driver is asleep waiting when an interrupt is
	// lost: a pipelined inflate otherwise often finds the buffer before it would sleep.
	faults.on(VB_QUEUE_INFLATE).stall_per_chain = std::chrono::milliseconds(1);
	faults.on(VB_QUEUE_DEFLATE).stall_per_chain = std::chrono::milliseconds(1);
	Machine machine(with_faults(faults));
	machine.boot();
	ASSERT_EQ(machine.balloon_to(4000), vb::StepResult::kSettled);
	expect_agreement(machine, 4000);
	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	expect_agreement(machine, 0);
	EXPECT_GT(machine.device.fault_counters().interrupts_dropped.load(), 0u);
	EXPECT_GT(machine.guest.os().counters().interrupts_missed.load(), 0u);
}

TEST(Faults, LostKicksAreRepeated)
{
	vbsim::FaultPlan faults;
	faults.on(VB_QUEUE_INFLATE).ignore_kick_every = 3;
	faults.on(VB_QUEUE_DEFLATE).ignore_kick_every = 3;
	Machine machine(with_faults(faults));
	machine.boot();
	ASSERT_EQ(machine.balloon_to(4000), vb::StepResult::kSettled);
	expect_agreement(machine, 4000);
	ASSERT_EQ(machine.balloon_to(500), vb::StepResult::kSettled);
	expect_agreement(machine, 500);
	EXPECT_GT(machine.device.fault_counters().kicks_ignored.load(), 0u);
	EXPECT_GT(machine.guest.os().counters().kicks_repeated.load(), 0u);
}

TEST(Faults, AnInflateQueueThatRefusesToGoOnStopsTheDriverCleanly)
{
	vbsim::FaultPlan faults;
	faults.on(VB_QUEUE_INFLATE).break_after_chains = 2;
	Machine machine(with_faults(faults));
	machine.boot();
	EXPECT_EQ(machine.balloon_to(5000), vb::StepResult::kStalled);
	ASSERT_TRUE(machine.device.fault_counters().broke.load());
	EXPECT_TRUE(machine.device.transport().status() & VB_STATUS_NEEDS_RESET);
	// Two messages acknowledged, one taken and never returned: the driver keeps that one
	// ballooned (the host may hold it) and gave back what it never sent.
	const uint64_t acknowledged = machine.device.host_owned_wire_pages();
	EXPECT_GT(acknowledged, 0u);
	EXPECT_LT(machine.guest.core()->balloon_wire_pages(), 5000u);
	EXPECT_GT(machine.guest.core()->balloon_wire_pages(), acknowledged);
	expect_nothing_lost(machine);
	remove_and_expect_every_page_back(machine);
}

TEST(Faults, ATargetChangeDuringInflateIsFollowed)
{
	vbsim::FaultPlan faults;
	faults.retarget = {.after_inflate_chains = 3, .new_target_wire_pages = 700};
	Machine machine(with_faults(faults));
	machine.boot();
	machine.device.set_target_wire_pages(6000);
	// The host lowered its wish while the driver was inflating towards 6000.
	ASSERT_TRUE(machine.device.transport().wait_until(
		[&] { return machine.device.fault_counters().retargeted.load(); }, kSettleTimeout));
	auto result = machine.guest.wait_until_settled(kSettleTimeout);
	ASSERT_TRUE(result);
	EXPECT_EQ(*result, vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.target_wire_pages(), 700u);
	expect_agreement(machine, 700);
}

TEST(Faults, AResetDuringDeflateFreesOnlyWhatTheHostAcknowledged)
{
	vbsim::FaultPlan faults;
	faults.on(VB_QUEUE_DEFLATE).break_after_chains = 1;
	Machine machine(with_faults(faults));
	machine.boot();
	ASSERT_EQ(machine.balloon_to(4000), vb::StepResult::kSettled);
	EXPECT_EQ(machine.balloon_to(0), vb::StepResult::kStalled);
	ASSERT_TRUE(machine.device.fault_counters().broke.load());
	// One deflate acknowledged, one taken and never returned (its pages stay ballooned:
	// with MUST_TELL_HOST they are still the host's), the rest never sent.
	const uint64_t ballooned = machine.guest.core()->balloon_wire_pages();
	EXPECT_GT(ballooned, 0u);
	EXPECT_LT(ballooned, 4000u);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), ballooned);
	expect_nothing_lost(machine);
	remove_and_expect_every_page_back(machine);
}

TEST(Faults, SurpriseRemovalDuringInflateLosesNoPage)
{
	vbsim::FaultPlan faults;
	faults.on(VB_QUEUE_INFLATE).vanish_after_chains = 3;
	Machine machine(with_faults(faults));
	machine.boot();
	EXPECT_EQ(machine.balloon_to(5000), vb::StepResult::kStalled);
	ASSERT_TRUE(machine.device.fault_counters().vanished.load());
	EXPECT_TRUE(machine.device.transport().removed());
	expect_nothing_lost(machine);
	remove_and_expect_every_page_back(machine);
}

TEST(Faults, SurpriseRemovalDuringDeflateLosesNoPage)
{
	vbsim::FaultPlan faults;
	faults.on(VB_QUEUE_DEFLATE).vanish_after_chains = 1;
	Machine machine(with_faults(faults));
	machine.boot();
	ASSERT_EQ(machine.balloon_to(3000), vb::StepResult::kSettled);
	EXPECT_EQ(machine.balloon_to(0), vb::StepResult::kStalled);
	ASSERT_TRUE(machine.device.fault_counters().vanished.load());
	EXPECT_GT(machine.guest.core()->balloon_wire_pages(), 0u);
	expect_nothing_lost(machine);
	remove_and_expect_every_page_back(machine);
}

} // namespace
} // namespace vbtest
