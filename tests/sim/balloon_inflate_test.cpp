// SPDX-License-Identifier: GPL-2.0
//
// Inflate really gives memory back to the host, in both discard modes and both backings:
// populated guest RAM is inflated, mincore shows the range no longer resident, the pages
// read back as zero, the neighbours are untouched, and the number of madvise calls is
// exactly one per PFN (per-page mode) or one per contiguous run (merge mode). Deflate
// then hands the pages back.
#include <gtest/gtest.h>

#include <tuple>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/printers.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using test::TestGuest;

constexpr uint64_t kRamBytes = 32ull << 20;
constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
constexpr uint32_t kRequests = 8;
constexpr uint32_t kRunPages = 128;
// Request r holds two runs of 128 pages, 128 pages apart, so every request has a gap the
// device must leave alone.
constexpr uint32_t kFirstPfn = TestGuest::kFirstFreePfn + 512;
constexpr uint32_t kStride = 4 * kRunPages;

uint32_t run_start(uint32_t request, uint32_t run)
{
	return kFirstPfn + request * kStride + run * 2 * kRunPages;
}

// The request's PFNs, out of order and with the second run descending, as a driver that
// pops pages off a list would send them.
std::vector<uint32_t> request_pfns(uint32_t request)
{
	std::vector<uint32_t> pfns;
	for (uint32_t i = 0; i < kRunPages; ++i)
		pfns.push_back(run_start(request, 1) + kRunPages - 1 - i);
	for (uint32_t i = 0; i < kRunPages; ++i)
		pfns.push_back(run_start(request, 0) + i);
	return pfns;
}

class BalloonInflate : public ::testing::TestWithParam<std::tuple<DiscardMode, PageBacking>>
{
protected:
	BalloonInflate()
	    : memory({.size_bytes = kRamBytes, .backing = std::get<1>(GetParam())}),
	      device(memory, {.profile = full_profile(), .discard_mode = std::get<0>(GetParam())}),
	      guest(memory, device.transport())
	{
	}

	GuestMemory memory;
	BalloonDevice device;
	TestGuest guest;
};

TEST_P(BalloonInflate, DiscardsExactlyTheInflatedPagesWithTheExpectedCalls)
{
	const DiscardMode mode = std::get<0>(GetParam());
	guest.start();
	ASSERT_EQ(memory.populate(0, kRamBytes), 0);
	const uint64_t balloon_area = uint64_t{kFirstPfn} * kPage;
	const uint64_t balloon_bytes = uint64_t{kRequests} * kStride * kPage;
	ASSERT_TRUE(memory.fill(balloon_area, 0x5a, balloon_bytes));
	ASSERT_EQ(memory.resident_bytes(balloon_area, balloon_bytes), balloon_bytes);

	for (uint32_t r = 0; r < kRequests; ++r)
		ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, request_pfns(r)));

	const uint64_t pages = uint64_t{kRequests} * 2 * kRunPages;
	const BalloonDeviceCounters& counters = device.counters();
	EXPECT_EQ(counters.inflate_requests.load(), kRequests);
	EXPECT_EQ(counters.wire_pages_inflated.load(), pages);
	EXPECT_EQ(counters.wire_pages_discarded.load(), pages);
	EXPECT_EQ(counters.discard_failures.load(), 0u);
	EXPECT_EQ(counters.discard_calls.load(),
		  mode == DiscardMode::kPerPage ? pages : 2u * kRequests);
	EXPECT_EQ(device.host_owned_wire_pages(), pages);
	EXPECT_EQ(device.chains_processed(VB_QUEUE_INFLATE), kRequests);
	EXPECT_EQ(device.kicks_received(VB_QUEUE_INFLATE), kRequests);

	const uint64_t run_bytes = uint64_t{kRunPages} * kPage;
	for (uint32_t r = 0; r < kRequests; ++r) {
		for (uint32_t run = 0; run < 2; ++run) {
			const uint64_t start = uint64_t{run_start(r, run)} * kPage;
			EXPECT_EQ(memory.resident_bytes(start, run_bytes), 0u) << "request " << r;
			uint8_t byte = 0xff;
			ASSERT_TRUE(memory.read(start + run_bytes - 1, &byte, 1));
			EXPECT_EQ(byte, 0); // ballooned memory reads back as zero
			// The gap after each run was not in the request: still resident, still
			// 0x5a.
			EXPECT_EQ(memory.resident_bytes(start + run_bytes, run_bytes), run_bytes);
			ASSERT_TRUE(memory.read(start + run_bytes, &byte, 1));
			EXPECT_EQ(byte, 0x5a);
		}
		EXPECT_TRUE(device.host_owns(run_start(r, 1)));
		EXPECT_FALSE(device.host_owns(run_start(r, 1) + kRunPages));
	}
	// The driver area (rings, PFN arrays) is untouched.
	EXPECT_EQ(memory.resident_bytes(0, TestGuest::kDriverAreaBytes),
		  TestGuest::kDriverAreaBytes);

	// Deflate everything: the pages are the guest's again and usable.
	for (uint32_t r = 0; r < kRequests; ++r)
		ASSERT_TRUE(guest.send_pfns(VB_QUEUE_DEFLATE, request_pfns(r)));
	EXPECT_EQ(counters.wire_pages_deflated.load(), pages);
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(counters.rejected_by(BalloonRejection::kPfnNotHostOwned), 0u);
	ASSERT_TRUE(memory.write_le<uint64_t>(balloon_area, 0x1234));
	EXPECT_EQ(memory.resident_bytes(balloon_area, kPage), kPage);
}

TEST_P(BalloonInflate, OneContiguousRequestIsOneCallInMergeMode)
{
	const DiscardMode mode = std::get<0>(GetParam());
	guest.start();
	ASSERT_EQ(memory.populate(0, kRamBytes), 0);
	// 512 PFNs (2 MiB, huge-page aligned) given in reverse order, in one request.
	std::vector<uint32_t> pfns;
	for (uint32_t i = 0; i < 512; ++i)
		pfns.push_back(kFirstPfn + 511 - i);
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, pfns));
	EXPECT_EQ(device.counters().discard_calls.load(),
		  mode == DiscardMode::kPerPage ? 512u : 1u);
	EXPECT_EQ(memory.resident_bytes(uint64_t{kFirstPfn} * kPage, 512 * kPage), 0u);
	EXPECT_EQ(device.counters().requests_over_peer_cap.load(), 1u); // > 256 PFNs
}

INSTANTIATE_TEST_SUITE_P(
	ModesAndBackings, BalloonInflate,
	::testing::Combine(::testing::Values(DiscardMode::kMergeRuns, DiscardMode::kPerPage),
			   ::testing::Values(PageBacking::kSmallPages,
					     PageBacking::kTransparentHugePages)),
	[](const auto& info) {
		return std::string(std::get<0>(info.param) == DiscardMode::kMergeRuns ? "Merge"
										      : "PerPage") +
		       (std::get<1>(info.param) == PageBacking::kSmallPages ? "SmallPages" : "Thp");
	});

TEST(BalloonTarget, TheDriverSeesTheTargetAndReportsActual)
{
	GuestMemory memory({.size_bytes = 16ull << 20});
	BalloonDevice device(memory, {.profile = qemu_7_2_profile()});
	TestGuest guest(memory, device.transport());
	guest.start();
	device.set_target_wire_pages(256);
	ASSERT_EQ(device.transport().wait_for_config_change(test::kHangTimeout), 1u);
	// The driver sees the host's wish as a little-endian le32 in its config space.
	uint8_t wire[4] = {};
	ASSERT_TRUE(device.transport().config_read(VB_CONFIG_NUM_PAGES_OFFSET, wire, sizeof(wire)));
	EXPECT_EQ(wire[0] | wire[1] << 8 | wire[2] << 16 | wire[3] << 24, 256);
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE,
				    TestGuest::pfn_range(TestGuest::kFirstFreePfn, 256)));

	// `actual` is the driver's report, kept apart from the host's wish and from what the
	// host holds: a driver reporting fewer pages than it sent changes neither.
	ASSERT_TRUE(device.transport().config_write32(VB_CONFIG_ACTUAL_OFFSET, 200));
	EXPECT_EQ(device.actual_wire_pages(), 200u);
	EXPECT_EQ(device.target_wire_pages(), 256u);
	EXPECT_EQ(device.host_owned_wire_pages(), 256u);
	// Only whole le32 writes count: half a field is refused and changes nothing.
	const uint16_t half = 7;
	EXPECT_FALSE(device.transport().config_write(VB_CONFIG_ACTUAL_OFFSET, &half, sizeof(half)));
	EXPECT_EQ(device.actual_wire_pages(), 200u);
	// The driver cannot move the target.
	EXPECT_FALSE(device.transport().config_write32(VB_CONFIG_NUM_PAGES_OFFSET, 1));
	EXPECT_EQ(device.target_wire_pages(), 256u);
}

TEST(BalloonReset, AResetGivesEveryPageBackAndClearsActual)
{
	GuestMemory memory({.size_bytes = 16ull << 20});
	BalloonDevice device(memory, {.profile = full_profile()});
	TestGuest guest(memory, device.transport());
	guest.start();
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE,
				    TestGuest::pfn_range(TestGuest::kFirstFreePfn, 100)));
	ASSERT_TRUE(device.transport().config_write32(VB_CONFIG_ACTUAL_OFFSET, 100));
	device.transport().set_status(0);
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(device.counters().wire_pages_released_by_reset.load(), 100u);
	EXPECT_EQ(device.actual_wire_pages(), 0u);
}

} // namespace
} // namespace vbsim
