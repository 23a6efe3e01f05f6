// SPDX-License-Identifier: GPL-2.0
//
// DriverRing <-> DeviceQueue on real guest RAM, the driver on the test thread and the
// device on another, notifying each other through eventfds the way the transport does.
// Enough chains go through that the 16-bit ring indices wrap around, with and without
// EVENT_IDX and indirect descriptors. A missed notification shows up as a hang, which the
// waits turn into a failure.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <thread>
#include <tuple>

#include "memory/guest_memory.h"
#include "transport/event_fd.h"
#include "virtqueue/device_queue.h"
#include "virtqueue/driver_ring.h"

namespace vbsim
{
namespace
{

using namespace std::chrono_literals;

constexpr uint16_t kQueueSize = 16;
constexpr uint64_t kBufferBytes = 64;
constexpr uint32_t kChains = 70000; // > 65536: both rings' indices wrap

// The device: for every chain, sums the readable bytes and writes that sum into the first
// 8 bytes of the writable part, so the driver can check the device saw its data.
class EchoDevice
{
public:
	EchoDevice(GuestMemory& memory, const DeviceQueue::Config& config, EventFd& kick,
		   EventFd& call)
	    : memory_(memory), queue_(memory, config, counters_), kick_(kick), call_(call),
	      thread_([this] { run(); })
	{
	}
	~EchoDevice()
	{
		stop_ = true;
		kick_.signal();
		thread_.join();
	}
	const QueueCounters& counters() const { return counters_; }
	bool failed() const { return failed_; }

private:
	void run()
	{
		DescriptorChain chain;
		while (!stop_) {
			if (kick_.wait(10s) == 0) {
				failed_ = true; // no kick for 10 s: the driver is stuck
				return;
			}
			for (;;) {
				queue_.disable_notifications();
				DeviceQueue::PopStatus status;
				while ((status = queue_.pop(chain)) ==
				       DeviceQueue::PopStatus::kChain)
					serve(chain);
				if (status != DeviceQueue::PopStatus::kEmpty) {
					failed_ = true;
					return;
				}
				if (!queue_.enable_notifications())
					break;
			}
			if (queue_.needs_interrupt())
				call_.signal();
		}
	}

	void serve(const DescriptorChain& chain)
	{
		uint64_t sum = 0;
		for (const ChainBuffer& segment : chain.readable) {
			std::vector<uint8_t> bytes(segment.len);
			if (!memory_.read(segment.phys_addr, bytes.data(), bytes.size()))
				failed_ = true;
			for (uint8_t byte : bytes)
				sum += byte;
		}
		uint32_t written = 0;
		if (!chain.writable.empty() && chain.writable[0].len >= 8) {
			if (!memory_.write_le(chain.writable[0].phys_addr, sum))
				failed_ = true;
			written = 8;
		}
		queue_.push_used(chain.head, written);
	}

	GuestMemory& memory_;
	QueueCounters counters_;
	DeviceQueue queue_;
	EventFd& kick_;
	EventFd& call_;
	std::atomic<bool> stop_{false};
	std::atomic<bool> failed_{false};
	std::thread thread_;
};

class RingRoundTrip : public ::testing::TestWithParam<std::tuple<bool, bool>>
{
};

TEST_P(RingRoundTrip, EveryChainComesBackWithTheDevicesAnswer)
{
	const auto [event_idx, indirect] = GetParam();
	GuestMemory memory({.size_bytes = 4ull << 20});

	DriverRing::Config driver_config;
	driver_config.size = kQueueSize;
	driver_config.areas = contiguous_queue_areas(0, kQueueSize);
	driver_config.event_idx = event_idx;
	driver_config.indirect_desc = indirect;
	driver_config.indirect_area_gpa = 64 * 1024;
	driver_config.indirect_table_entries = 4;
	DriverRing driver(memory, driver_config);

	DeviceQueue::Config device_config{driver_config.areas, kQueueSize, event_idx, indirect};
	EventFd kick;
	EventFd call;
	EchoDevice device(memory, device_config, kick, call);

	// One buffer slot per ring slot: in flight chains never share buffers.
	const uint64_t buffers = 1ull << 20;
	auto buffer_of = [&](uint32_t slot) { return buffers + slot * 2 * kBufferBytes; };

	uint32_t submitted = 0;
	uint32_t completed = 0;
	uint64_t kicks = 0;
	std::vector<uint64_t> expected_sum(kQueueSize);
	std::vector<bool> slot_busy(kQueueSize, false);
	while (completed < kChains) {
		// Fill the ring. Chains vary: 1 to 3 readable segments plus one writable.
		for (uint32_t slot = 0; slot < kQueueSize && submitted < kChains; ++slot) {
			if (slot_busy[slot])
				continue;
			const unsigned readable = 1 + submitted % 3;
			if (driver.num_free() < (indirect ? 1 : readable + 1))
				break;
			ChainBuffer out[3];
			uint64_t sum = 0;
			for (unsigned i = 0; i < readable; ++i) {
				const uint64_t gpa = buffer_of(slot) + i * 16;
				const uint8_t byte = static_cast<uint8_t>(submitted + i);
				ASSERT_TRUE(memory.fill(gpa, byte, 16));
				sum += 16ull * byte;
				out[i] = {gpa, 16};
			}
			const ChainBuffer in{buffer_of(slot) + kBufferBytes, 8};
			ASSERT_TRUE(driver.add(out, readable, &in, 1,
					       reinterpret_cast<void*>(uintptr_t{slot} + 1)));
			slot_busy[slot] = true;
			expected_sum[slot] = sum;
			++submitted;
		}
		if (driver.kick_prepare()) {
			kick.signal();
			++kicks;
		}
		// Collect; sleep on the call eventfd only when nothing is pending.
		bool got_any = false;
		uint32_t len = 0;
		while (void* token = driver.get_used(&len)) {
			const uint32_t slot =
				static_cast<uint32_t>(reinterpret_cast<uintptr_t>(token) - 1);
			ASSERT_LT(slot, kQueueSize);
			ASSERT_TRUE(slot_busy[slot]);
			ASSERT_EQ(len, 8u);
			uint64_t answer = 0;
			ASSERT_TRUE(memory.read_le(buffer_of(slot) + kBufferBytes, &answer));
			ASSERT_EQ(answer, expected_sum[slot]);
			slot_busy[slot] = false;
			++completed;
			got_any = true;
		}
		if (!got_any && driver.enable_interrupts()) {
			ASSERT_NE(call.wait(10s), 0u) << "no interrupt: completed " << completed;
		}
	}
	EXPECT_FALSE(device.failed());
	EXPECT_EQ(device.counters().chains_popped.load(), kChains);
	EXPECT_EQ(device.counters().used_pushed.load(), kChains);
	EXPECT_EQ(device.counters().rejected_total(), 0u);
	EXPECT_EQ(driver.device_errors_total(), 0u);
	EXPECT_EQ(driver.num_free(), kQueueSize);
	EXPECT_LE(kicks, kChains);
}

INSTANTIATE_TEST_SUITE_P(RingFeatures, RingRoundTrip,
			 ::testing::Combine(::testing::Bool(), ::testing::Bool()),
			 [](const auto& info) {
				 return std::string(std::get<0>(info.param) ? "EventIdx"
									    : "Flags") +
					(std::get<1>(info.param) ? "Indirect" : "Direct");
			 });

} // namespace
} // namespace vbsim
