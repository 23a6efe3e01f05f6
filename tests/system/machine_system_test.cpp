// SPDX-License-Identifier: GPL-2.0
//
// The shared machine: what the builder chooses by name reaches the device and the guest,
// a paused guest stands still until resumed, and the description the migration model gets
// names the machine's real parts.
#include <stdexcept>

#include "machine/machine_builder.h"
#include "machine/migration_wiring.h"
#include "system_fixture.h"

namespace vbtest {
namespace {

using vbsim::MachineBuilder;

TEST(MachineBuilder, ANamedProfileKeepsFeaturesOfferedOnTop)
{
	MachineBuilder builder;
	builder.ram_bytes(64ull << 20).offer(VB_FEATURE(VB_F_X_CHUNKED)).profile("qemu-7.2");
	EXPECT_EQ(builder.config().device.profile.offered_features,
		  vbsim::qemu_7_2_profile().offered_features | VB_FEATURE(VB_F_X_CHUNKED));
	EXPECT_THROW(builder.profile("vmware"), std::invalid_argument);
}

TEST(MachineBuilder, HintingAndReportingAreOfferedAndNegotiated)
{
	MachineBuilder builder;
	builder.ram_bytes(64ull << 20).profile("qemu-7.2").free_page_hinting().page_reporting();
	auto machine = builder.build();
	ASSERT_EQ(machine->boot(), "");
	EXPECT_TRUE(machine->guest.negotiated_features() & VB_FEATURE(VB_F_FREE_PAGE_HINT));
	EXPECT_TRUE(machine->guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_REPORTING));
	EXPECT_TRUE(machine->guest_problems().empty());
}

TEST(MachineBuilder, MemoryIsPreparedBeforeTheDeviceAndTheGuestExist)
{
	uint64_t resident_when_prepared = 0;
	MachineBuilder builder;
	builder.ram_bytes(16ull << 20).prepare_memory([&](vbsim::GuestMemory& memory) {
		resident_when_prepared = memory.resident_bytes(0, memory.size());
		ASSERT_EQ(memory.populate(0, memory.size()), 0);
	});
	auto machine = builder.build();
	// Nothing had touched RAM yet (the guest writes its kernel area when it is built).
	EXPECT_EQ(resident_when_prepared, 0u);
	EXPECT_EQ(machine->memory.resident_bytes(0, machine->memory.size()), 16ull << 20);
}

TEST(SimGuestPause, APausedGuestDoesNotAnswerATargetUntilResumed)
{
	Machine machine;
	machine.boot();
	machine.guest.pause();
	machine.device.set_target_wire_pages(1024);
	// Negative check: a running guest inflates 1024 pages in well under a millisecond.
	EXPECT_FALSE(machine.guest.wait_for([&] { return machine.device.actual_wire_pages() != 0; },
					    200ms));
	EXPECT_EQ(machine.device.counters().wire_pages_inflated.load(), 0u);
	machine.guest.resume();
	EXPECT_EQ(machine.balloon_to(1024), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.actual_wire_pages(), 1024u);
	EXPECT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
}

TEST(MachineForMigration, DescribesTheMachinesRealParts)
{
	MachineOptions options;
	options.device.profile = vbsim::qemu_7_2_profile(VB_FEATURE(VB_F_FREE_PAGE_HINT));
	options.guest.free_page_hinting = true;
	Machine machine(options);
	machine.boot();
	vbsim::MachineForMigration wiring(machine, nullptr);
	vbsim::migration::MigrationMachine& described = wiring.described();
	EXPECT_EQ(described.memory, &machine.memory);
	ASSERT_EQ(described.always_dirty.size(), 1u);
	EXPECT_EQ(described.always_dirty[0].first_pfn, 0u);
	EXPECT_EQ(described.always_dirty[0].wire_pages, options.guest.kernel_bytes / kPageBytes);
	EXPECT_TRUE(described.pages_in_use().empty());
	// The hint controls are the device's: a round started through them is the device's id.
	ASSERT_NE(described.hints, nullptr);
	const uint32_t id = described.hints->start_hint_round();
	EXPECT_EQ(machine.device.hint_cmd_id(), id);
	described.hints->finish_hinting();
	EXPECT_TRUE(machine.guest.wait_for([&] { return machine.guest.core()->hint_held_pages() == 0; },
					   kSettleTimeout));
	EXPECT_GE(described.guest_cpu_ms(), 0.0);
}

TEST(MachineForMigration, NoHintControlsWithoutTheFeature)
{
	MachineOptions options;
	options.device.profile = vbsim::qemu_7_2_profile(); // free-page-hint=off, QEMU's default
	Machine machine(options);
	machine.boot();
	vbsim::MachineForMigration wiring(machine, nullptr);
	EXPECT_EQ(wiring.described().hints, nullptr);
	EXPECT_FALSE(wiring.described().set_free_page_observer);
}

} // namespace
} // namespace vbtest
