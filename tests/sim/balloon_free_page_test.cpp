// SPDX-License-Identifier: GPL-2.0
//
// The device's free_page_vq and reporting_vq, driven byte by byte by the hand-made test
// driver: what the device records for each command id, what it ignores, what it refuses,
// and that reported memory really leaves the host (resident size) unless poison forbids it.
#include <gtest/gtest.h>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/free_page_recorder.h"
#include "support/guest_bytes.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using test::bytes_are;
using test::FreePageRecorder;
using test::TestGuest;
using Event = FreePageRecorder::Event;

constexpr uint64_t kRamBytes = 16ull << 20;
constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
constexpr uint64_t kFreeGpa = TestGuest::kDriverAreaBytes; // above the test driver's rings
constexpr uint64_t kMiB = 1ull << 20;

class FreePageDevice : public ::testing::Test
{
protected:
	explicit FreePageDevice(BalloonProfile profile = full_profile())
	    : device(memory, {.profile = profile}), guest(memory, device.transport())
	{
		device.set_free_page_events(&recorder);
		EXPECT_EQ(memory.populate(0, kRamBytes), 0);
	}

	void start(uint32_t poison_val = 0)
	{
		guest.negotiate();
		guest.setup_queues();
		if (poison_val) {
			ASSERT_TRUE(device.transport().config_write32(VB_CONFIG_POISON_VAL_OFFSET, poison_val));
		}
		guest.driver_ok();
	}

	bool send_id(uint32_t id, uint32_t len = 4)
	{
		uint64_t bytes[2] = {id, id};
		const uint64_t gpa = guest.write_buffer(&bytes, len);
		return guest.wait_for(VB_QUEUE_FREE_PAGE, guest.post(VB_QUEUE_FREE_PAGE, {{gpa, len}}));
	}
	bool send_block(uint64_t gpa, uint32_t len)
	{
		return guest.wait_for(VB_QUEUE_FREE_PAGE, guest.post(VB_QUEUE_FREE_PAGE, {}, {{gpa, len}}));
	}
	bool send_report(const std::vector<ChainBuffer>& ranges,
			 const std::vector<ChainBuffer>& readable = {})
	{
		return guest.wait_for(VB_QUEUE_REPORTING, guest.post(VB_QUEUE_REPORTING, readable, ranges));
	}
	uint64_t rejected(BalloonRejection reason) const { return device.counters().rejected_by(reason); }

	GuestMemory memory{{.size_bytes = kRamBytes}};
	FreePageRecorder recorder;
	BalloonDevice device;
	TestGuest guest;
};

TEST_F(FreePageDevice, ARoundIsRecordedFromItsIdToStopAndThePagesAreLeftAlone)
{
	start();
	ASSERT_TRUE(memory.fill(kFreeGpa, 0x5a, 2 * kMiB));
	const uint32_t id = device.start_hint_round();
	ASSERT_GE(id, VB_CMD_ID_MIN_RUN);
	EXPECT_EQ(device.hint_cmd_id(), id);

	ASSERT_TRUE(send_id(id));
	ASSERT_TRUE(send_block(kFreeGpa, kMiB));
	ASSERT_TRUE(send_block(kFreeGpa + kMiB, kMiB));
	ASSERT_TRUE(send_id(VB_CMD_ID_STOP));

	auto events = recorder.events();
	ASSERT_EQ(events.size(), 4u);
	EXPECT_EQ(events[0].kind, Event::kStarted);
	EXPECT_EQ(events[0].cmd_id, id);
	EXPECT_EQ(events[1].kind, Event::kHinted);
	EXPECT_EQ(events[1].gpa, kFreeGpa);
	EXPECT_EQ(events[1].bytes, kMiB);
	EXPECT_EQ(events[2].gpa, kFreeGpa + kMiB);
	EXPECT_EQ(events[3].kind, Event::kStopped);
	EXPECT_EQ(events[3].cmd_id, id);
	EXPECT_EQ(device.counters().wire_pages_hinted.load(), 2 * kMiB / kPage);
	EXPECT_EQ(device.counters().hint_rounds_started.load(), 1u);
	EXPECT_EQ(device.counters().hint_rounds_stopped.load(), 1u);
	// Hints are recorded, not acted on: the pages keep their bytes and stay resident.
	EXPECT_TRUE(bytes_are(memory, kFreeGpa, 2 * kMiB, 0x5a));
	EXPECT_EQ(memory.resident_bytes(kFreeGpa, 2 * kMiB), 2 * kMiB);
}

TEST_F(FreePageDevice, IdsOnlyGrowAndStopAndDoneAreWrittenForTheDriver)
{
	start();
	uint32_t first = device.start_hint_round();
	uint32_t second = device.start_hint_round();
	EXPECT_GT(second, first) << "an id is never issued twice";
	device.stop_hint_round();
	EXPECT_EQ(device.hint_cmd_id(), VB_CMD_ID_STOP);
	device.finish_hinting();
	EXPECT_EQ(device.hint_cmd_id(), VB_CMD_ID_DONE);
	EXPECT_GT(device.start_hint_round(), second);
	EXPECT_GE(device.transport().counters().config_interrupts.load(), 5u);
}

TEST_F(FreePageDevice, AStaleIdAndBlocksOutsideTheCurrentRoundAreIgnored)
{
	start();
	const uint32_t old_id = device.start_hint_round();
	const uint32_t new_id = device.start_hint_round();
	ASSERT_TRUE(send_id(old_id)); // the driver answers a round the host already replaced
	ASSERT_TRUE(send_block(kFreeGpa, kMiB));
	EXPECT_EQ(device.counters().hint_ids_ignored.load(), 1u);
	EXPECT_EQ(device.counters().wire_pages_hint_ignored.load(), kMiB / kPage);
	EXPECT_EQ(recorder.count(Event::kHinted), 0u);

	ASSERT_TRUE(send_id(new_id));
	ASSERT_TRUE(send_id(new_id)); // the current id twice: the second is ignored
	EXPECT_EQ(device.counters().hint_ids_ignored.load(), 2u);
	ASSERT_TRUE(send_block(kFreeGpa, kMiB));
	EXPECT_EQ(recorder.bytes(Event::kHinted, new_id), kMiB);
	ASSERT_TRUE(send_id(VB_CMD_ID_DONE)); // DONE is the host's word, never the driver's
	EXPECT_EQ(device.counters().hint_ids_ignored.load(), 3u);
}

TEST_F(FreePageDevice, BlocksAfterTheHostSaidStopAreIgnored)
{
	start();
	const uint32_t id = device.start_hint_round();
	ASSERT_TRUE(send_id(id));
	ASSERT_TRUE(send_block(kFreeGpa, kMiB));
	device.stop_hint_round();
	ASSERT_TRUE(send_block(kFreeGpa + kMiB, kMiB));
	ASSERT_TRUE(send_id(VB_CMD_ID_STOP));
	EXPECT_EQ(recorder.bytes(Event::kHinted, id), kMiB);
	EXPECT_EQ(device.counters().wire_pages_hint_ignored.load(), kMiB / kPage);
	EXPECT_EQ(recorder.count(Event::kStopped), 1u);
}

TEST_F(FreePageDevice, MalformedHintsAndRangesOutsideRamAreRefused)
{
	start();
	const uint32_t id = device.start_hint_round();
	ASSERT_TRUE(send_id(id, 8)); // an id buffer is exactly 4 bytes
	EXPECT_EQ(rejected(BalloonRejection::kHintMalformed), 1u);
	ASSERT_TRUE(send_id(id));
	// Past the end of RAM: the ring refuses the chain before the balloon sees it.
	ASSERT_TRUE(send_block(kRamBytes - kPage, 2 * kPage));
	EXPECT_EQ(device.ring_rejections(VB_QUEUE_FREE_PAGE, RingRejection::kBufferOutsideRam), 1u);
	ASSERT_TRUE(send_block(kFreeGpa + 100, kPage)); // not whole pages
	ASSERT_TRUE(send_block(kFreeGpa, kPage));
	EXPECT_EQ(rejected(BalloonRejection::kRangeNotWholePages), 1u);
	EXPECT_EQ(recorder.bytes(Event::kHinted, id), kPage);
	// A chain with both an id and a block is neither: refused whole.
	const uint64_t id_gpa = guest.write_buffer(&id, 4);
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_FREE_PAGE,
				   guest.post(VB_QUEUE_FREE_PAGE, {{id_gpa, 4}}, {{kFreeGpa, kPage}})));
	EXPECT_EQ(rejected(BalloonRejection::kHintMalformed), 2u);
	EXPECT_EQ(recorder.bytes(Event::kHinted, id), kPage);
}

// The driver's hint chains (vb::HintChainPacker): many blocks in one buffer. Each segment
// is checked and hinted on its own, in order; a bad one is refused and counted without
// costing the others, and a chain with a segment outside RAM is refused whole by the ring
// before the device reads any of it.
TEST_F(FreePageDevice, EverySegmentOfAHintChainIsCheckedAndHinted)
{
	start();
	const uint32_t id = device.start_hint_round();
	ASSERT_TRUE(send_id(id));
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_FREE_PAGE, guest.post(VB_QUEUE_FREE_PAGE, {},
								  {{kFreeGpa, 2 * kMiB},
								   {kFreeGpa + 3 * kMiB + 100,
								    static_cast<uint32_t>(kPage)},
								   {kFreeGpa + 4 * kMiB, kMiB}})));
	EXPECT_EQ(rejected(BalloonRejection::kRangeNotWholePages), 1u);
	auto events = recorder.events();
	ASSERT_EQ(events.size(), 3u);
	EXPECT_EQ(events[1].gpa, kFreeGpa);
	EXPECT_EQ(events[1].bytes, 2 * kMiB);
	EXPECT_EQ(events[2].gpa, kFreeGpa + 4 * kMiB);
	EXPECT_EQ(events[2].bytes, kMiB);
	EXPECT_EQ(device.counters().wire_pages_hinted.load(), 3 * kMiB / kPage);

	ASSERT_TRUE(guest.wait_for(
		VB_QUEUE_FREE_PAGE,
		guest.post(VB_QUEUE_FREE_PAGE, {},
			   {{kFreeGpa + 6 * kMiB, kMiB}, {kRamBytes - kPage, 2 * kPage}})));
	EXPECT_EQ(device.ring_rejections(VB_QUEUE_FREE_PAGE, RingRejection::kBufferOutsideRam), 1u);
	EXPECT_EQ(device.counters().wire_pages_hinted.load(), 3 * kMiB / kPage)
		<< "part of a refused chain used";
}

TEST_F(FreePageDevice, AResetEndsTheRoundTheDriverHadStarted)
{
	start();
	const uint32_t id = device.start_hint_round();
	ASSERT_TRUE(send_id(id));
	device.transport().set_status(0);
	auto events = recorder.events();
	ASSERT_FALSE(events.empty());
	EXPECT_EQ(events.back().kind, Event::kStopped);
	EXPECT_EQ(events.back().cmd_id, id);
	EXPECT_EQ(device.hint_cmd_id(), VB_CMD_ID_STOP);
}

TEST_F(FreePageDevice, ReportedRangesAreDiscardedBeforeTheAckAndReadZero)
{
	start();
	ASSERT_TRUE(memory.fill(kFreeGpa, 0x5a, 4 * kMiB));
	ASSERT_TRUE(send_report({{kFreeGpa, static_cast<uint32_t>(2 * kMiB)},
				 {kFreeGpa + 3 * kMiB, static_cast<uint32_t>(kMiB)}}));
	EXPECT_EQ(memory.resident_bytes(kFreeGpa, 2 * kMiB), 0u);
	EXPECT_EQ(memory.resident_bytes(kFreeGpa + 2 * kMiB, kMiB), kMiB) << "only what was reported";
	EXPECT_EQ(memory.resident_bytes(kFreeGpa + 3 * kMiB, kMiB), 0u);
	EXPECT_TRUE(bytes_are(memory, kFreeGpa, 2 * kMiB, 0));
	EXPECT_TRUE(bytes_are(memory, kFreeGpa + 2 * kMiB, kMiB, 0x5a));
	EXPECT_EQ(device.counters().report_requests.load(), 1u);
	EXPECT_EQ(device.counters().wire_pages_reported_discarded.load(), 3 * kMiB / kPage);
	EXPECT_EQ(recorder.bytes(Event::kReported), 3 * kMiB);
}

TEST_F(FreePageDevice, BadReportsAreRefusedAndTheirGoodRangesStillDiscarded)
{
	start();
	ASSERT_TRUE(memory.fill(kFreeGpa, 0x5a, 2 * kMiB));
	// A report the device would have to read from: refused whole, nothing discarded.
	const uint64_t junk = guest.write_buffer("junk", 4);
	ASSERT_TRUE(send_report({{kFreeGpa, static_cast<uint32_t>(kMiB)}}, {{junk, 4}}));
	EXPECT_EQ(rejected(BalloonRejection::kReportMalformed), 1u);
	EXPECT_EQ(memory.resident_bytes(kFreeGpa, kMiB), kMiB);

	// A ballooned page is not free: that range is refused, the others go.
	const uint32_t ballooned = static_cast<uint32_t>((kFreeGpa + kMiB) / kPage);
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {ballooned}));
	ASSERT_TRUE(send_report({{kFreeGpa + kMiB + kPage + 512, static_cast<uint32_t>(kPage)},
				 {ballooned * kPage, static_cast<uint32_t>(kPage)},
				 {kFreeGpa, static_cast<uint32_t>(kMiB)}}));
	EXPECT_EQ(rejected(BalloonRejection::kRangeNotWholePages), 1u);
	EXPECT_EQ(rejected(BalloonRejection::kReportedBalloonPage), 1u);
	EXPECT_EQ(memory.resident_bytes(kFreeGpa, kMiB), 0u);
	EXPECT_EQ(recorder.bytes(Event::kReported), kMiB);
	EXPECT_EQ(memory.resident_bytes(kFreeGpa + kMiB + kPage, 2 * kPage), 2 * kPage)
		<< "nothing outside what was valid";
	// Past the end of RAM: the ring refuses the whole chain, nothing is discarded.
	ASSERT_TRUE(memory.fill(kFreeGpa, 0x5a, kMiB));
	ASSERT_TRUE(send_report({{kFreeGpa, static_cast<uint32_t>(kMiB)},
				 {kRamBytes - kPage, static_cast<uint32_t>(2 * kPage)}}));
	EXPECT_EQ(device.ring_rejections(VB_QUEUE_REPORTING, RingRejection::kBufferOutsideRam), 1u);
	EXPECT_EQ(memory.resident_bytes(kFreeGpa, kMiB), kMiB);
}

TEST_F(FreePageDevice, WithANonZeroPoisonReportedPagesKeepTheirContents)
{
	start(0xaaaaaaaau);
	ASSERT_EQ(device.poison_value(), 0xaaaaaaaau);
	ASSERT_TRUE(memory.fill(kFreeGpa, 0xaa, kMiB));
	ASSERT_TRUE(send_report({{kFreeGpa, static_cast<uint32_t>(kMiB)}}));
	EXPECT_TRUE(bytes_are(memory, kFreeGpa, kMiB, 0xaa)) << "a discarded page would read zero, not poison";
	EXPECT_EQ(device.counters().wire_pages_reported_kept.load(), kMiB / kPage);
	EXPECT_EQ(device.counters().wire_pages_reported_discarded.load(), 0u);
}

class FreePageDeviceCloudHypervisor : public FreePageDevice
{
protected:
	FreePageDeviceCloudHypervisor()
	    : FreePageDevice(cloud_hypervisor_profile(VB_FEATURE(VB_F_PAGE_REPORTING)))
	{
	}
};

TEST_F(FreePageDeviceCloudHypervisor, ReportsWithoutHintingAndStartsNoRound)
{
	start();
	EXPECT_EQ(device.start_hint_round(), 0u) << "this host has no free page hinting";
	EXPECT_EQ(device.queue_index(VB_QUEUE_REPORTING), 2) << "queues are dense";
	ASSERT_TRUE(memory.fill(kFreeGpa, 0x5a, kMiB));
	ASSERT_TRUE(send_report({{kFreeGpa, static_cast<uint32_t>(kMiB)}}));
	EXPECT_EQ(memory.resident_bytes(kFreeGpa, kMiB), 0u);
}

} // namespace
} // namespace vbsim
