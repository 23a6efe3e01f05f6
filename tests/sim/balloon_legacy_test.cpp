// SPDX-License-Identifier: GPL-2.0
//
// A transitional device facing a legacy driver (no VERSION_1): the balloon's "Legacy
// Interface" rules. The hand-made test driver plays a big-endian guest on this
// little-endian host, so every rule about "guest-native" byte order sees bytes that differ
// from little-endian, and the config space, which stays little-endian, is read as a
// big-endian guest's driver must read it.
#include <gtest/gtest.h>

#include <array>
#include <cstring>
#include <stdexcept>

#include "balloon/balloon_device.h"
#include "memory/guest_byte_order.h"
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
using test::kHangTimeout;
using test::TestGuest;
using Event = FreePageRecorder::Event;

constexpr uint64_t kRamBytes = 16ull << 20;
constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
constexpr uint32_t kPfn = TestGuest::kFirstFreePfn;
constexpr uint64_t kWithoutMustTellHost = ~VB_FEATURE(VB_F_MUST_TELL_HOST);

BalloonDeviceOptions transitional_options(bool guest_big_endian = true)
{
	BalloonDeviceOptions options;
	options.profile = full_profile();
	options.legacy = {.transitional = true, .guest_big_endian = guest_big_endian};
	return options;
}

class LegacyDevice : public ::testing::Test
{
protected:
	explicit LegacyDevice(BalloonDeviceOptions options = transitional_options())
	    : device(memory, std::move(options)), guest(memory, device.transport())
	{
		device.set_free_page_events(&recorder);
	}

	Transport& transport() { return device.transport(); }
	std::array<uint8_t, 4> config_bytes(uint32_t offset)
	{
		std::array<uint8_t, 4> bytes{};
		EXPECT_TRUE(transport().config_read(offset, bytes.data(), bytes.size()));
		return bytes;
	}
	bool write_config_byte(uint32_t offset, uint8_t value)
	{
		return transport().config_write(offset, &value, 1);
	}
	// A big-endian legacy driver's 4-byte command id buffer on free_page_vq.
	bool send_big_endian_id(uint32_t id)
	{
		const uint32_t wire = to_wire(id, ByteOrder::kBig);
		const uint64_t gpa = guest.write_buffer(&wire, sizeof(wire));
		return guest.wait_for(VB_QUEUE_FREE_PAGE,
				      guest.post(VB_QUEUE_FREE_PAGE, {{gpa, sizeof(wire)}}));
	}
	// Legacy init with the statsq primed, as old drivers did, with `entries`.
	void* start_legacy_with_primed_stats(const std::vector<std::pair<uint16_t, uint64_t>>& entries)
	{
		guest.negotiate_legacy();
		guest.setup_queues();
		void* primed = guest.post_stats(entries, ByteOrder::kBig);
		guest.driver_ok();
		return primed;
	}
	// The device has dealt with `count` statsq buffers, read or disregarded.
	bool wait_for_stats_buffers(uint64_t count)
	{
		return transport().wait_until(
			[&] {
				return device.counters().stats_updates.load() +
					       device.counters().stats_buffers_disregarded.load() >=
				       count;
			},
			kHangTimeout);
	}

	GuestMemory memory{{.size_bytes = kRamBytes}};
	FreePageRecorder recorder;
	BalloonDevice device;
	TestGuest guest;
};

class LegacyDeviceRequiringMustTellHost : public LegacyDevice
{
protected:
	static BalloonDeviceOptions options()
	{
		BalloonDeviceOptions options = transitional_options();
		options.require_must_tell_host = true;
		return options;
	}
	LegacyDeviceRequiringMustTellHost() : LegacyDevice(options()) {}
};

// BAL-DEV-LEG-01: the device's policy refuses a modern driver without MUST_TELL_HOST, but a
// legacy driver cannot be refused a feature set, so it is served.
TEST_F(LegacyDeviceRequiringMustTellHost, ALegacyDriverWithoutMustTellHostIsServed)
{
	EXPECT_THROW(guest.negotiate(kWithoutMustTellHost), std::runtime_error);
	EXPECT_EQ(transport().counters().features_ok_refused.load(), 1u);

	const uint64_t features = guest.start_legacy(kWithoutMustTellHost);
	EXPECT_FALSE(features & VB_FEATURE(VB_F_MUST_TELL_HOST));
	EXPECT_FALSE(features & VB_FEATURE(VB_F_VERSION_1));
	EXPECT_TRUE(transport().status() & VB_STATUS_DRIVER_OK);
	EXPECT_FALSE(transport().status() & VB_STATUS_FEATURES_OK);
	EXPECT_EQ(transport().counters().legacy_driver_ok_refused.load(), 0u);

	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, TestGuest::pfn_range(kPfn, 8)));
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_DEFLATE, TestGuest::pfn_range(kPfn, 4)));
	EXPECT_EQ(device.counters().wire_pages_inflated.load(), 8u);
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 4u);
	EXPECT_EQ(device.host_owned_wire_pages(), 4u);
}

// BAL-DEV-LEG-02: without MUST_TELL_HOST the guest may use ballooned pages before it tells
// the host; the device must not lose what it wrote there, neither while serving later
// requests nor when the deflate naming those pages finally arrives.
TEST_F(LegacyDevice, AGuestWithoutMustTellHostKeepsWhatItWroteBeforeTellingTheHost)
{
	guest.start_legacy(kWithoutMustTellHost);
	const uint64_t gpa = uint64_t{kPfn} * kPage;
	ASSERT_TRUE(memory.fill(gpa, 0x11, 8 * kPage));
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, TestGuest::pfn_range(kPfn, 8)));
	ASSERT_EQ(memory.resident_bytes(gpa, 8 * kPage), 0u); // the host took them

	// The guest takes four pages back and uses them, telling the host only later.
	ASSERT_TRUE(memory.fill(gpa, 0x5a, 4 * kPage));
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, TestGuest::pfn_range(kPfn + 100, 8)));
	ASSERT_TRUE(guest.send_pfns(VB_QUEUE_DEFLATE, TestGuest::pfn_range(kPfn, 4)));

	EXPECT_TRUE(bytes_are(memory, gpa, 4 * kPage, 0x5a));
	EXPECT_EQ(memory.resident_bytes(gpa, 4 * kPage), 4 * kPage);
	EXPECT_EQ(device.counters().wire_pages_deflated.load(), 4u);
	EXPECT_EQ(device.counters().rejected_by(BalloonRejection::kPfnNotHostOwned), 0u);
	for (uint32_t pfn = kPfn; pfn < kPfn + 4; ++pfn)
		EXPECT_FALSE(device.host_owns(pfn)) << pfn;
	EXPECT_TRUE(device.host_owns(kPfn + 4));
}

// BAL-DEV-LEG-03: a big-endian legacy guest still finds every config field little-endian.
TEST_F(LegacyDevice, ConfigFieldsStayLittleEndianForABigEndianGuest)
{
	guest.negotiate_legacy();
	guest.setup_queues();
	const std::array<uint8_t, 4> poison = {0xdd, 0xcc, 0xbb, 0xaa}; // 0xaabbccdd
	ASSERT_TRUE(transport().config_write(VB_CONFIG_POISON_VAL_OFFSET, poison.data(), 4));
	guest.driver_ok();
	EXPECT_EQ(device.poison_value(), 0xaabbccddu);

	device.set_target_wire_pages(0x01020304);
	EXPECT_EQ(config_bytes(VB_CONFIG_NUM_PAGES_OFFSET), (std::array<uint8_t, 4>{4, 3, 2, 1}));
	EXPECT_EQ(device.target_wire_pages(), 0x01020304u);

	const std::array<uint8_t, 4> actual = {0x0b, 0x0a, 0, 0}; // 0x0a0b
	ASSERT_TRUE(transport().config_write(VB_CONFIG_ACTUAL_OFFSET, actual.data(), 4));
	EXPECT_EQ(device.actual_wire_pages(), 0x0a0bu);

	const uint32_t id = device.start_hint_round();
	ASSERT_GE(id, VB_CMD_ID_MIN_RUN);
	ASSERT_LT(id, 256u);
	EXPECT_EQ(config_bytes(VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET),
		  (std::array<uint8_t, 4>{static_cast<uint8_t>(id), 0, 0, 0}));
	EXPECT_EQ(device.hint_cmd_id(), id);
}

// BAL-DEV-LEG-04: old drivers wrote `actual` byte by byte, least significant first; the
// host takes the value only once the most significant byte is there.
TEST_F(LegacyDevice, ActualIsTakenOnlyOnceItsMostSignificantByteIsWritten)
{
	guest.start_legacy();
	const uint32_t first = 0x11223344;
	for (uint32_t byte = 0; byte < 3; ++byte) {
		ASSERT_TRUE(write_config_byte(VB_CONFIG_ACTUAL_OFFSET + byte,
					      static_cast<uint8_t>(first >> (8 * byte))));
		EXPECT_EQ(device.actual_wire_pages(), 0u) << "after byte " << byte;
	}
	ASSERT_TRUE(write_config_byte(VB_CONFIG_ACTUAL_OFFSET + 3, first >> 24));
	EXPECT_EQ(device.actual_wire_pages(), first);

	// The same with 16-bit halves: the old value stands until the upper half lands.
	const uint16_t low = to_le<uint16_t>(0x7788), high = to_le<uint16_t>(0x5566);
	ASSERT_TRUE(transport().config_write(VB_CONFIG_ACTUAL_OFFSET, &low, 2));
	EXPECT_EQ(device.actual_wire_pages(), first);
	ASSERT_TRUE(transport().config_write(VB_CONFIG_ACTUAL_OFFSET + 2, &high, 2));
	EXPECT_EQ(device.actual_wire_pages(), 0x55667788u);
	EXPECT_EQ(device.counters().actual_partial_writes.load(), 4u);

	// Byte writes stay confined to `actual`, and misaligned ones are refused.
	EXPECT_FALSE(write_config_byte(VB_CONFIG_NUM_PAGES_OFFSET, 1));
	EXPECT_FALSE(transport().config_write(VB_CONFIG_ACTUAL_OFFSET + 1, &low, 2));
	EXPECT_EQ(device.actual_wire_pages(), 0x55667788u);
}

// BAL-DEV-LEG-05: stats entries of a big-endian legacy guest are read in its byte order.
TEST_F(LegacyDevice, StatsOfABigEndianGuestAreReadInItsByteOrder)
{
	void* primed = start_legacy_with_primed_stats({{VB_S_MEMFREE, 1}});
	ASSERT_TRUE(wait_for_stats_buffers(1));
	device.request_stats();
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_STATS, primed));

	guest.post_stats({{VB_S_MEMFREE, 0x0102030405060708},
			  {VB_S_MEMTOT, kRamBytes},
			  {VB_S_SWAP_IN, 3}},
			 ByteOrder::kBig);
	ASSERT_TRUE(wait_for_stats_buffers(2));
	const GuestStats stats = device.last_stats();
	EXPECT_EQ(stats.value(VB_S_MEMFREE), 0x0102030405060708u);
	EXPECT_EQ(stats.value(VB_S_MEMTOT), kRamBytes);
	EXPECT_EQ(stats.value(VB_S_SWAP_IN), 3u);
	EXPECT_EQ(stats.present_mask, (1u << VB_S_MEMFREE) | (1u << VB_S_MEMTOT) | (1u << VB_S_SWAP_IN));
	EXPECT_EQ(device.counters().stats_unknown_tags.load(), 0u);
}

// BAL-DEV-LEG-06: the first buffer after initialisation is held, not read; the refill is.
// After a reset the next driver's first buffer is disregarded again.
TEST_F(LegacyDevice, TheFirstStatsBufferAfterInitialisationIsDisregarded)
{
	void* primed = start_legacy_with_primed_stats({{VB_S_MEMFREE, 0xdeadbeef}, {VB_S_MEMTOT, 7}});
	ASSERT_TRUE(wait_for_stats_buffers(1));
	EXPECT_EQ(device.counters().stats_buffers_disregarded.load(), 1u);
	EXPECT_EQ(device.counters().stats_updates.load(), 0u);
	EXPECT_EQ(device.last_stats().update_count, 0u);
	EXPECT_EQ(device.last_stats().present_mask, 0u);

	// It is still the buffer the device returns to ask for stats.
	device.request_stats();
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_STATS, primed));
	guest.post_stats({{VB_S_MEMFREE, 42}}, ByteOrder::kBig);
	ASSERT_TRUE(wait_for_stats_buffers(2));
	EXPECT_EQ(device.last_stats().update_count, 1u);
	EXPECT_EQ(device.last_stats().value(VB_S_MEMFREE), 42u);

	TestGuest again(memory, transport());
	again.negotiate_legacy();
	again.setup_queues();
	again.post_stats({{VB_S_MEMFREE, 0xbad}}, ByteOrder::kBig);
	again.driver_ok();
	ASSERT_TRUE(wait_for_stats_buffers(3));
	EXPECT_EQ(device.counters().stats_buffers_disregarded.load(), 2u);
	EXPECT_EQ(device.last_stats().value(VB_S_MEMFREE), 42u);
}

// BAL-DEV-LEG-07: the command id a big-endian legacy guest echoes is read in its order.
TEST_F(LegacyDevice, HintCommandIdsOfABigEndianGuestAreReadInItsByteOrder)
{
	guest.start_legacy();
	ASSERT_EQ(memory.populate(0, kRamBytes), 0);
	const uint32_t id = device.start_hint_round();
	ASSERT_GE(id, VB_CMD_ID_MIN_RUN);
	// The driver reads the id from config as little-endian (LEG-03) and echoes it in its
	// own order.
	const uint32_t seen = transport().config_read32(VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET);
	ASSERT_EQ(seen, id);
	ASSERT_NE(to_wire(seen, ByteOrder::kBig), seen);

	const uint64_t block = TestGuest::kDriverAreaBytes;
	ASSERT_TRUE(send_big_endian_id(seen));
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_FREE_PAGE,
				   guest.post(VB_QUEUE_FREE_PAGE, {}, {{block, 1 << 20}})));
	ASSERT_TRUE(send_big_endian_id(VB_CMD_ID_STOP));

	const auto events = recorder.events();
	ASSERT_EQ(events.size(), 3u);
	EXPECT_EQ(events[0].kind, Event::kStarted);
	EXPECT_EQ(events[0].cmd_id, id);
	EXPECT_EQ(events[1].kind, Event::kHinted);
	EXPECT_EQ(events[1].bytes, 1u << 20);
	EXPECT_EQ(events[2].kind, Event::kStopped);
	EXPECT_EQ(device.counters().hint_ids_ignored.load(), 0u);
	EXPECT_EQ(device.counters().wire_pages_hinted.load(), (1u << 20) / kPage);
}

// What stays as it was: a modern driver on the same transitional device is little-endian
// throughout and its primed buffer is read.
TEST_F(LegacyDevice, AModernDriverOnTheSameDeviceKeepsTheModernRules)
{
	guest.negotiate();
	guest.setup_queues();
	guest.post_stats({{VB_S_MEMFREE, 0x0102}});
	guest.driver_ok();
	ASSERT_TRUE(wait_for_stats_buffers(1));
	EXPECT_EQ(device.counters().stats_buffers_disregarded.load(), 0u);
	EXPECT_EQ(device.last_stats().value(VB_S_MEMFREE), 0x0102u);
	EXPECT_FALSE(write_config_byte(VB_CONFIG_ACTUAL_OFFSET + 3, 1));

	const uint32_t id = device.start_hint_round();
	const uint32_t wire = to_le(id);
	const uint64_t gpa = guest.write_buffer(&wire, sizeof(wire));
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_FREE_PAGE, guest.post(VB_QUEUE_FREE_PAGE, {{gpa, 4}})));
	EXPECT_EQ(device.counters().hint_rounds_started.load(), 1u);
}

// A little-endian legacy guest: guest-native is little-endian, the first buffer still goes.
class LittleEndianLegacyDevice : public LegacyDevice
{
protected:
	LittleEndianLegacyDevice() : LegacyDevice(transitional_options(false)) {}
};

TEST_F(LittleEndianLegacyDevice, StatsAreReadLittleEndianAfterTheFirstBuffer)
{
	guest.negotiate_legacy();
	guest.setup_queues();
	void* primed = guest.post_stats({{VB_S_MEMFREE, 5}});
	guest.driver_ok();
	ASSERT_TRUE(wait_for_stats_buffers(1));
	EXPECT_EQ(device.counters().stats_buffers_disregarded.load(), 1u);
	device.request_stats();
	ASSERT_TRUE(guest.wait_for(VB_QUEUE_STATS, primed));
	guest.post_stats({{VB_S_MEMFREE, 0x0102}});
	ASSERT_TRUE(wait_for_stats_buffers(2));
	EXPECT_EQ(device.last_stats().value(VB_S_MEMFREE), 0x0102u);
}

// The legacy sequence is a transitional device's: a modern-only device refuses it, and a
// legacy driver that takes what the device does not offer is refused at DRIVER_OK.
TEST(LegacyDriverRefused, AModernOnlyDeviceRefusesALegacyDriver)
{
	GuestMemory memory({.size_bytes = kRamBytes});
	BalloonDevice device(memory, {.profile = full_profile()});
	TestGuest guest(memory, device.transport());
	EXPECT_THROW(guest.start_legacy(), std::runtime_error); // queue setup in the wrong phase
	device.transport().set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER | VB_STATUS_DRIVER_OK);
	EXPECT_FALSE(device.transport().status() & VB_STATUS_DRIVER_OK);
	const std::array<uint8_t, 1> byte = {1};
	EXPECT_FALSE(device.transport().config_write(VB_CONFIG_ACTUAL_OFFSET, byte.data(), 1));
}

TEST(LegacyDriverRefused, FeaturesNotOfferedAreRefusedAtDriverOk)
{
	GuestMemory memory({.size_bytes = kRamBytes});
	BalloonDevice device(memory, {.profile = cloud_hypervisor_profile(),
				      .legacy = {.transitional = true}});
	Transport& transport = device.transport();
	transport.set_status(VB_STATUS_ACKNOWLEDGE);
	transport.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER);
	ASSERT_TRUE(transport.set_driver_features(VB_FEATURE(VB_F_STATS_VQ)));
	transport.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER | VB_STATUS_DRIVER_OK);
	EXPECT_FALSE(transport.status() & VB_STATUS_DRIVER_OK);
	EXPECT_EQ(transport.counters().legacy_driver_ok_refused.load(), 1u);

	ASSERT_TRUE(transport.set_driver_features(0));
	transport.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER | VB_STATUS_DRIVER_OK);
	EXPECT_TRUE(transport.status() & VB_STATUS_DRIVER_OK);
	// Frozen once DRIVER_OK is set.
	EXPECT_FALSE(transport.set_driver_features(VB_FEATURE(VB_F_DEFLATE_ON_OOM)));
}

} // namespace
} // namespace vbsim
