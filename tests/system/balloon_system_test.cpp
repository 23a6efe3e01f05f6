// SPDX-License-Identifier: GPL-2.0
//
// The driver core in the simulated guest against the simulated host device: negotiation
// with each host's profile, real discards, MUST_TELL_HOST ordering under a held ack,
// stats content, absurd targets, deflate-on-OOM and unbinding.
#include <set>
#include <string>

#include "system_fixture.h"
#include "vballoon/core/features.h"

namespace vbtest {
namespace {

using vbsim::BuddyAllocator;

MachineOptions with_profile(const vbsim::BalloonProfile& profile)
{
	MachineOptions options;
	options.device.profile = profile;
	return options;
}

// ---- Negotiation ---------------------------------------------------------------------

struct ProfileCase {
	std::string name;
	vbsim::BalloonProfile profile;
	uint64_t expected_device_bits;
};

class NegotiationWithProfile : public ::testing::TestWithParam<ProfileCase> {};

TEST_P(NegotiationWithProfile, TakesWhatTheDriverServesAndBalloonsThroughTheRightQueues)
{
	const ProfileCase& c = GetParam();
	Machine machine(with_profile(c.profile));
	machine.boot();

	uint64_t device_bits = machine.guest.negotiated_features() & ((1ull << 24) - 1);
	EXPECT_EQ(device_bits, c.expected_device_bits);
	EXPECT_TRUE(machine.guest.negotiated_features() & VB_FEATURE(VB_F_VERSION_1));
	EXPECT_EQ(machine.balloon_to(3000), vb::StepResult::kSettled);
	// Queues are dense: stats, when present, is queue 2.
	bool stats = device_bits & VB_FEATURE(VB_F_STATS_VQ);
	EXPECT_EQ(machine.device.queue_index(VB_QUEUE_STATS), stats ? 2 : -1);
	EXPECT_EQ(machine.device.actual_wire_pages(), 3000u);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 3000u);
	EXPECT_GT(machine.device.chains_processed(VB_QUEUE_INFLATE), 0u);
	EXPECT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(machine.guest.allocator().counts().free, machine.guest_pages());
	for (unsigned reason = 0; reason < vbsim::kBalloonRejectionCount; reason++)
		EXPECT_EQ(machine.device.counters().rejected[reason].load(), 0u) << "rejection " << reason;
}

INSTANTIATE_TEST_SUITE_P(
	Profiles, NegotiationWithProfile,
	::testing::Values(
		ProfileCase{"qemu_7_2", vbsim::qemu_7_2_profile(), VB_FEATURE(VB_F_STATS_VQ)},
		ProfileCase{"qemu_7_2_deflate_on_oom", vbsim::qemu_7_2_profile(VB_FEATURE(VB_F_DEFLATE_ON_OOM)),
			    VB_FEATURE(VB_F_STATS_VQ) | VB_FEATURE(VB_F_DEFLATE_ON_OOM)},
		ProfileCase{"firecracker", vbsim::firecracker_profile(), 0},
		ProfileCase{"firecracker_stats", vbsim::firecracker_profile(VB_FEATURE(VB_F_STATS_VQ)),
			    VB_FEATURE(VB_F_STATS_VQ)},
		ProfileCase{"cloud_hypervisor", vbsim::cloud_hypervisor_profile(), 0},
		ProfileCase{"full", vbsim::full_profile(),
			    VB_FEATURE(VB_F_MUST_TELL_HOST) | VB_FEATURE(VB_F_STATS_VQ) |
				    VB_FEATURE(VB_F_DEFLATE_ON_OOM)}),
	[](const auto& info) { return info.param.name; });

TEST(Negotiation, PagePoisonIsTakenAndPoisonValWrittenOnlyByAGuestThatPoisons)
{
	MachineOptions options = with_profile(vbsim::qemu_7_2_profile());
	options.guest.free_policy = {true, 0xaa};
	Machine machine(options);
	machine.boot();
	EXPECT_TRUE(machine.guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_POISON));
	EXPECT_EQ(machine.device.poison_value(), 0xaaaaaaaau);

	Machine plain(with_profile(vbsim::qemu_7_2_profile()));
	plain.boot();
	EXPECT_FALSE(plain.guest.negotiated_features() & VB_FEATURE(VB_F_PAGE_POISON));
	EXPECT_EQ(plain.device.poison_value(), 0u);
}

// ---- Inflate really discards; deflated pages read back as zero -----------------------

class InflateDiscards : public ::testing::TestWithParam<vbsim::DiscardMode> {};

TEST_P(InflateDiscards, ResidentMemoryDropsAndDeflatedPagesReadZero)
{
	MachineOptions options = with_profile(vbsim::qemu_7_2_profile());
	options.device.discard_mode = GetParam();
	options.guest.max_chunk_order = 0; // Linux's page-at-a-time inflate
	Machine machine(options);
	machine.boot();

	// The guest dirties all its free memory and frees it: the host holds it resident.
	uint64_t free_pages = machine.guest.allocator().counts().free;
	vbsim::UserMemory dirty = machine.guest.allocate_user_memory(free_pages, 0x5a);
	ASSERT_FALSE(dirty.oom_killed);
	machine.guest.free_user_memory(dirty);
	// The guest's own memory, outside the kernel area the driver keeps writing.
	uint64_t managed_gpa = machine.guest.allocator().first_pfn() * kPageBytes;
	uint64_t managed_bytes = machine.guest_pages() * kPageBytes;
	uint64_t resident_before = machine.memory.resident_bytes(managed_gpa, managed_bytes);
	ASSERT_EQ(resident_before, free_pages * kPageBytes);

	constexpr uint32_t kBalloonPages = 8192; // 32 MiB
	ASSERT_EQ(machine.balloon_to(kBalloonPages), vb::StepResult::kSettled);
	uint64_t resident_after = machine.memory.resident_bytes(managed_gpa, managed_bytes);
	EXPECT_EQ(resident_after, resident_before - kBalloonPages * kPageBytes)
		<< "the host gave up exactly the ballooned memory";

	std::vector<vb::PageRun> ballooned = machine.guest.os().balloon_list().all_runs();
	uint64_t listed = 0;
	for (const vb::PageRun& run : ballooned) {
		EXPECT_EQ(machine.memory.resident_bytes(run.first_pfn * kPageBytes, run.count * kPageBytes), 0u);
		listed += run.count;
	}
	EXPECT_EQ(listed, kBalloonPages);
	const vbsim::BalloonDeviceCounters& counters = machine.device.counters();
	EXPECT_EQ(counters.wire_pages_discarded.load(), kBalloonPages);
	if (GetParam() == vbsim::DiscardMode::kPerPage)
		EXPECT_EQ(counters.discard_calls.load(), kBalloonPages) << "one madvise per 4 KiB PFN";
	else
		EXPECT_LT(counters.discard_calls.load(), kBalloonPages) << "runs were merged";

	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	for (const vb::PageRun& run : ballooned) {
		for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++)
			ASSERT_TRUE(page_is_zero(machine.memory, pfn)) << "page " << pfn;
	}
}

INSTANTIATE_TEST_SUITE_P(Modes, InflateDiscards,
			 ::testing::Values(vbsim::DiscardMode::kMergeRuns, vbsim::DiscardMode::kPerPage),
			 [](const auto& info) {
				 return info.param == vbsim::DiscardMode::kMergeRuns ? "merge" : "per_page";
			 });

TEST(InflateDiscards, ChunkOrderedPfnArraysLetAMergingHostMakeOneCallPerChunk)
{
	MachineOptions options = with_profile(vbsim::qemu_7_2_profile());
	options.guest.max_chunk_order = 9;
	Machine machine(options);
	machine.boot();
	ASSERT_EQ(machine.balloon_to(8192), vb::StepResult::kSettled);
	// 2 MiB chunks in 256-PFN arrays: each request is one contiguous run.
	EXPECT_EQ(machine.device.counters().discard_calls.load(),
		  machine.device.counters().inflate_requests.load());
	EXPECT_EQ(machine.device.counters().inflate_requests.load(), 8192u / 256);
}

// ---- MUST_TELL_HOST --------------------------------------------------------------------

TEST(MustTellHost, NoPageIsReusedBeforeItsDeflateIsAcknowledged)
{
	Machine machine(with_profile(vbsim::full_profile()));
	machine.boot();
	expect_no_page_reused_before_its_deflate_ack(machine, 2048);
}

// ---- Stats -------------------------------------------------------------------------------

TEST(Stats, ReportTheGuestsMemoryWithTheSameTagsEveryTime)
{
	Machine machine(with_profile(vbsim::qemu_7_2_profile()));
	machine.boot();
	uint64_t managed = machine.guest_pages();

	machine.device.request_stats();
	ASSERT_TRUE(machine.device.wait_for_stats_update(1, kSettleTimeout));
	vbsim::GuestStats first = machine.device.last_stats();
	EXPECT_EQ(first.value(VB_S_MEMTOT), managed * kPageBytes);
	EXPECT_EQ(first.value(VB_S_MEMFREE), managed * kPageBytes);
	EXPECT_EQ(first.value(VB_S_AVAIL), managed * kPageBytes);

	vbsim::UserMemory used = machine.guest.allocate_user_memory(1000, 0x22);
	ASSERT_EQ(machine.balloon_to(2000), vb::StepResult::kSettled);
	machine.device.request_stats();
	ASSERT_TRUE(machine.device.wait_for_stats_update(first.update_count, kSettleTimeout));
	vbsim::GuestStats second = machine.device.last_stats();
	EXPECT_EQ(second.present_mask, first.present_mask) << "the same subset of tags";
	// Without deflate-on-OOM the balloon leaves the guest's total.
	EXPECT_EQ(second.value(VB_S_MEMTOT), (managed - 2000) * kPageBytes);
	EXPECT_EQ(second.value(VB_S_MEMFREE), (managed - 3000) * kPageBytes);
	EXPECT_EQ(second.value(VB_S_MINFLT), 1000u);
	machine.guest.free_user_memory(used);
	EXPECT_EQ(machine.device.counters().stats_extra_buffers.load(), 0u) << "one buffer at a time";
}

// VB_F_X_PRESSURE's tags (spec/proposals/vb-f-x-pressure.md) reach a device that asked
// for them, and no other: a device that did not would count them as unknown, as
// Firecracker's stats endpoint did Linux 6.12's new tags.
TEST(Stats, PressureTagsOnlyToADeviceThatNegotiatedThem)
{
	for (const bool offered : {false, true}) {
		MachineOptions options = with_profile(vbsim::full_profile());
		if (offered)
			options.device.profile.offered_features |= VB_FEATURE(VB_F_X_PRESSURE);
		options.guest.pressure_governor = true;
		Machine machine(options);
		machine.boot();
		EXPECT_EQ(machine.device.transport().driver_features() &
				  VB_FEATURE(VB_F_X_PRESSURE),
			  offered ? VB_FEATURE(VB_F_X_PRESSURE) : 0u);
		machine.device.request_stats();
		ASSERT_TRUE(machine.device.wait_for_stats_update(1, kSettleTimeout));
		const vbsim::GuestStats stats = machine.device.last_stats();
		EXPECT_EQ(machine.device.counters().stats_unknown_tags.load(), 0u) << offered;
		EXPECT_EQ(stats.has(VB_S_WS_REFAULT_ANON), offered);
		EXPECT_EQ(stats.has(VB_S_WS_REFAULT_FILE), offered);
		EXPECT_TRUE(stats.has(VB_S_MEMFREE));
	}
}

TEST(Stats, DevicePollingKeepsThemFresh)
{
	MachineOptions options = with_profile(vbsim::qemu_7_2_profile());
	options.device.stats_polling_interval = std::chrono::milliseconds(5);
	Machine machine(options);
	machine.boot();
	const uint64_t managed = machine.guest_pages();
	ASSERT_TRUE(machine.device.wait_for_stats_update(1, kSettleTimeout));
	EXPECT_EQ(machine.device.last_stats().value(VB_S_MEMFREE), managed * kPageBytes);

	// No request from the host: only its timer asks. An update that began after the
	// allocation finished (two updates on) must carry the new free memory.
	vbsim::UserMemory used = machine.guest.allocate_user_memory(1500, 0x44);
	const uint64_t seen = machine.device.last_stats().update_count;
	ASSERT_TRUE(machine.device.wait_for_stats_update(seen + 2, kSettleTimeout));
	EXPECT_EQ(machine.device.last_stats().value(VB_S_MEMFREE), (managed - 1500) * kPageBytes);
	EXPECT_EQ(machine.device.last_stats().value(VB_S_MINFLT), 1500u);
	EXPECT_GE(machine.guest.core()->counters().stats_reports.get(), 2u);
	machine.guest.free_user_memory(used);
}

// ---- Targets the guest cannot meet ---------------------------------------------------------

TEST(AbsurdTarget, IsPursuedOnlyWhileFreePagesLastAndLosesNothing)
{
	Machine machine(with_profile(vbsim::qemu_7_2_profile()));
	machine.boot();
	vbsim::UserMemory used = machine.guest.allocate_user_memory(1000, 0x33);

	EXPECT_EQ(machine.balloon_to(0xffffffffu), vb::StepResult::kStalled);
	uint64_t expected = machine.guest_pages() - 1000;
	EXPECT_EQ(machine.device.actual_wire_pages(), expected);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), expected);
	EXPECT_EQ(machine.guest.allocator().counts().free, 0u);
	EXPECT_EQ(machine.guest.allocator().counts().used, 1000u) << "the guest's own pages untouched";
	EXPECT_GT(machine.guest.core()->counters().alloc_failures.get(), 0u);

	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	machine.guest.free_user_memory(used);
	EXPECT_EQ(machine.guest.allocator().counts().free, machine.guest_pages());
}

// ---- Deflate on OOM -------------------------------------------------------------------------

TEST(DeflateOnOom, AGuestOutOfMemorySurvivesAndTheBalloonShrinks)
{
	Machine machine(with_profile(vbsim::qemu_7_2_profile(VB_FEATURE(VB_F_DEFLATE_ON_OOM))));
	machine.boot();
	uint64_t pages = machine.guest_pages();
	ASSERT_EQ(machine.balloon_to(static_cast<uint32_t>(pages - 256)), vb::StepResult::kSettled);

	vbsim::UserMemory hog = machine.guest.allocate_user_memory(2000, 0x44);
	EXPECT_FALSE(hog.oom_killed);
	EXPECT_EQ(hog.pages, 2000u);
	const vb::BalloonCounters& driver = machine.guest.core()->counters();
	EXPECT_GE(driver.oom_calls.get(), (2000u - 256 + 255) / 256);
	EXPECT_LE(driver.oom_wire_pages_freed.get(), driver.oom_calls.get() * 256)
		<< "at most 256 per call";
	EXPECT_EQ(machine.device.actual_wire_pages(),
		  pages - 256 - driver.oom_wire_pages_freed.get());
	EXPECT_EQ(machine.device.host_owned_wire_pages(), machine.device.actual_wire_pages());
	machine.guest.free_user_memory(hog);
}

TEST(DeflateOnOom, WithoutTheFeatureTheBalloonKeepsItsPages)
{
	Machine machine(with_profile(vbsim::qemu_7_2_profile()));
	machine.boot();
	uint64_t pages = machine.guest_pages();
	ASSERT_EQ(machine.balloon_to(static_cast<uint32_t>(pages - 256)), vb::StepResult::kSettled);
	vbsim::UserMemory hog = machine.guest.allocate_user_memory(2000, 0x44);
	EXPECT_TRUE(hog.oom_killed);
	EXPECT_EQ(hog.pages, 256u);
	EXPECT_EQ(machine.device.actual_wire_pages(), pages - 256);
	machine.guest.free_user_memory(hog);
}

// ---- Unbinding and compaction -----------------------------------------------------------------

TEST(Remove, WhileInflatedReturnsEveryPage)
{
	Machine machine(with_profile(vbsim::full_profile()));
	machine.boot();
	ASSERT_EQ(machine.balloon_to(5000), vb::StepResult::kSettled);
	machine.guest.remove();
	// Told to the host page by page before the reset (a reset would also empty the host's
	// side, which is why that alone proves nothing).
	EXPECT_EQ(machine.device.counters().wire_pages_deflated.load(), 5000u);
	EXPECT_EQ(machine.device.counters().wire_pages_released_by_reset.load(), 0u);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(machine.guest.allocator().counts().free, machine.guest_pages());
	EXPECT_EQ(machine.guest.os().balloon_list().pages(), 0u);
}

TEST(Compaction, MovedPagesStayBalloonedAndTheHostFollows)
{
	Machine machine(with_profile(vbsim::full_profile()));
	machine.boot();
	ASSERT_EQ(machine.balloon_to(1024), vb::StepResult::kSettled);
	std::vector<vb::PageRun> runs = machine.guest.os().balloon_list().all_runs();
	uint64_t moved_from = runs.front().first_pfn;
	ASSERT_TRUE(machine.guest.migrate_balloon_page(moved_from));
	EXPECT_FALSE(machine.device.host_owns(moved_from));
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 1024u);
	EXPECT_EQ(machine.device.actual_wire_pages(), 1024u);
	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 0u);
}

} // namespace
} // namespace vbtest
