// SPDX-License-Identifier: GPL-2.0
//
// The statsq: the device keeps the one buffer the driver primed, parses it, returns it to
// ask for fresh numbers (on request or on its polling timer), and notices a driver that
// keeps two buffers outstanding.
#include <gtest/gtest.h>

#include <cstring>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using namespace std::chrono_literals;
using test::kHangTimeout;
using test::TestGuest;

class BalloonStats : public ::testing::Test
{
protected:
	explicit BalloonStats(std::chrono::milliseconds interval = 0ms)
	    : device(memory, {.profile = qemu_7_2_profile(), .stats_polling_interval = interval}),
	      guest(memory, device.transport())
	{
	}
	// The init order of 5.5.6.3: queues, prime the statsq, then DRIVER_OK.
	void* start_with_primed_buffer(uint64_t memfree)
	{
		guest.negotiate();
		guest.setup_queues();
		void* token =
			guest.post_stats({{VB_S_MEMFREE, memfree}, {VB_S_MEMTOT, 16ull << 20}});
		guest.driver_ok();
		return token;
	}

	GuestMemory memory{{.size_bytes = 16ull << 20}};
	BalloonDevice device;
	TestGuest guest;
};

TEST_F(BalloonStats, ThePrimedBufferIsParsedAtActivation)
{
	start_with_primed_buffer(1234);
	ASSERT_TRUE(device.wait_for_stats_update(0, kHangTimeout));
	const GuestStats stats = device.last_stats();
	EXPECT_EQ(stats.update_count, 1u);
	EXPECT_EQ(stats.value(VB_S_MEMFREE), 1234u);
	EXPECT_EQ(stats.value(VB_S_MEMTOT), 16ull << 20);
	EXPECT_FALSE(stats.has(VB_S_SWAP_IN));
	EXPECT_EQ(device.counters().stats_updates.load(), 1u);
}

TEST_F(BalloonStats, ARequestReturnsTheBufferAndTheRefillIsParsed)
{
	void* primed = start_with_primed_buffer(1);
	ASSERT_TRUE(device.wait_for_stats_update(0, kHangTimeout));
	device.request_stats();
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_STATS, primed));
	EXPECT_EQ(device.counters().stats_requests.load(), 1u);

	// The refill carries a different subset plus a tag this device does not know.
	guest.post_stats({{VB_S_MEMFREE, 2}, {VB_S_NR + 3, 77}, {VB_S_AVAIL, 3}});
	ASSERT_TRUE(device.wait_for_stats_update(1, kHangTimeout));
	const GuestStats stats = device.last_stats();
	EXPECT_EQ(stats.value(VB_S_MEMFREE), 2u);
	EXPECT_EQ(stats.value(VB_S_AVAIL), 3u);
	EXPECT_FALSE(stats.has(VB_S_MEMTOT)); // values are reset before each parse
	EXPECT_EQ(device.counters().stats_unknown_tags.load(), 1u);
}

TEST_F(BalloonStats, ASecondOutstandingBufferIsCountedAndTheOlderReturned)
{
	void* primed = start_with_primed_buffer(1);
	ASSERT_TRUE(device.wait_for_stats_update(0, kHangTimeout));
	void* extra = guest.post_stats({{VB_S_MEMFREE, 9}});
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_STATS, primed));	    // the older goes back
	ASSERT_TRUE(device.wait_for_stats_update(1, kHangTimeout)); // the newer is parsed
	EXPECT_EQ(device.counters().stats_extra_buffers.load(), 1u);
	EXPECT_EQ(device.last_stats().value(VB_S_MEMFREE), 9u);
	// The newer is the one held: a request returns it.
	device.request_stats();
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_STATS, extra));
}

TEST_F(BalloonStats, ARequestWithNoBufferHeldIsCounted)
{
	guest.start();
	device.request_stats();
	ASSERT_TRUE(device.transport().wait_until(
		[&] { return device.counters().stats_requests_without_buffer.load() == 1; },
		kHangTimeout));
	EXPECT_EQ(device.counters().stats_requests.load(), 0u);
}

TEST_F(BalloonStats, PartialEntriesAreCountedAndTheRestUsed)
{
	guest.negotiate();
	guest.setup_queues();
	const uint16_t tag = to_le<uint16_t>(VB_S_MAJFLT);
	const uint64_t value = to_le<uint64_t>(5);
	uint8_t bytes[13] = {};
	std::memcpy(bytes, &tag, 2);
	std::memcpy(bytes + 2, &value, 8);
	const uint64_t gpa = guest.write_buffer(bytes, sizeof(bytes));
	guest.post(VB_QUEUE_STATS, {{gpa, sizeof(bytes)}});
	guest.driver_ok();
	ASSERT_TRUE(device.wait_for_stats_update(0, kHangTimeout));
	EXPECT_EQ(device.last_stats().value(VB_S_MAJFLT), 5u);
	EXPECT_EQ(device.counters().rejected_by(BalloonRejection::kStatsPartialEntry), 1u);
}

class BalloonStatsPolling : public BalloonStats
{
protected:
	BalloonStatsPolling() : BalloonStats(2ms) {}
};

TEST_F(BalloonStatsPolling, TheTimerAsksForFreshStatsAgainAndAgain)
{
	void* held = start_with_primed_buffer(0);
	for (uint64_t round = 1; round <= 3; ++round) {
		// The device's timer returns the buffer; the driver answers with new numbers.
		ASSERT_TRUE(guest.wait_for(VB_QUEUE_STATS, held)) << round;
		held = guest.post_stats({{VB_S_MEMFREE, round}});
		ASSERT_TRUE(device.wait_for_stats_update(round, kHangTimeout));
		EXPECT_EQ(device.last_stats().value(VB_S_MEMFREE), round);
	}
	EXPECT_GE(device.counters().stats_requests.load(), 3u);
}

TEST(BalloonStatsAbsent, ADeviceWithoutStatsIgnoresRequests)
{
	GuestMemory memory({.size_bytes = 16ull << 20});
	BalloonDevice device(memory, {.profile = cloud_hypervisor_profile()});
	TestGuest guest(memory, device.transport());
	guest.start();
	EXPECT_EQ(device.queue_index(VB_QUEUE_STATS), -1);
	device.request_stats();
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {TestGuest::kFirstFreePfn}));
	EXPECT_EQ(device.counters().stats_requests.load(), 0u);
	EXPECT_EQ(device.last_stats().update_count, 0u);
}

} // namespace
} // namespace vbsim
