// SPDX-License-Identifier: GPL-2.0
//
// The transport's virtio rules, against a small fake device so that only the transport is
// under test: status ordering, feature negotiation, queue setup checks, the config space,
// notifications both ways, reset, FAILED and NEEDS_RESET.
#include <gtest/gtest.h>

#include <condition_variable>
#include <mutex>

#include "memory/guest_memory.h"
#include "support/raw_ring.h"
#include "support/test_guest.h"
#include "transport/transport.h"

namespace vbsim
{
namespace
{

using namespace std::chrono_literals;
using test::kHangTimeout;
using test::TestGuest;

constexpr uint64_t kOffered =
	VB_FEATURE(VB_F_VERSION_1) | VB_FEATURE(VB_F_RING_EVENT_IDX) | VB_FEATURE(VB_F_STATS_VQ);
constexpr uint16_t kMaxQueueSize = 64;
constexpr uint32_t kConfigBytes = 12;
constexpr uint32_t kWritableOffset = 4;

// Two or three queues (stats), each echoing chains back used; config bytes 4..7 writable.
class FakeDevice final : public DeviceBackend
{
public:
	explicit FakeDevice(GuestMemory& memory)
	    : transport(memory, *this,
			TransportConfig{kOffered, std::vector<uint8_t>(kConfigBytes, 0xab), 3})
	{
		transport.start();
	}
	~FakeDevice() { transport.stop(); }

	bool accept_features(uint64_t) override { return !veto_features; }
	uint16_t queue_max_size(unsigned index, uint64_t features) const override
	{
		return static_cast<int>(index) < vb_queue_count(features) ? kMaxQueueSize : 0;
	}
	bool config_write_allowed(uint32_t offset, uint32_t len, uint64_t, uint8_t) const override
	{
		return offset == kWritableOffset && len == 4;
	}
	void config_written(uint32_t, uint32_t, const uint8_t*) override {}
	void reset() override { ++resets; }
	void activate(uint64_t) override
	{
		++activations;
		transport.set_timer_interval(timer_interval);
	}
	void queue_notified(unsigned index) override
	{
		DeviceQueue* queue = transport.queue(index);
		DescriptorChain chain;
		while (queue->pop(chain) == DeviceQueue::PopStatus::kChain)
			queue->push_used(chain.head, 0);
		transport.signal_used(index);
		bump(notified);
	}
	void timer_expired() override { bump(timer_ticks); }

	bool wait_for(const uint64_t& counter, uint64_t at_least)
	{
		std::unique_lock lock(mutex);
		return changed.wait_for(lock, kHangTimeout, [&] { return counter >= at_least; });
	}

	bool veto_features = false;
	std::chrono::milliseconds timer_interval{0};
	uint64_t resets = 0; // guest thread, under the state lock
	uint64_t activations = 0;
	uint64_t notified = 0;
	uint64_t timer_ticks = 0;
	std::mutex mutex;
	std::condition_variable changed;
	Transport transport;

private:
	void bump(uint64_t& counter)
	{
		{
			std::lock_guard lock(mutex);
			++counter;
		}
		changed.notify_all();
	}
};

class TransportTest : public ::testing::Test
{
protected:
	GuestMemory memory{{.size_bytes = 8ull << 20}};
	FakeDevice device{memory};
	Transport& transport = device.transport;
	TestGuest guest{memory, transport};
	const TransportCounters& counters = transport.counters();
};

constexpr uint8_t kAck = VB_STATUS_ACKNOWLEDGE;
constexpr uint8_t kDriver = VB_STATUS_DRIVER;
constexpr uint8_t kFeaturesOk = VB_STATUS_FEATURES_OK;
constexpr uint8_t kDriverOk = VB_STATUS_DRIVER_OK;

TEST_F(TransportTest, TheNormalHandshakeReachesDriverOk)
{
	EXPECT_EQ(transport.device_features(), kOffered);
	guest.start();
	EXPECT_EQ(transport.status(), kAck | kDriver | kFeaturesOk | kDriverOk);
	EXPECT_EQ(transport.driver_features(), kOffered);
	EXPECT_TRUE(transport.live());
	EXPECT_TRUE(device.wait_for(device.activations, 1));
}

TEST_F(TransportTest, FeaturesOkIsRefusedForFeaturesNotOffered)
{
	transport.set_status(kAck);
	transport.set_status(kAck | kDriver);
	ASSERT_TRUE(transport.set_driver_features(kOffered | VB_FEATURE(VB_F_MUST_TELL_HOST)));
	transport.set_status(kAck | kDriver | kFeaturesOk);
	EXPECT_EQ(transport.status(), kAck | kDriver); // the driver reads back: not accepted
	EXPECT_EQ(counters.features_ok_refused.load(), 1u);
	// Giving up is always allowed.
	transport.set_status(kAck | kDriver | VB_STATUS_FAILED);
	EXPECT_EQ(transport.status(), kAck | kDriver | VB_STATUS_FAILED);
}

TEST_F(TransportTest, FeaturesOkIsRefusedWithoutVersion1)
{
	transport.set_status(kAck);
	transport.set_status(kAck | kDriver);
	ASSERT_TRUE(transport.set_driver_features(VB_FEATURE(VB_F_STATS_VQ)));
	transport.set_status(kAck | kDriver | kFeaturesOk);
	EXPECT_FALSE(transport.status() & kFeaturesOk);
	EXPECT_EQ(counters.features_ok_refused.load(), 1u);
}

TEST_F(TransportTest, FeaturesOkIsRefusedWhenTheDeviceVetoes)
{
	device.veto_features = true;
	EXPECT_THROW(guest.negotiate(), std::runtime_error);
	EXPECT_EQ(counters.features_ok_refused.load(), 1u);
}

TEST_F(TransportTest, DriverFeaturesAreWritableOnlyBetweenDriverAndFeaturesOk)
{
	EXPECT_FALSE(transport.set_driver_features(kOffered)); // before DRIVER
	transport.set_status(kAck);
	transport.set_status(kAck | kDriver);
	EXPECT_TRUE(transport.set_driver_features(VB_FEATURE(VB_F_VERSION_1)));
	transport.set_status(kAck | kDriver | kFeaturesOk);
	EXPECT_FALSE(transport.set_driver_features(kOffered)); // frozen by FEATURES_OK
	EXPECT_EQ(transport.driver_features(), VB_FEATURE(VB_F_VERSION_1));
	EXPECT_EQ(counters.driver_feature_writes_rejected.load(), 2u);
}

TEST_F(TransportTest, OutOfOrderStatusWritesAreIgnoredAndCounted)
{
	transport.set_status(kDriver);
	EXPECT_EQ(transport.status(), 0);
	transport.set_status(kAck);
	transport.set_status(kAck | kDriver | kDriverOk);
	EXPECT_EQ(transport.status(), kAck);
	transport.set_status(kAck | kDriver);
	transport.set_status(kAck); // clearing DRIVER
	EXPECT_EQ(transport.status(), kAck | kDriver);
	transport.set_status(kAck | kDriver | 32);
	EXPECT_EQ(counters.status_rejected(StatusViolation::kDriverWithoutAcknowledge), 1u);
	EXPECT_EQ(counters.status_rejected(StatusViolation::kDriverOkWithoutFeaturesOk), 1u);
	EXPECT_EQ(counters.status_rejected(StatusViolation::kClearsBits), 1u);
	EXPECT_EQ(counters.status_rejected(StatusViolation::kReservedBits), 1u);
	EXPECT_EQ(device.activations, 0u);
}

TEST_F(TransportTest, QueueSetupIsValidated)
{
	const QueueAreas good = contiguous_queue_areas(1ull << 20, 16);
	// Before FEATURES_OK.
	EXPECT_EQ(transport.setup_queue(0, 16, good), QueueSetupError::kWrongPhase);
	guest.negotiate(VB_FEATURE(VB_F_VERSION_1)); // two queues
	EXPECT_EQ(transport.setup_queue(3, 16, good), QueueSetupError::kNoSuchQueue);
	EXPECT_EQ(transport.setup_queue(2, 16, good), QueueSetupError::kNoSuchQueue); // no stats
	EXPECT_EQ(transport.setup_queue(0, 0, good), QueueSetupError::kSizeInvalid);
	EXPECT_EQ(transport.setup_queue(0, 24, good), QueueSetupError::kSizeInvalid);
	EXPECT_EQ(transport.setup_queue(0, 2 * kMaxQueueSize, good),
		  QueueSetupError::kSizeTooLarge);
	QueueAreas misaligned = good;
	misaligned.used_gpa += 2;
	EXPECT_EQ(transport.setup_queue(0, 16, misaligned), QueueSetupError::kMisaligned);
	QueueAreas outside = good;
	outside.avail_gpa = memory.size() - 8;
	EXPECT_EQ(transport.setup_queue(0, 16, outside), QueueSetupError::kOutsideRam);
	outside.avail_gpa = ~uint64_t{0} - 1; // wraps
	EXPECT_EQ(transport.setup_queue(0, 16, outside), QueueSetupError::kOutsideRam);
	QueueAreas used_on_avail = good;
	used_on_avail.used_gpa = good.avail_gpa; // the device's writes would become its input
	EXPECT_EQ(transport.setup_queue(0, 16, used_on_avail), QueueSetupError::kOverlapping);
	QueueAreas used_on_desc = good;
	used_on_desc.used_gpa = good.desc_gpa + 16;
	EXPECT_EQ(transport.setup_queue(0, 16, used_on_desc), QueueSetupError::kOverlapping);
	EXPECT_EQ(transport.setup_queue(0, 16, good), QueueSetupError::kNone);
	guest.driver_ok();
	EXPECT_EQ(transport.setup_queue(1, 16, contiguous_queue_areas(2ull << 20, 16)),
		  QueueSetupError::kWrongPhase); // after DRIVER_OK
	EXPECT_EQ(counters.queue_setup_rejected(QueueSetupError::kWrongPhase), 2u);
	EXPECT_EQ(counters.queue_setup_rejected(QueueSetupError::kNoSuchQueue), 2u);
	EXPECT_EQ(counters.queue_setup_rejected(QueueSetupError::kSizeInvalid), 2u);
	EXPECT_EQ(counters.queue_setup_rejected(QueueSetupError::kSizeTooLarge), 1u);
	EXPECT_EQ(counters.queue_setup_rejected(QueueSetupError::kMisaligned), 1u);
	EXPECT_EQ(counters.queue_setup_rejected(QueueSetupError::kOutsideRam), 2u);
	EXPECT_EQ(counters.queue_setup_rejected(QueueSetupError::kOverlapping), 2u);
}

TEST_F(TransportTest, ConfigReadsAreBoundedAndWritesFiltered)
{
	EXPECT_EQ(transport.config_size(), kConfigBytes);
	EXPECT_EQ(transport.config_read32(8), 0xababababu);
	EXPECT_EQ(transport.config_read32(kConfigBytes), 0u);	  // beyond: zero
	EXPECT_EQ(transport.config_read32(kConfigBytes - 2), 0u); // straddling: zero
	uint8_t byte = 0xff;
	EXPECT_FALSE(transport.config_read(~uint32_t{0}, &byte, 1));
	EXPECT_EQ(byte, 0);
	EXPECT_EQ(counters.config_reads_out_of_range.load(), 3u);

	EXPECT_TRUE(transport.config_write32(kWritableOffset, 0x12345678));
	EXPECT_EQ(transport.config_read32(kWritableOffset), 0x12345678u);
	EXPECT_FALSE(transport.config_write32(0, 1));		     // read-only field
	EXPECT_FALSE(transport.config_write32(kConfigBytes - 2, 1)); // straddles the end
	EXPECT_EQ(transport.config_read32(0), 0xababababu);
	EXPECT_EQ(counters.config_writes_rejected.load(), 2u);
	EXPECT_EQ(transport.config_generation(), 0u); // driver writes are not config changes
}

TEST_F(TransportTest, DeviceConfigChangesBumpTheGenerationAndInterruptOnceLive)
{
	const uint32_t value = 7;
	transport.update_config(0, &value, sizeof(value));
	EXPECT_EQ(transport.config_generation(), 1u);
	EXPECT_EQ(counters.config_interrupts.load(), 0u); // no interrupt before DRIVER_OK
	guest.start();
	transport.update_config(0, &value, sizeof(value));
	EXPECT_EQ(transport.config_generation(), 2u);
	EXPECT_EQ(transport.wait_for_config_change(kHangTimeout), 1u);
	EXPECT_EQ(counters.config_interrupts.load(), 1u);
	EXPECT_THROW(transport.update_config(kConfigBytes, &value, sizeof(value)),
		     std::out_of_range);
}

TEST_F(TransportTest, KicksReachTheDeviceAndInterruptsComeBack)
{
	guest.start(VB_FEATURE(VB_F_VERSION_1));
	const NotificationCounters& inflate = transport.notification_counters(0);
	for (uint64_t i = 1; i <= 5; ++i) {
		ASSERT_TRUE(guest.wait_for(VB_QUEUE_INFLATE,
					   guest.post(VB_QUEUE_INFLATE, {{1ull << 20, 8}})));
		// Let the device finish with this kick before the next request, so each request
		// gets a kick of its own (a busy device may have notifications switched off).
		ASSERT_TRUE(transport.wait_until(
			[&] { return inflate.interrupts_sent.load() == i; }, kHangTimeout));
	}
	EXPECT_EQ(transport.notification_counters(0).kicks_received.load(), 5u);
	EXPECT_EQ(transport.notification_counters(0).interrupts_sent.load(), 5u);
	// Each interrupt is an eventfd write, a system call: its time is counted.
	EXPECT_GT(transport.notification_counters(0).interrupt_ns.load(), 0u);
	EXPECT_EQ(transport.queue_counters(0).chains_popped.load(), 5u);
	EXPECT_EQ(transport.notification_counters(1).kicks_received.load(), 0u);
	EXPECT_EQ(transport.notification_counters(1).interrupt_ns.load(), 0u);
	transport.notify(7);
	EXPECT_EQ(counters.notifications_out_of_range.load(), 1u);
}

TEST_F(TransportTest, BuffersMadeAvailableBeforeDriverOkAreSeenAtActivation)
{
	guest.negotiate(VB_FEATURE(VB_F_VERSION_1));
	guest.setup_queues();
	DriverRing& ring = guest.ring(VB_QUEUE_INFLATE);
	const ChainBuffer out{1ull << 20, 8};
	ASSERT_TRUE(ring.add(&out, 1, nullptr, 0, reinterpret_cast<void*>(1)));
	ring.kick_prepare(); // published, but the notify is not sent: DRIVER_OK is not set yet
	guest.driver_ok();
	EXPECT_TRUE(guest.wait_for(VB_QUEUE_INFLATE, reinterpret_cast<void*>(1)));
}

TEST_F(TransportTest, ResetStopsTheQueuesAndForgetsTheDriver)
{
	guest.start(VB_FEATURE(VB_F_VERSION_1)); // starts with a reset of its own
	ASSERT_TRUE(
		guest.wait_for(VB_QUEUE_INFLATE, guest.post(VB_QUEUE_INFLATE, {{1ull << 20, 8}})));
	const uint64_t resets_before = counters.resets.load();
	transport.set_status(0);
	EXPECT_EQ(transport.status(), 0);
	EXPECT_EQ(transport.driver_features(), 0u);
	EXPECT_EQ(counters.resets.load(), resets_before + 1);
	EXPECT_EQ(device.resets, resets_before + 1);
	EXPECT_EQ(transport.queue(0), nullptr);
	// The old ring is still in guest RAM; a kick for it must not be served.
	DriverRing& ring = guest.ring(VB_QUEUE_INFLATE);
	const ChainBuffer out{1ull << 20, 8};
	ASSERT_TRUE(ring.add(&out, 1, nullptr, 0, reinterpret_cast<void*>(99)));
	ring.kick_prepare();
	transport.notify(0);
	ASSERT_TRUE(transport.wait_until([&] { return counters.kicks_ignored.load() == 1; },
					 kHangTimeout));
	EXPECT_EQ(transport.wait_for_interrupt(0, 0ms), 0u);
	EXPECT_FALSE(ring.has_used());
	// A new driver can bind again from scratch.
	TestGuest again(memory, transport);
	again.start(VB_FEATURE(VB_F_VERSION_1));
	ASSERT_TRUE(
		again.wait_for(VB_QUEUE_INFLATE, again.post(VB_QUEUE_INFLATE, {{1ull << 20, 8}})));
}

TEST_F(TransportTest, FailedStopsProcessing)
{
	guest.start(VB_FEATURE(VB_F_VERSION_1));
	transport.set_status(transport.status() | VB_STATUS_FAILED);
	EXPECT_FALSE(transport.live());
	guest.post(VB_QUEUE_INFLATE, {{1ull << 20, 8}});
	ASSERT_TRUE(transport.wait_until([&] { return counters.kicks_ignored.load() == 1; },
					 kHangTimeout));
	EXPECT_EQ(transport.wait_for_interrupt(0, 0ms), 0u);
	EXPECT_FALSE(guest.ring(VB_QUEUE_INFLATE).has_used());
}

TEST_F(TransportTest, ACorruptRingRaisesNeedsResetWithAConfigInterrupt)
{
	guest.start(VB_FEATURE(VB_F_VERSION_1));
	ASSERT_TRUE(device.wait_for(device.activations, 1));
	DriverRing& ring = guest.ring(VB_QUEUE_INFLATE);
	const ChainBuffer out{1ull << 20, 8};
	ASSERT_TRUE(ring.add(&out, 1, nullptr, 0, reinterpret_cast<void*>(1)));
	ring.kick_prepare();
	// Overwrite the published index: it jumps by more than the queue size.
	uint16_t avail_idx = 0;
	const uint64_t avail_idx_gpa = ring.layout().avail_idx();
	ASSERT_TRUE(memory.load_le16_acquire(avail_idx_gpa, &avail_idx));
	ASSERT_EQ(avail_idx, 1);
	ASSERT_TRUE(memory.store_le16_release(avail_idx_gpa, 1 + 2 * kMaxQueueSize));
	transport.notify(0);
	ASSERT_EQ(transport.wait_for_config_change(kHangTimeout), 1u);
	EXPECT_TRUE(transport.status() & VB_STATUS_NEEDS_RESET);
	EXPECT_FALSE(transport.live());
	EXPECT_EQ(counters.needs_reset_raised.load(), 1u);
	EXPECT_EQ(transport.queue_counters(0).rejected_by(RingRejection::kAvailIdxJump), 1u);
	// The driver cannot clear it by writing status back without the bit...
	transport.set_status(kAck | kDriver | kFeaturesOk | kDriverOk);
	EXPECT_TRUE(transport.status() & VB_STATUS_NEEDS_RESET);
	// ...only a reset does.
	TestGuest again(memory, transport);
	again.start(VB_FEATURE(VB_F_VERSION_1));
	EXPECT_FALSE(transport.status() & VB_STATUS_NEEDS_RESET);
	ASSERT_TRUE(
		again.wait_for(VB_QUEUE_INFLATE, again.post(VB_QUEUE_INFLATE, {{1ull << 20, 8}})));
}

TEST_F(TransportTest, TheTimerDrivesPeriodicWorkOnTheDeviceThread)
{
	device.timer_interval = 1ms;
	guest.start(VB_FEATURE(VB_F_VERSION_1));
	EXPECT_TRUE(device.wait_for(device.timer_ticks, 3));
}

} // namespace
} // namespace vbsim
