// SPDX-License-Identifier: GPL-2.0
//
// MUST_TELL_HOST: a deflated page stays the host's until the deflate is acked. The device
// tracks which pages it owns, and its deflate gate holds acks back so a test can sit in
// the window between "the guest told the host" and "the host acknowledged" for as long as
// it needs, with no timing involved.
#include <gtest/gtest.h>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using test::kHangTimeout;
using test::TestGuest;

constexpr uint32_t kPfn = TestGuest::kFirstFreePfn;

class BalloonDeflateGate : public ::testing::Test
{
protected:
	BalloonDeflateGate()
	{
		const uint64_t features = guest.start();
		EXPECT_TRUE(features & VB_FEATURE(VB_F_MUST_TELL_HOST));
		EXPECT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, TestGuest::pfn_range(kPfn, 64)));
	}

	GuestMemory memory{{.size_bytes = 16ull << 20}};
	BalloonDevice device{memory, {.profile = full_profile()}};
	TestGuest guest{memory, device.transport()};
};

TEST_F(BalloonDeflateGate, PagesStayHostOwnedUntilTheAck)
{
	for (uint32_t pfn = kPfn; pfn < kPfn + 64; ++pfn)
		ASSERT_TRUE(device.host_owns(pfn));
	device.hold_deflate_acks();
	void* deflate = guest.post_pfns(VB_QUEUE_DEFLATE, TestGuest::pfn_range(kPfn, 32));
	ASSERT_TRUE(device.wait_for_held_deflate_acks(1, kHangTimeout));

	// Inside the window: the device has the request, the guest has no ack, and the pages
	// are still the host's. A guest that reused one now would be caught by host_owns().
	EXPECT_EQ(device.counters().deflate_requests.load(), 1u);
	EXPECT_FALSE(guest.ring(VB_QUEUE_DEFLATE).has_used());
	for (uint32_t pfn = kPfn; pfn < kPfn + 32; ++pfn)
		EXPECT_TRUE(device.host_owns(pfn)) << pfn;
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 0u);

	device.release_deflate_acks();
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_DEFLATE, deflate));
	// Once the guest sees the ack, the pages are already its own.
	for (uint32_t pfn = kPfn; pfn < kPfn + 32; ++pfn)
		EXPECT_FALSE(device.host_owns(pfn)) << pfn;
	EXPECT_TRUE(device.host_owns(kPfn + 32));
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 32u);
	EXPECT_EQ(device.held_deflate_acks(), 0u);
}

TEST_F(BalloonDeflateGate, HeldAcksAreReleasedInArrivalOrder)
{
	device.hold_deflate_acks();
	DriverRing& ring = guest.ring(VB_QUEUE_DEFLATE);
	void* first = guest.post_pfns(VB_QUEUE_DEFLATE, {kPfn + 5});
	void* second = guest.post_pfns(VB_QUEUE_DEFLATE, {kPfn + 1});
	void* third = guest.post_pfns(VB_QUEUE_DEFLATE, {kPfn + 9});
	ASSERT_TRUE(device.wait_for_held_deflate_acks(3, kHangTimeout));
	device.release_deflate_acks();
	ASSERT_TRUE(device.transport().wait_until([&] { return device.held_deflate_acks() == 0; },
						  kHangTimeout));
	uint32_t len = 0;
	EXPECT_EQ(ring.get_used(&len), first);
	EXPECT_EQ(ring.get_used(&len), second);
	EXPECT_EQ(ring.get_used(&len), third);
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 3u);
}

TEST_F(BalloonDeflateGate, InflatesStillFlowWhileDeflatesAreHeld)
{
	device.hold_deflate_acks();
	guest.post_pfns(VB_QUEUE_DEFLATE, {kPfn});
	ASSERT_TRUE(device.wait_for_held_deflate_acks(1, kHangTimeout));
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {kPfn + 100}));
	EXPECT_TRUE(device.host_owns(kPfn + 100));
	EXPECT_TRUE(device.host_owns(kPfn));
}

TEST_F(BalloonDeflateGate, AResetDropsHeldAcksAndGivesEveryPageBack)
{
	device.hold_deflate_acks();
	guest.post_pfns(VB_QUEUE_DEFLATE, {kPfn, kPfn + 1});
	ASSERT_TRUE(device.wait_for_held_deflate_acks(1, kHangTimeout));
	device.transport().set_status(0);
	EXPECT_EQ(device.held_deflate_acks(), 0u);
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(device.counters().wire_pages_released_by_reset.load(), 64u);
	// Releasing after the reset has nothing to ack and touches no queue.
	device.release_deflate_acks();
	TestGuest again(memory, device.transport());
	again.start();
	ASSERT_TRUE(again.send_pfns(VB_QUEUE_DEFLATE, {kPfn}));
	EXPECT_EQ(device.counters().rejected_by(BalloonRejection::kPfnNotHostOwned), 1u);
}

} // namespace
} // namespace vbsim
