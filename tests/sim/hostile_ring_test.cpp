// SPDX-License-Identifier: GPL-2.0
//
// The device end of a virtqueue facing a hostile driver. Each test writes one kind of
// corruption into the ring with RawRing and checks that the device refuses it with the
// right reason, returns what can be returned, keeps serving the queue, and wrote nothing
// in guest RAM but the used ring (a snapshot of all of RAM is compared). Outside RAM, the
// PROT_NONE guards (see GuestMemoryDeathTest) would turn any stray access into a crash.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "memory/guest_memory.h"
#include "support/raw_ring.h"
#include "virtqueue/device_queue.h"

namespace vbsim
{
namespace
{

using test::RawRing;
using PopStatus = DeviceQueue::PopStatus;

constexpr uint16_t kSize = 8;
constexpr uint16_t kNext = VB_VRING_DESC_F_NEXT;
constexpr uint16_t kWrite = VB_VRING_DESC_F_WRITE;
constexpr uint16_t kIndirect = VB_VRING_DESC_F_INDIRECT;
constexpr uint64_t kBuffer = 1ull << 20;
constexpr uint64_t kTable = kBuffer + 64 * 1024;

class HostileDriver : public ::testing::Test
{
protected:
	void make(uint16_t size = kSize, bool indirect = false, bool event_idx = false,
		  uint64_t ram_bytes = 2ull << 20)
	{
		memory = std::make_unique<GuestMemory>(GuestMemoryOptions{.size_bytes = ram_bytes});
		areas = contiguous_queue_areas(0, size);
		raw = std::make_unique<RawRing>(*memory, areas, size);
		queue = std::make_unique<DeviceQueue>(
			*memory, DeviceQueue::Config{areas, size, event_idx, indirect}, counters);
	}
	// From here on the device may write the used ring and nothing else.
	void freeze()
	{
		snapshot.resize(memory->size());
		ASSERT_TRUE(memory->read(0, snapshot.data(), snapshot.size()));
	}
	void expect_only_used_ring_written()
	{
		std::vector<uint8_t> now(memory->size());
		ASSERT_TRUE(memory->read(0, now.data(), now.size()));
		const uint64_t used_begin = areas.used_gpa;
		const uint64_t used_end = used_begin + vb_vring_used_bytes(raw->layout().size());
		auto same = [&](uint64_t begin, uint64_t end) {
			return std::memcmp(now.data() + begin, snapshot.data() + begin,
					   end - begin) == 0;
		};
		if (same(0, used_begin) && same(used_end, now.size()))
			return;
		for (uint64_t gpa = 0; gpa < now.size(); ++gpa)
			if ((gpa < used_begin || gpa >= used_end) && now[gpa] != snapshot[gpa])
				FAIL() << "device wrote guest RAM at " << gpa;
	}
	void expect_rejected_once(RingRejection reason)
	{
		EXPECT_EQ(counters.rejected_by(reason), 1u) << to_string(reason);
		EXPECT_EQ(counters.rejected_total(), 1u);
	}
	// The chain came back used, with length 0.
	void expect_returned(uint16_t head, uint16_t used_index = 0)
	{
		ASSERT_GT(raw->used_idx(), used_index);
		EXPECT_EQ(raw->used(used_index).id, head);
		EXPECT_EQ(raw->used(used_index).len, 0u);
	}
	// The queue still serves a well-formed chain after the bad one.
	void expect_still_serving(uint16_t head = 7)
	{
		raw->set_descriptor(head, kBuffer, 32, 0, 0);
		raw->offer(head);
		ASSERT_EQ(queue->pop(chain), PopStatus::kChain);
		EXPECT_EQ(chain.head, head);
		queue->push_used(head, 0);
	}

	std::unique_ptr<GuestMemory> memory;
	QueueAreas areas;
	std::unique_ptr<RawRing> raw;
	QueueCounters counters;
	std::unique_ptr<DeviceQueue> queue;
	DescriptorChain chain;
	std::vector<uint8_t> snapshot;
};

TEST_F(HostileDriver, WellFormedChainsAreAccepted)
{
	make();
	raw->set_descriptor(0, kBuffer, 100, kNext, 1);
	raw->set_descriptor(1, kBuffer + 100, 28, kNext, 2);
	raw->set_descriptor(2, kBuffer + 200, 64, kWrite, 0);
	raw->offer(0);
	freeze();
	ASSERT_EQ(queue->pop(chain), PopStatus::kChain);
	EXPECT_EQ(chain.head, 0);
	ASSERT_EQ(chain.readable.size(), 2u);
	ASSERT_EQ(chain.writable.size(), 1u);
	EXPECT_EQ(chain.readable_bytes, 128u);
	EXPECT_EQ(chain.writable_bytes, 64u);
	EXPECT_EQ(queue->pop(chain), PopStatus::kEmpty);
	queue->push_used(0, 64);
	EXPECT_EQ(raw->used_idx(), 1);
	EXPECT_EQ(raw->used(0).len, 64u);
	EXPECT_EQ(counters.rejected_total(), 0u);
	expect_only_used_ring_written();
}

TEST_F(HostileDriver, AChainUsingEveryDescriptorIsAccepted)
{
	make();
	for (uint16_t i = 0; i < kSize; ++i)
		raw->set_descriptor(i, kBuffer + i * 8, 8, i + 1 < kSize ? kNext : 0, i + 1);
	raw->offer(0);
	ASSERT_EQ(queue->pop(chain), PopStatus::kChain);
	EXPECT_EQ(chain.readable.size(), kSize);
}

TEST_F(HostileDriver, HeadIndexOutOfRangeIsDroppedNotReturned)
{
	make();
	raw->offer(kSize);
	freeze();
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	expect_rejected_once(RingRejection::kHeadIndexOutOfRange);
	EXPECT_EQ(raw->used_idx(), 0); // no used entry with a meaningless id
	expect_only_used_ring_written();
	expect_still_serving();
}

TEST_F(HostileDriver, HeadOfferedTwiceWhileInFlightIsDropped)
{
	make();
	raw->set_descriptor(0, kBuffer, 16, 0, 0);
	raw->offer(0);
	raw->offer(0);
	freeze();
	ASSERT_EQ(queue->pop(chain), PopStatus::kChain);
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	expect_rejected_once(RingRejection::kHeadAlreadyInFlight);
	queue->push_used(0, 0);
	EXPECT_EQ(raw->used_idx(), 1); // returned once, not twice
	expect_only_used_ring_written();
}

TEST_F(HostileDriver, NextIndexOutOfRangeIsReturnedEmpty)
{
	make();
	raw->set_descriptor(0, kBuffer, 16, kNext, kSize);
	raw->offer(0);
	freeze();
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	expect_rejected_once(RingRejection::kNextIndexOutOfRange);
	expect_returned(0);
	expect_only_used_ring_written();
	expect_still_serving();
}

TEST_F(HostileDriver, LoopsAreDetected)
{
	make();
	raw->set_descriptor(0, kBuffer, 16, kNext, 1);
	raw->set_descriptor(1, kBuffer, 16, kNext, 2);
	raw->set_descriptor(2, kBuffer, 16, kNext, 0); // back to the head
	raw->set_descriptor(3, kBuffer, 16, kNext, 3); // onto itself
	raw->offer(0);
	raw->offer(3);
	freeze();
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	EXPECT_EQ(counters.rejected_by(RingRejection::kDescriptorLoop), 2u);
	EXPECT_EQ(counters.rejected_total(), 2u);
	expect_returned(0, 0);
	expect_returned(3, 1);
	expect_only_used_ring_written();
	expect_still_serving();
}

TEST_F(HostileDriver, BuffersOutsideRamAreRefusedIncludingOverflow)
{
	make();
	const uint64_t ram = memory->size();
	raw->set_descriptor(0, ram - 8, 16, 0, 0); // straddles the end
	raw->set_descriptor(1, ram, 1, 0, 0);	   // just past it
	raw->set_descriptor(2, ~uint64_t{0} - 0xfff, 0x2000, 0,
			    0);				// addr + len wraps to a small number
	raw->set_descriptor(3, 1ull << 40, 4096, 0, 0); // far away
	raw->set_descriptor(4, kBuffer, 16, kNext, 5);	// the second descriptor is bad
	raw->set_descriptor(5, ram - 4096, 8192, kWrite, 0);
	for (uint16_t head : {0, 1, 2, 3, 4})
		raw->offer(head);
	freeze();
	for (int i = 0; i < 5; ++i)
		EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	EXPECT_EQ(counters.rejected_by(RingRejection::kBufferOutsideRam), 5u);
	EXPECT_EQ(counters.rejected_total(), 5u);
	EXPECT_EQ(raw->used_idx(), 5);
	expect_only_used_ring_written();
	expect_still_serving();
}

TEST_F(HostileDriver, ChainsOfMoreThanFourGigabytesAreRefused)
{
	// 2048 descriptors of 8 MiB each (all inside RAM, overlapping) add up to 16 GiB; the
	// spec caps a chain at 2^32 bytes.
	const uint16_t size = 2048;
	const uint64_t ram = 8ull << 20;
	make(size, false, false, ram);
	for (uint16_t i = 0; i < size; ++i)
		raw->set_descriptor(i, 0, static_cast<uint32_t>(ram), i + 1 < size ? kNext : 0,
				    i + 1);
	raw->offer(0);
	freeze();
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	expect_rejected_once(RingRejection::kChainBytesOverflow);
	expect_returned(0);
	expect_only_used_ring_written();
}

TEST_F(HostileDriver, ReadableAfterWritableIsRefused)
{
	make();
	raw->set_descriptor(0, kBuffer, 16, kWrite | kNext, 1);
	raw->set_descriptor(1, kBuffer + 16, 16, 0, 0);
	raw->offer(0);
	freeze();
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	expect_rejected_once(RingRejection::kReadableAfterWritable);
	expect_returned(0);
	expect_only_used_ring_written();
}

TEST_F(HostileDriver, IndirectWithoutNegotiationIsRefused)
{
	make(kSize, false);
	raw->write_descriptor_at(kTable, kBuffer, 16, 0, 0);
	raw->set_descriptor(0, kTable, 16, kIndirect, 0);
	raw->offer(0);
	freeze();
	EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	expect_rejected_once(RingRejection::kIndirectNotNegotiated);
	expect_returned(0);
	expect_only_used_ring_written();
}

TEST_F(HostileDriver, IndirectTablesAreAcceptedWhenWellFormed)
{
	make(kSize, true);
	raw->write_descriptor_at(kTable, kBuffer, 40, kNext, 1);
	raw->write_descriptor_at(kTable + 16, kBuffer + 64, 24, kWrite, 0);
	raw->set_descriptor(0, kTable, 32, kIndirect, 0);
	raw->offer(0);
	freeze();
	ASSERT_EQ(queue->pop(chain), PopStatus::kChain);
	EXPECT_EQ(chain.readable_bytes, 40u);
	EXPECT_EQ(chain.writable_bytes, 24u);
	EXPECT_EQ(counters.rejected_total(), 0u);
	expect_only_used_ring_written();
}

TEST_F(HostileDriver, MalformedIndirectTablesAreRefused)
{
	make(kSize, true);
	raw->write_descriptor_at(kTable, kBuffer, 16, 0, 0);
	// 0: INDIRECT together with NEXT.
	raw->set_descriptor(0, kTable, 16, kIndirect | kNext, 1);
	// 1: table length zero; 2: not a multiple of 16.
	raw->set_descriptor(1, kTable, 0, kIndirect, 0);
	raw->set_descriptor(2, kTable, 24, kIndirect, 0);
	// 3: table outside RAM (and wrapping).
	raw->set_descriptor(3, ~uint64_t{0} - 15, 32, kIndirect, 0);
	// 4: a table after a direct descriptor.
	raw->set_descriptor(4, kBuffer, 16, kNext, 5);
	raw->set_descriptor(5, kTable, 16, kIndirect, 0);
	for (uint16_t head : {0, 1, 2, 3, 4})
		raw->offer(head);
	freeze();
	for (int i = 0; i < 5; ++i)
		EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	EXPECT_EQ(counters.rejected_by(RingRejection::kIndirectWithNext), 1u);
	EXPECT_EQ(counters.rejected_by(RingRejection::kIndirectBadLength), 2u);
	EXPECT_EQ(counters.rejected_by(RingRejection::kIndirectTableOutsideRam), 1u);
	EXPECT_EQ(counters.rejected_by(RingRejection::kIndirectNotAtHead), 1u);
	EXPECT_EQ(counters.rejected_total(), 5u);
	EXPECT_EQ(raw->used_idx(), 5);
	expect_only_used_ring_written();
	expect_still_serving();
}

TEST_F(HostileDriver, BadLinksInsideIndirectTablesAreRefused)
{
	make(kSize, true);
	const uint64_t nested = kTable;
	const uint64_t out_of_range = kTable + 0x100;
	const uint64_t looping = kTable + 0x200;
	const uint64_t too_long = kTable + 0x400;
	const uint64_t outside = kTable + 0x800;
	raw->write_descriptor_at(nested, kTable, 16, kIndirect, 0);
	raw->write_descriptor_at(out_of_range, kBuffer, 16, kNext, 2); // table has 2 entries
	raw->write_descriptor_at(out_of_range + 16, kBuffer, 16, 0, 0);
	raw->write_descriptor_at(looping, kBuffer, 16, kNext, 1);
	raw->write_descriptor_at(looping + 16, kBuffer, 16, kNext, 0);
	raw->write_descriptor_at(outside, memory->size() - 4, 8, 0, 0);
	raw->set_descriptor(0, nested, 16, kIndirect, 0);
	raw->set_descriptor(1, out_of_range, 32, kIndirect, 0);
	raw->set_descriptor(2, looping, 32, kIndirect, 0);
	raw->set_descriptor(3, too_long, 16 * (kSize + 1), kIndirect, 0); // longer than the queue
	raw->set_descriptor(4, outside, 16, kIndirect, 0);
	for (uint16_t head : {0, 1, 2, 3, 4})
		raw->offer(head);
	freeze();
	for (int i = 0; i < 5; ++i)
		EXPECT_EQ(queue->pop(chain), PopStatus::kRejected);
	EXPECT_EQ(counters.rejected_by(RingRejection::kIndirectNested), 1u);
	EXPECT_EQ(counters.rejected_by(RingRejection::kNextIndexOutOfRange), 1u);
	EXPECT_EQ(counters.rejected_by(RingRejection::kDescriptorLoop), 1u);
	EXPECT_EQ(counters.rejected_by(RingRejection::kChainTooLong), 1u);
	EXPECT_EQ(counters.rejected_by(RingRejection::kBufferOutsideRam), 1u);
	EXPECT_EQ(counters.rejected_total(), 5u);
	expect_only_used_ring_written();
	expect_still_serving();
}

TEST_F(HostileDriver, AFullRingIsFineButAnAvailIndexJumpBreaksTheQueue)
{
	make();
	for (uint16_t i = 0; i < kSize; ++i) {
		raw->set_descriptor(i, kBuffer, 16, 0, 0);
		raw->offer(i);
	}
	for (uint16_t i = 0; i < kSize; ++i) {
		ASSERT_EQ(queue->pop(chain), PopStatus::kChain);
		queue->push_used(chain.head, 0);
	}
	EXPECT_EQ(counters.rejected_total(), 0u);

	raw->set_avail_idx(static_cast<uint16_t>(raw->avail_idx() + kSize + 1));
	freeze();
	EXPECT_EQ(queue->pop(chain), PopStatus::kBroken);
	EXPECT_TRUE(queue->broken());
	expect_rejected_once(RingRejection::kAvailIdxJump);
	EXPECT_EQ(queue->pop(chain), PopStatus::kBroken); // and stays so, counted once
	EXPECT_EQ(counters.rejected_total(), 1u);
	EXPECT_FALSE(queue->enable_notifications());
	EXPECT_EQ(raw->used_idx(), kSize);
	expect_only_used_ring_written();
}

TEST_F(HostileDriver, DriverRewritingADescriptorAfterItWasReadChangesNothing)
{
	// The device copies each descriptor once: what it validated is what it hands on.
	make();
	raw->set_descriptor(0, kBuffer, 16, 0, 0);
	raw->offer(0);
	ASSERT_EQ(queue->pop(chain), PopStatus::kChain);
	raw->set_descriptor(0, ~uint64_t{0}, 0xffffffff, 0, 0);
	ASSERT_EQ(chain.readable.size(), 1u);
	EXPECT_EQ(chain.readable[0].phys_addr, kBuffer);
	EXPECT_EQ(chain.readable[0].len, 16u);
}

} // namespace
} // namespace vbsim
