// SPDX-License-Identifier: GPL-2.0
//
// A hostile or broken driver against the whole balloon device (transport, device thread,
// queues, payload parsing): every bad input is refused with its own counter, the chain
// still comes back (nothing leaks), the device keeps working, and it writes nothing in
// guest RAM outside the rings.
#include <gtest/gtest.h>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/ram_snapshot.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using test::RamSnapshot;
using test::TestGuest;

constexpr uint64_t kRamBytes = 16ull << 20;
constexpr uint32_t kRamPfns = kRamBytes / GuestMemory::kWirePageBytes;
constexpr uint32_t kPfn = TestGuest::kFirstFreePfn;

class BalloonHostile : public ::testing::Test
{
protected:
	explicit BalloonHostile(BalloonProfile profile = full_profile())
	    : device(memory, {.profile = profile}), guest(memory, device.transport())
	{
		guest.start();
		EXPECT_EQ(memory.populate(0, kRamBytes), 0);
	}

	// Posts raw bytes as one inflate request and waits for it to come back.
	bool send_bytes(vb_queue_kind kind, const std::vector<uint8_t>& bytes)
	{
		const uint64_t gpa = guest.write_buffer(bytes.data(), bytes.size());
		return guest.wait_for(
			kind, guest.post(kind, {{gpa, static_cast<uint32_t>(bytes.size())}}));
	}
	uint64_t rejected(BalloonRejection reason) const
	{
		return device.counters().rejected_by(reason);
	}
	// Nothing was discarded or taken by the host.
	void expect_nothing_ballooned()
	{
		EXPECT_EQ(device.counters().wire_pages_discarded.load(), 0u);
		EXPECT_EQ(device.counters().discard_calls.load(), 0u);
		EXPECT_EQ(device.host_owned_wire_pages(), 0u);
		EXPECT_EQ(memory.resident_bytes(0, kRamBytes), kRamBytes);
	}
	void expect_still_working()
	{
		ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {kPfn + 1000}));
		EXPECT_TRUE(device.host_owns(kPfn + 1000));
	}

	GuestMemory memory{{.size_bytes = kRamBytes}};
	BalloonDevice device;
	TestGuest guest;
};

TEST_F(BalloonHostile, PfnArrayNotAMultipleOfFourIsRefusedWhole)
{
	// Two and a half PFNs: which ones the driver meant is a guess, so none is taken.
	ASSERT_TRUE(send_bytes(VB_QUEUE_INFLATE, {0, 4, 0, 0, 1, 4, 0, 0, 2, 4}));
	ASSERT_TRUE(send_bytes(VB_QUEUE_DEFLATE, {0, 4, 0}));
	EXPECT_EQ(rejected(BalloonRejection::kPfnArrayNotMultipleOf4), 2u);
	expect_nothing_ballooned();
	expect_still_working();
}

TEST_F(BalloonHostile, PfnsBeyondRamAreRefusedOneByOne)
{
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE,
				    {kPfn, kRamPfns, 0xffffffffu, kPfn + 1, kRamPfns - 1}));
	EXPECT_EQ(rejected(BalloonRejection::kPfnOutsideRam), 2u);
	EXPECT_EQ(device.counters().wire_pages_inflated.load(), 3u);
	EXPECT_EQ(device.counters().wire_pages_discarded.load(), 3u);
	EXPECT_TRUE(device.host_owns(kRamPfns - 1));
	EXPECT_FALSE(device.host_owns(kRamPfns));
	// Deflating them is refused the same way.
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_DEFLATE, {kRamPfns + 5, kPfn}));
	EXPECT_EQ(rejected(BalloonRejection::kPfnOutsideRam), 3u);
	EXPECT_FALSE(device.host_owns(kPfn));
}

TEST_F(BalloonHostile, OversizedRequestsAreRefusedWhole)
{
	// 64 KiB + 4 bytes: one PFN over the bound for this profile.
	const std::vector<uint32_t> pfns(kUncappedHostPfnBytesBound / 4 + 1, kPfn);
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, pfns));
	EXPECT_EQ(rejected(BalloonRejection::kPfnArrayTooLarge), 1u);
	expect_nothing_ballooned();
	expect_still_working();
}

TEST_F(BalloonHostile, WritableBuffersAndEmptyRequestsAreRefused)
{
	const uint64_t gpa = guest.alloc(64);
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_INFLATE,
				   guest.post(VB_QUEUE_INFLATE, {{gpa, 8}}, {{gpa + 8, 8}})));
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_INFLATE, guest.post(VB_QUEUE_INFLATE, {{gpa, 0}})));
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_DEFLATE, guest.post(VB_QUEUE_DEFLATE, {}, {{gpa, 8}})));
	EXPECT_EQ(rejected(BalloonRejection::kWritableBuffer), 2u);
	EXPECT_EQ(rejected(BalloonRejection::kEmptyRequest), 1u);
	expect_nothing_ballooned();
}

TEST_F(BalloonHostile, APfnSplitAcrossDescriptorsIsStillOnePfn)
{
	// The array is le32 entries whatever the descriptor boundaries: 8 bytes in 3 + 5.
	const uint32_t wire[2] = {to_le(kPfn + 7), to_le(kPfn + 9)};
	const uint64_t gpa = guest.write_buffer(wire, sizeof(wire));
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_INFLATE,
				   guest.post(VB_QUEUE_INFLATE, {{gpa, 3}, {gpa + 3, 5}})));
	EXPECT_TRUE(device.host_owns(kPfn + 7));
	EXPECT_TRUE(device.host_owns(kPfn + 9));
	EXPECT_EQ(device.counters().wire_pages_inflated.load(), 2u);
}

TEST_F(BalloonHostile, DoubleInflateAndStrayDeflateAreCountedAndHarmless)
{
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {kPfn, kPfn}));
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {kPfn}));
	EXPECT_EQ(rejected(BalloonRejection::kPfnAlreadyHostOwned), 2u);
	EXPECT_EQ(device.counters().wire_pages_inflated.load(), 1u);
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_DEFLATE, {kPfn, kPfn + 1}));
	EXPECT_EQ(rejected(BalloonRejection::kPfnNotHostOwned), 1u);
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 1u);
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
}

TEST_F(BalloonHostile, RingCorruptionOnTheInflateQueueIsRefusedAndReturned)
{
	DriverRing& ring = guest.ring(VB_QUEUE_INFLATE);
	// A descriptor that points past RAM, and one whose address + length wraps.
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_INFLATE,
				   guest.post(VB_QUEUE_INFLATE, {{kRamBytes - 4, 8}})));
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_INFLATE,
				   guest.post(VB_QUEUE_INFLATE, {{~uint64_t{0} - 0xfff, 0x2000}})));
	EXPECT_EQ(device.ring_rejections(VB_QUEUE_INFLATE, RingRejection::kBufferOutsideRam), 2u);
	EXPECT_EQ(ring.num_free(), ring.size()); // both chains came back
	expect_nothing_ballooned();
	expect_still_working();
}

TEST_F(BalloonHostile, NothingButUsedRingsIsWrittenWhateverTheInput)
{
	// A batch of every payload-level refusal at once, then check all of RAM.
	const std::vector<uint8_t> odd{1, 2, 3, 4, 5, 6};
	const uint64_t odd_gpa = guest.write_buffer(odd.data(), odd.size());
	const uint32_t outside[2] = {to_le(kRamPfns), to_le(0xfffffff0u)};
	const uint64_t outside_gpa = guest.write_buffer(outside, sizeof(outside));
	const uint64_t scratch = guest.alloc(16);
	const RamSnapshot before(memory);
	std::vector<void*> tokens;
	tokens.push_back(guest.post(VB_QUEUE_INFLATE, {{odd_gpa, 6}}));
	tokens.push_back(guest.post(VB_QUEUE_INFLATE, {{outside_gpa, 8}}));
	tokens.push_back(guest.post(VB_QUEUE_INFLATE, {{scratch, 8}}, {{scratch + 8, 8}}));
	tokens.push_back(guest.post(VB_QUEUE_DEFLATE, {{outside_gpa, 8}}));
	tokens.push_back(guest.post(VB_QUEUE_INFLATE, {{kRamBytes, 4}}));
	for (size_t i = 0; i < tokens.size(); ++i)
		ASSERT_TRUE(guest.wait_for(i == 3 ? VB_QUEUE_DEFLATE : VB_QUEUE_INFLATE, tokens[i]))
			<< i;
	// Descriptor-level precision is hostile_ring_test's; here: nothing outside the rings.
	EXPECT_TRUE(before.unchanged_except(memory, guest.ring_areas()));
	expect_nothing_ballooned();
}

class BalloonHostileFirecracker : public BalloonHostile
{
protected:
	BalloonHostileFirecracker() : BalloonHostile(firecracker_profile()) {}
};

TEST_F(BalloonHostileFirecracker, MoreThan256PfnsAreRefusedAsFirecrackerDoes)
{
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, TestGuest::pfn_range(kPfn, 257)));
	EXPECT_EQ(rejected(BalloonRejection::kPfnArrayTooLarge), 1u);
	expect_nothing_ballooned();
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, TestGuest::pfn_range(kPfn, 256)));
	EXPECT_EQ(device.host_owned_wire_pages(), 256u);
	EXPECT_EQ(device.counters().requests_over_peer_cap.load(), 0u);
}

TEST_F(BalloonHostile, AnAvailIndexJumpNeedsAResetAndTheDeviceRecovers)
{
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {kPfn}));
	DriverRing& ring = guest.ring(VB_QUEUE_INFLATE);
	const uint64_t avail_idx = ring.layout().avail_idx();
	ASSERT_TRUE(memory.store_le16_release(avail_idx, 1 + 2 * ring.size() + 1));
	device.transport().notify(guest.index(VB_QUEUE_INFLATE));
	ASSERT_EQ(device.transport().wait_for_config_change(test::kHangTimeout), 1u);
	EXPECT_TRUE(device.transport().status() & VB_STATUS_NEEDS_RESET);
	EXPECT_EQ(device.ring_rejections(VB_QUEUE_INFLATE, RingRejection::kAvailIdxJump), 1u);
	// Deflates are refused too now: the whole device stopped.
	guest.post(VB_QUEUE_DEFLATE, {{guest.alloc(4), 4}});
	ASSERT_TRUE(device.transport().wait_until(
		[&] { return device.transport().counters().kicks_ignored.load() == 1; },
		test::kHangTimeout));
	// Reset and bind again: the device serves a fresh driver.
	TestGuest again(memory, device.transport());
	again.start();
	EXPECT_EQ(device.host_owned_wire_pages(), 0u);
	ASSERT_TRUE(again.send_pfns(VB_QUEUE_INFLATE, {kPfn + 3}));
	EXPECT_TRUE(device.host_owns(kPfn + 3));
}

} // namespace
} // namespace vbsim
