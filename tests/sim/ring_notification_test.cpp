// SPDX-License-Identifier: GPL-2.0
//
// Notification suppression on both ends, step by step on one thread so every decision is
// deterministic; and the driver end's checks of what a (hostile) device writes back.
#include <gtest/gtest.h>

#include "memory/guest_memory.h"
#include "support/raw_ring.h"
#include "virtqueue/device_queue.h"
#include "virtqueue/driver_ring.h"

namespace vbsim
{
namespace
{

constexpr uint16_t kSize = 8;
constexpr uint64_t kBuffer = 1ull << 20;

class RingPair : public ::testing::Test
{
protected:
	void make(bool event_idx)
	{
		DriverRing::Config config;
		config.size = kSize;
		config.areas = contiguous_queue_areas(0, kSize);
		config.event_idx = event_idx;
		driver = std::make_unique<DriverRing>(memory, config);
		device = std::make_unique<DeviceQueue>(
			memory, DeviceQueue::Config{config.areas, kSize, event_idx, false},
			counters);
	}
	void add_one()
	{
		const ChainBuffer out{kBuffer, 16};
		ASSERT_TRUE(driver->add(&out, 1, nullptr, 0, reinterpret_cast<void*>(++tokens)));
	}
	uint16_t pop_all()
	{
		uint16_t popped = 0;
		while (device->pop(chain) == DeviceQueue::PopStatus::kChain) {
			heads.push_back(chain.head);
			++popped;
		}
		return popped;
	}
	void push_all()
	{
		for (uint16_t head : heads)
			device->push_used(head, 0);
		heads.clear();
	}

	GuestMemory memory{{.size_bytes = 2ull << 20}};
	QueueCounters counters;
	std::unique_ptr<DriverRing> driver;
	std::unique_ptr<DeviceQueue> device;
	DescriptorChain chain;
	std::vector<uint16_t> heads;
	uintptr_t tokens = 0;
};

TEST_F(RingPair, EventIdxKicksOnlyWhenTheDeviceAsked)
{
	make(true);
	add_one();
	EXPECT_TRUE(driver->kick_prepare()); // avail_event starts at 0: the first entry is wanted
	EXPECT_EQ(pop_all(), 1);	     // the device now waits for entry 1
	add_one();
	EXPECT_TRUE(driver->kick_prepare()); // entry 1 published: kick
	add_one();
	add_one();
	EXPECT_FALSE(driver->kick_prepare()); // entries 2, 3: the device has not caught up to ask
	EXPECT_FALSE(driver->kick_prepare()); // nothing new: never a kick
	EXPECT_EQ(pop_all(), 3);
	EXPECT_FALSE(device->enable_notifications()); // nothing raced in
	add_one();
	EXPECT_TRUE(driver->kick_prepare());
}

TEST_F(RingPair, EventIdxInterruptsOnlyWhenTheDriverAsked)
{
	make(true);
	for (int i = 0; i < 3; ++i)
		add_one();
	driver->kick_prepare();
	ASSERT_EQ(pop_all(), 3);
	push_all();
	EXPECT_TRUE(device->needs_interrupt()); // used_event 0 crossed
	uint32_t len = 0;
	EXPECT_NE(driver->get_used(&len), nullptr); // used_event -> 1
	// The driver consumed one of three; the device has pushed nothing new: no interrupt.
	EXPECT_FALSE(device->needs_interrupt());

	driver->disable_interrupts(); // stop moving used_event
	EXPECT_NE(driver->get_used(&len), nullptr);
	EXPECT_NE(driver->get_used(&len), nullptr);
	add_one();
	driver->kick_prepare();
	ASSERT_EQ(pop_all(), 1);
	push_all(); // used idx 3 -> 4; used_event still 1: not crossed
	EXPECT_FALSE(device->needs_interrupt());
	EXPECT_EQ(counters.interrupts_suppressed.load(), 1u);
	EXPECT_FALSE(driver->enable_interrupts()); // an entry is already waiting
}

TEST_F(RingPair, FlagsSuppressKicksAndInterruptsWithoutEventIdx)
{
	make(false);
	add_one();
	device->disable_notifications(); // VRING_USED_F_NO_NOTIFY
	EXPECT_FALSE(driver->kick_prepare());
	EXPECT_TRUE(device->enable_notifications()); // the entry that came in meanwhile is seen
	EXPECT_EQ(pop_all(), 1);
	add_one();
	EXPECT_TRUE(driver->kick_prepare());

	driver->disable_interrupts(); // VRING_AVAIL_F_NO_INTERRUPT
	push_all();
	EXPECT_FALSE(device->needs_interrupt());
	EXPECT_FALSE(driver->enable_interrupts()); // pending
	EXPECT_EQ(pop_all(), 1);
	push_all();
	EXPECT_TRUE(device->needs_interrupt());
}

TEST_F(RingPair, DriverRunsOutOfDescriptorsAndGetsThemBack)
{
	make(false);
	const ChainBuffer segments[3] = {{kBuffer, 8}, {kBuffer + 8, 8}, {kBuffer + 16, 8}};
	ASSERT_TRUE(driver->add(segments, 3, nullptr, 0, reinterpret_cast<void*>(1)));
	ASSERT_TRUE(driver->add(segments, 2, segments + 2, 1, reinterpret_cast<void*>(2)));
	EXPECT_EQ(driver->num_free(), 2u);
	EXPECT_FALSE(driver->add(segments, 3, nullptr, 0, reinterpret_cast<void*>(3)));
	EXPECT_FALSE(driver->add(segments, 0, nullptr, 0, reinterpret_cast<void*>(3))); // empty
	EXPECT_FALSE(driver->add(segments, 1, nullptr, 0, nullptr));			// no token
	EXPECT_EQ(driver->num_free(), 2u);
	driver->kick_prepare();
	ASSERT_EQ(pop_all(), 2);
	EXPECT_EQ(chain.readable.size(), 2u);
	EXPECT_EQ(chain.writable.size(), 1u);
	push_all();
	uint32_t len = 0;
	EXPECT_EQ(driver->get_used(&len), reinterpret_cast<void*>(1));
	EXPECT_EQ(driver->get_used(&len), reinterpret_cast<void*>(2));
	EXPECT_EQ(driver->num_free(), kSize);
}

// The driver end facing a device that lies: each lie is counted, nothing crashes, and
// buffers are never handed out twice.
class HostileDevice : public ::testing::Test
{
protected:
	HostileDevice()
	{
		DriverRing::Config config;
		config.size = kSize;
		config.areas = contiguous_queue_areas(0, kSize);
		driver = std::make_unique<DriverRing>(memory, config);
		layout = std::make_unique<RingLayout>(config.areas, kSize);
		const ChainBuffer out{kBuffer, 16};
		const ChainBuffer in{kBuffer + 16, 16};
		// Two chains of two descriptors: heads 0 and 2.
		EXPECT_TRUE(driver->add(&out, 1, &in, 1, reinterpret_cast<void*>(0x100)));
		EXPECT_TRUE(driver->add(&out, 1, &in, 1, reinterpret_cast<void*>(0x200)));
		driver->kick_prepare();
	}
	void device_writes_used(uint16_t ring_idx, uint32_t id, uint32_t len, uint16_t new_used_idx)
	{
		ASSERT_TRUE(memory.write_le(layout->used_slot(ring_idx), id));
		ASSERT_TRUE(memory.write_le(layout->used_slot(ring_idx) + 4, len));
		ASSERT_TRUE(memory.store_le16_release(layout->used_idx(), new_used_idx));
	}

	GuestMemory memory{{.size_bytes = 2ull << 20}};
	std::unique_ptr<DriverRing> driver;
	std::unique_ptr<RingLayout> layout;
};

TEST_F(HostileDevice, UsedIdOutOfRangeIsCountedAndSkipped)
{
	device_writes_used(0, kSize + 3, 0, 1);
	uint32_t len = 0;
	EXPECT_EQ(driver->get_used(&len), nullptr);
	EXPECT_EQ(driver->device_errors(DriverRingError::kUsedIdOutOfRange), 1u);
	EXPECT_EQ(driver->num_free(), kSize - 4u); // the real chains are still outstanding
}

TEST_F(HostileDevice, UsedIdNotInFlightIsCountedAndSkipped)
{
	device_writes_used(0, 1, 0, 1); // descriptor 1 is inside a chain, not a head
	uint32_t len = 0;
	EXPECT_EQ(driver->get_used(&len), nullptr);
	EXPECT_EQ(driver->device_errors(DriverRingError::kUsedIdNotInFlight), 1u);
	// Returning the real chain afterwards still works, once.
	device_writes_used(1, 0, 4, 2);
	EXPECT_EQ(driver->get_used(&len), reinterpret_cast<void*>(0x100));
	EXPECT_EQ(len, 4u);
	device_writes_used(2, 0, 4, 3); // the same id again
	EXPECT_EQ(driver->get_used(&len), nullptr);
	EXPECT_EQ(driver->device_errors(DriverRingError::kUsedIdNotInFlight), 2u);
	EXPECT_EQ(driver->num_free(), kSize - 2u); // only the second chain still out
	EXPECT_FALSE(driver->broken());
}

TEST_F(HostileDevice, UsedLengthIsClampedToTheWritableBytes)
{
	device_writes_used(0, 0, 4096, 1);
	uint32_t len = 0;
	EXPECT_EQ(driver->get_used(&len), reinterpret_cast<void*>(0x100)); // not lost
	EXPECT_EQ(len, 16u);
	EXPECT_EQ(driver->device_errors(DriverRingError::kUsedLenTooLarge), 1u);
}

TEST_F(HostileDevice, UsedIndexRunningAheadBreaksTheRing)
{
	device_writes_used(0, 0, 0, 5); // five entries for two chains in flight
	uint32_t len = 0;
	EXPECT_EQ(driver->get_used(&len), nullptr);
	EXPECT_TRUE(driver->broken());
	EXPECT_EQ(driver->device_errors(DriverRingError::kUsedIdxJump), 1u);
	const ChainBuffer out{kBuffer, 16};
	EXPECT_FALSE(driver->add(&out, 1, nullptr, 0, reinterpret_cast<void*>(1)));
	// After a reset the driver gets its outstanding tokens back.
	const std::vector<void*> unused = driver->detach_unused();
	ASSERT_EQ(unused.size(), 2u);
	EXPECT_EQ(unused[0], reinterpret_cast<void*>(0x100));
	EXPECT_EQ(unused[1], reinterpret_cast<void*>(0x200));
	EXPECT_EQ(driver->num_free(), kSize);
}

} // namespace
} // namespace vbsim
