// SPDX-License-Identifier: GPL-2.0
//
// The device side of VB_F_X_CHUNKED (spec/proposals/vb-f-x-chunked.md, rows BAL-DEV-XCH-*
// of spec/requirements.md), driven by the hand-made test driver so every descriptor is
// spelled out: a request whose ranges break the format is refused whole (nothing of it is
// acted on, it comes back with used length 0, the refusal is counted), any number of
// ranges the ring carries is one request, and pages come back in whatever grouping the
// driver names them.
#include <gtest/gtest.h>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using test::TestGuest;

constexpr uint64_t kRamBytes = 16ull << 20;
constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
constexpr uint64_t kPfn = TestGuest::kFirstFreePfn;

BalloonProfile chunked_profile()
{
	BalloonProfile profile = full_profile();
	profile.offered_features |= VB_FEATURE(VB_F_X_CHUNKED);
	return profile;
}

// The range [pfn, pfn + pages) as one descriptor.
ChainBuffer range(uint64_t pfn, uint64_t pages)
{
	return {pfn * kPage, static_cast<uint32_t>(pages * kPage)};
}

class BalloonChunked : public ::testing::Test
{
protected:
	BalloonChunked()
	    : device(memory, {.profile = chunked_profile()}), guest(memory, device.transport())
	{
		guest.start();
		EXPECT_TRUE(guest.features() & VB_FEATURE(VB_F_X_CHUNKED));
		EXPECT_EQ(memory.populate(0, kRamBytes), 0);
	}

	// Posts one request, waits for it, returns its used length.
	uint32_t send(vb_queue_kind kind, const std::vector<ChainBuffer>& ranges,
		      const std::vector<ChainBuffer>& in = {})
	{
		uint32_t len = ~0u;
		EXPECT_TRUE(guest.wait_for(kind, guest.post(kind, ranges, in), &len));
		return len;
	}
	uint64_t rejected(BalloonRejection reason) const
	{
		return device.counters().rejected_by(reason);
	}
	uint64_t host_owned_in(uint64_t pfn, uint64_t pages) const
	{
		uint64_t owned = 0;
		for (uint64_t p = pfn; p < pfn + pages; p++)
			owned += device.host_owns(p);
		return owned;
	}
	// Nothing of a refused inflate was acted on: no page taken, none discarded.
	void expect_nothing_ballooned()
	{
		EXPECT_EQ(device.host_owned_wire_pages(), 0u);
		EXPECT_EQ(device.counters().wire_pages_discarded.load(), 0u);
		EXPECT_EQ(device.counters().inflate_requests.load(), 0u);
		EXPECT_EQ(memory.resident_bytes(0, kRamBytes), kRamBytes);
	}

	GuestMemory memory{{.size_bytes = kRamBytes}};
	BalloonDevice device;
	TestGuest guest;
};

TEST_F(BalloonChunked, ARangeNotInWholePagesRefusesTheWholeRequest)
{
	// Each bad range comes after a good one, which must not be taken either.
	const std::vector<ChainBuffer> bad = {
		{kPfn * kPage + 2048, static_cast<uint32_t>(kPage)},	   // address inside a page
		{(kPfn + 16) * kPage, static_cast<uint32_t>(kPage + 512)}, // length not whole pages
		{(kPfn + 32) * kPage, 0},				   // no length at all
	};
	for (const ChainBuffer& b : bad)
		EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn + 64, 8), b}), 0u);
	EXPECT_EQ(rejected(BalloonRejection::kChunkMisaligned), 3u);
	expect_nothing_ballooned();

	// The same on deflate: the good range stays in the balloon.
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn + 64, 8)}), 0u);
	ASSERT_EQ(device.host_owned_wire_pages(), 8u);
	for (const ChainBuffer& b : bad)
		EXPECT_EQ(send(VB_QUEUE_DEFLATE, {range(kPfn + 64, 8), b}), 0u);
	EXPECT_EQ(rejected(BalloonRejection::kChunkMisaligned), 6u);
	EXPECT_EQ(host_owned_in(kPfn + 64, 8), 8u);
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 0u);
}

TEST_F(BalloonChunked, ARangeRunningPastTheEndOfRamRefusesTheWholeRequest)
{
	const uint64_t last_pfn = kRamBytes / kPage - 1;
	// Starts inside RAM on a page boundary, ends a page past it.
	const ChainBuffer crossing = range(last_pfn - 1, 3);
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn, 4), crossing}), 0u);
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kRamBytes / kPage, 1)}), 0u); // wholly outside
	EXPECT_EQ(device.ring_rejections(VB_QUEUE_INFLATE, RingRejection::kBufferOutsideRam), 2u);
	expect_nothing_ballooned();
	EXPECT_FALSE(device.host_owns(last_pfn));

	// The last pages of RAM themselves are fine.
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(last_pfn - 1, 2)}), 0u);
	EXPECT_EQ(device.host_owned_wire_pages(), 2u);
	EXPECT_EQ(send(VB_QUEUE_DEFLATE, {range(last_pfn - 1, 2), crossing}), 0u);
	EXPECT_EQ(device.host_owned_wire_pages(), 2u) << "a deflate past RAM is refused whole too";
}

TEST_F(BalloonChunked, OverlappingRangesRefuseTheWholeRequest)
{
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn, 4), range(kPfn + 3, 2)}), 0u); // share a page
	EXPECT_EQ(send(VB_QUEUE_INFLATE,
		       {range(kPfn + 100, 1), range(kPfn + 8, 4), range(kPfn + 100, 1)}),
		  0u); // the same range twice, not adjacent in the chain
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn + 10, 8), range(kPfn + 12, 2)}),
		  0u); // one inside another
	EXPECT_EQ(rejected(BalloonRejection::kChunkOverlap), 3u);
	EXPECT_EQ(rejected(BalloonRejection::kPfnAlreadyHostOwned), 0u);
	expect_nothing_ballooned();

	// Adjacent ranges share no page and are fine.
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn + 4, 4), range(kPfn, 4)}), 0u);
	EXPECT_EQ(device.host_owned_wire_pages(), 8u);
	// On deflate an overlap is refused whole as well.
	EXPECT_EQ(send(VB_QUEUE_DEFLATE, {range(kPfn, 8), range(kPfn + 7, 1)}), 0u);
	EXPECT_EQ(rejected(BalloonRejection::kChunkOverlap), 4u);
	EXPECT_EQ(device.host_owned_wire_pages(), 8u);
	EXPECT_EQ(rejected(BalloonRejection::kPfnNotHostOwned), 0u);
}

TEST_F(BalloonChunked, DeviceWritableDescriptorsAreRefusedWithoutABitmapFeature)
{
	const uint64_t scratch = guest.alloc(64);
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn, 4)}, {{scratch, 8}}), 0u);
	EXPECT_EQ(rejected(BalloonRejection::kWritableBuffer), 1u);
	expect_nothing_ballooned();
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn, 4)}), 0u);
	EXPECT_EQ(send(VB_QUEUE_DEFLATE, {range(kPfn, 4)}, {{scratch, 8}}), 0u);
	EXPECT_EQ(rejected(BalloonRejection::kWritableBuffer), 2u);
	EXPECT_EQ(device.host_owned_wire_pages(), 4u);
}

TEST_F(BalloonChunked, AsManyRangesAsTheRingHoldsAreOneRequest)
{
	// A direct chain as long as the ring, one page every other page: no two ranges merge.
	const unsigned count = guest.ring(VB_QUEUE_INFLATE).size();
	ASSERT_GT(count, 32u);
	std::vector<ChainBuffer> ranges;
	for (unsigned i = 0; i < count; i++)
		ranges.push_back(range(kPfn + 2 * i, 1));
	EXPECT_EQ(send(VB_QUEUE_INFLATE, ranges), 0u);
	EXPECT_EQ(device.counters().inflate_requests.load(), 1u);
	EXPECT_EQ(device.host_owned_wire_pages(), count);
	for (unsigned i = 0; i < count; i++) {
		EXPECT_TRUE(device.host_owns(kPfn + 2 * i));
		EXPECT_FALSE(device.host_owns(kPfn + 2 * i + 1));
	}
	EXPECT_EQ(memory.resident_bytes(kPfn * kPage, 2 * count * kPage), count * kPage);
	EXPECT_EQ(send(VB_QUEUE_DEFLATE, ranges), 0u);
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
}

TEST_F(BalloonChunked, RangesInAnIndirectTableAreServedAsDirectOnes)
{
	ASSERT_TRUE(guest.features() & VB_FEATURE(VB_F_RING_INDIRECT_DESC));
	// Four ranges: the test driver puts a chain of 2 to 8 descriptors in an indirect table,
	// so the request takes one ring slot.
	DriverRing& ring = guest.ring(VB_QUEUE_INFLATE);
	void* token = guest.post(VB_QUEUE_INFLATE, {range(kPfn, 16), range(kPfn + 32, 16),
						    range(kPfn + 64, 512), range(kPfn + 1024, 1)});
	EXPECT_GE(ring.num_free(), ring.size() - 1u);
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_INFLATE, token));
	EXPECT_EQ(device.host_owned_wire_pages(), 16u + 16 + 512 + 1);
	EXPECT_EQ(host_owned_in(kPfn + 64, 512), 512u);
	EXPECT_EQ(memory.resident_bytes((kPfn + 64) * kPage, 512 * kPage), 0u);
}

TEST_F(BalloonChunked, PagesComeBackInAnyGroupingTheDriverNames)
{
	// One 2 MiB inflate, then two 16 KiB inflates next to each other.
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn, 512)}), 0u);
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn + 1024, 4)}), 0u);
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn + 1028, 4)}), 0u);
	ASSERT_EQ(device.host_owned_wire_pages(), 520u);

	// Pieces of the big one, in another order and size than it went in.
	EXPECT_EQ(send(VB_QUEUE_DEFLATE, {range(kPfn + 300, 12), range(kPfn + 1, 2)}), 0u);
	EXPECT_EQ(host_owned_in(kPfn, 512), 512u - 14);
	EXPECT_FALSE(device.host_owns(kPfn + 1));
	EXPECT_FALSE(device.host_owns(kPfn + 2));
	EXPECT_TRUE(device.host_owns(kPfn + 3));
	EXPECT_FALSE(device.host_owns(kPfn + 311));
	EXPECT_TRUE(device.host_owns(kPfn + 312));
	// The two small ones in one range.
	EXPECT_EQ(send(VB_QUEUE_DEFLATE, {range(kPfn + 1024, 8)}), 0u);
	EXPECT_EQ(host_owned_in(kPfn + 1024, 8), 0u);
	// The rest of the big one, a page at a time for part of it.
	std::vector<ChainBuffer> rest = {range(kPfn, 1), range(kPfn + 3, 297),
					 range(kPfn + 312, 200)};
	EXPECT_EQ(send(VB_QUEUE_DEFLATE, rest), 0u);
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 520u);
	EXPECT_EQ(rejected(BalloonRejection::kPfnNotHostOwned), 0u);
}

TEST_F(BalloonChunked, AResetGivesEveryRangedPageBack)
{
	EXPECT_EQ(send(VB_QUEUE_INFLATE, {range(kPfn, 512), range(kPfn + 1024, 7)}), 0u);
	ASSERT_EQ(device.host_owned_wire_pages(), 519u);
	device.transport().set_status(0);
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
	EXPECT_EQ(device.counters().wire_pages_released_by_reset.load(), 519u);
	// After a fresh start the same ranges go in again as new pages, not as repeats.
	TestGuest again(memory, device.transport());
	again.start();
	ASSERT_TRUE(
		again.wait_for(VB_QUEUE_INFLATE, again.post(VB_QUEUE_INFLATE, {range(kPfn, 512)})));
	EXPECT_EQ(device.host_owned_wire_pages(), 512u);
	EXPECT_EQ(rejected(BalloonRejection::kPfnAlreadyHostOwned), 0u);
}

// Bit 20 lies inside the 32 feature bits of legacy negotiation: a transitional device may
// offer it to a legacy driver, and the ranges mean the same there.
TEST(BalloonChunkedLegacy, ALegacyDriverMayNegotiateRangesAndUseThem)
{
	GuestMemory memory({.size_bytes = kRamBytes});
	BalloonDeviceOptions options;
	options.profile = chunked_profile();
	options.legacy = {.transitional = true, .guest_big_endian = false};
	BalloonDevice device(memory, std::move(options));
	TestGuest guest(memory, device.transport());
	const uint64_t features = guest.start_legacy();
	ASSERT_FALSE(features & VB_FEATURE(VB_F_VERSION_1));
	ASSERT_TRUE(features & VB_FEATURE(VB_F_X_CHUNKED));
	ASSERT_EQ(memory.populate(0, kRamBytes), 0);
	ASSERT_TRUE(
		guest.wait_for(VB_QUEUE_INFLATE, guest.post(VB_QUEUE_INFLATE, {range(kPfn, 512)})));
	EXPECT_EQ(device.host_owned_wire_pages(), 512u);
	EXPECT_EQ(memory.resident_bytes(kPfn * kPage, 512 * kPage), 0u);
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_DEFLATE,
				   guest.post(VB_QUEUE_DEFLATE, {range(kPfn + 8, 504)})));
	EXPECT_EQ(device.host_owned_wire_pages(), 8u);
}

} // namespace
} // namespace vbsim
