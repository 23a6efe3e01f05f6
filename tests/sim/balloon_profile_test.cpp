// SPDX-License-Identifier: GPL-2.0
//
// The device profiles: what each host offers, its config size and queue sizes, and how a
// driver negotiating with it sees the queues numbered.
#include <gtest/gtest.h>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using test::TestGuest;

constexpr uint64_t f(unsigned bit)
{
	return VB_FEATURE(bit);
}

TEST(BalloonProfile, Qemu72)
{
	const BalloonProfile profile = qemu_7_2_profile();
	EXPECT_EQ(profile.name, "qemu-7.2");
	EXPECT_EQ(profile.offered_features, f(VB_F_VERSION_1) | f(VB_F_RING_EVENT_IDX) |
						    f(VB_F_RING_INDIRECT_DESC) | f(VB_F_STATS_VQ) |
						    f(VB_F_PAGE_POISON));
	EXPECT_EQ(profile.config_size_bytes, 16u);
	EXPECT_EQ(profile.queue_size, 128);
	EXPECT_EQ(profile.reporting_queue_size, 32);
	EXPECT_EQ(profile.offered_features & f(VB_F_MUST_TELL_HOST), 0u);
	EXPECT_EQ(qemu_7_2_profile(f(VB_F_DEFLATE_ON_OOM)).offered_features &
			  f(VB_F_DEFLATE_ON_OOM),
		  f(VB_F_DEFLATE_ON_OOM));
	EXPECT_THROW(qemu_7_2_profile(f(VB_F_MUST_TELL_HOST)), std::invalid_argument);
}

TEST(BalloonProfile, Firecracker)
{
	const BalloonProfile profile = firecracker_profile();
	EXPECT_EQ(profile.offered_features, f(VB_F_VERSION_1));
	EXPECT_EQ(profile.config_size_bytes, 12u);
	EXPECT_EQ(profile.queue_size, 256);
	EXPECT_EQ(profile.max_pfn_bytes_per_request, 1024u);
	const uint64_t all_optional = f(VB_F_STATS_VQ) | f(VB_F_DEFLATE_ON_OOM) |
				      f(VB_F_FREE_PAGE_HINT) | f(VB_F_PAGE_REPORTING);
	EXPECT_EQ(firecracker_profile(all_optional).offered_features,
		  f(VB_F_VERSION_1) | all_optional);
	EXPECT_THROW(firecracker_profile(f(VB_F_PAGE_POISON)), std::invalid_argument);
	EXPECT_THROW(firecracker_profile(f(VB_F_MUST_TELL_HOST)), std::invalid_argument);
}

TEST(BalloonProfile, CloudHypervisor)
{
	const BalloonProfile profile = cloud_hypervisor_profile();
	EXPECT_EQ(profile.offered_features, f(VB_F_VERSION_1));
	EXPECT_EQ(profile.config_size_bytes, 8u);
	EXPECT_EQ(profile.queue_size, 128);
	EXPECT_EQ(profile.reporting_queue_size, 32);
	EXPECT_EQ(profile.max_pfn_bytes_per_request, 1024u);
	EXPECT_THROW(cloud_hypervisor_profile(f(VB_F_STATS_VQ)), std::invalid_argument);
}

TEST(BalloonProfile, FullOffersEverything)
{
	const BalloonProfile profile = full_profile();
	for (unsigned bit : {VB_F_MUST_TELL_HOST, VB_F_STATS_VQ, VB_F_DEFLATE_ON_OOM,
			     VB_F_FREE_PAGE_HINT, VB_F_PAGE_POISON, VB_F_PAGE_REPORTING,
			     VB_F_VERSION_1, VB_F_RING_EVENT_IDX, VB_F_RING_INDIRECT_DESC})
		EXPECT_NE(profile.offered_features & f(bit), 0u) << bit;
	EXPECT_EQ(profile.config_size_bytes, 16u);
}

TEST(BalloonProfile, ByName)
{
	for (const char* name : {"qemu-7.2", "firecracker", "cloud-hypervisor", "full"}) {
		const auto profile = profile_by_name(name);
		ASSERT_TRUE(profile.has_value()) << name;
		EXPECT_EQ(profile->name, name);
	}
	EXPECT_FALSE(profile_by_name("qemu-8.0").has_value());
}

struct ProfileCase {
	const char* name;
	BalloonProfile profile;
	uint32_t config_size;
	// Transport indices under "accept everything offered".
	int stats_index;
	int reporting_index;
	uint16_t queue_size;
};

class BalloonProfileDevice : public ::testing::TestWithParam<ProfileCase>
{
protected:
	GuestMemory memory{{.size_bytes = 16ull << 20}};
};

TEST_P(BalloonProfileDevice, TheDriverSeesTheProfile)
{
	const ProfileCase& c = GetParam();
	BalloonDevice device(memory, {.profile = c.profile});
	Transport& transport = device.transport();
	EXPECT_EQ(transport.device_features(), c.profile.offered_features);
	EXPECT_EQ(transport.config_size(), c.config_size);
	// Reading past the config space gives zeroes and is counted.
	EXPECT_EQ(transport.config_read32(c.config_size), 0u);
	EXPECT_EQ(transport.counters().config_reads_out_of_range.load(), 1u);

	TestGuest guest(memory, transport);
	const uint64_t negotiated = guest.start();
	EXPECT_EQ(negotiated, c.profile.offered_features);
	EXPECT_EQ(vb_queue_index(negotiated, VB_QUEUE_STATS), c.stats_index);
	EXPECT_EQ(vb_queue_index(negotiated, VB_QUEUE_REPORTING), c.reporting_index);
	EXPECT_EQ(transport.queue_max_size(0), c.queue_size);
	EXPECT_EQ(transport.queue_max_size(1), c.queue_size);
	if (c.reporting_index >= 0) {
		EXPECT_EQ(transport.queue_max_size(c.reporting_index),
			  c.profile.reporting_queue_size);
	}
	EXPECT_EQ(transport.queue_max_size(transport.queue_count()), 0);
	// The queues work: an inflate round trip.
	EXPECT_TRUE(guest.send_pfns(VB_QUEUE_INFLATE, {TestGuest::kFirstFreePfn}));
	EXPECT_TRUE(device.host_owns(TestGuest::kFirstFreePfn));
	EXPECT_EQ(device.queue_index(VB_QUEUE_DEFLATE), 1);
}

INSTANTIATE_TEST_SUITE_P(
	Profiles, BalloonProfileDevice,
	::testing::Values(
		ProfileCase{"qemu", qemu_7_2_profile(), 16, 2, -1, 128},
		ProfileCase{"qemu_reporting", qemu_7_2_profile(VB_FEATURE(VB_F_PAGE_REPORTING)), 16,
			    2, 3, 128},
		ProfileCase{"firecracker", firecracker_profile(), 12, -1, -1, 256},
		// Reporting without stats or hinting sits at index 2, as Firecracker numbers it.
		ProfileCase{"firecracker_reporting",
			    firecracker_profile(VB_FEATURE(VB_F_PAGE_REPORTING)), 12, -1, 2, 256},
		ProfileCase{"cloud_hypervisor", cloud_hypervisor_profile(), 8, -1, -1, 128},
		ProfileCase{"cloud_hypervisor_reporting",
			    cloud_hypervisor_profile(VB_FEATURE(VB_F_PAGE_REPORTING)), 8, -1, 2,
			    128},
		ProfileCase{"full", full_profile(), 16, 2, 4, 256}),
	[](const auto& info) { return std::string(info.param.name); });

class BalloonConfigPolicy : public ::testing::Test
{
protected:
	GuestMemory memory{{.size_bytes = 16ull << 20}};
	BalloonDevice device{memory, {.profile = full_profile(), .initial_target_wire_pages = 42}};
	Transport& transport = device.transport();
	TestGuest guest{memory, transport};
};

TEST_F(BalloonConfigPolicy, TheDriverWritesActualAndNothingOfTheDevices)
{
	EXPECT_EQ(transport.config_read32(VB_CONFIG_NUM_PAGES_OFFSET), 42u);
	guest.start();
	EXPECT_TRUE(transport.config_write32(VB_CONFIG_ACTUAL_OFFSET, 17));
	EXPECT_EQ(device.actual_wire_pages(), 17u);
	EXPECT_FALSE(transport.config_write32(VB_CONFIG_NUM_PAGES_OFFSET, 1));
	EXPECT_FALSE(transport.config_write32(VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET, 5));
	const uint16_t half = 1;
	EXPECT_FALSE(
		transport.config_write(VB_CONFIG_ACTUAL_OFFSET, &half, sizeof(half))); // partial
	EXPECT_EQ(device.target_wire_pages(), 42u);
	EXPECT_EQ(device.actual_wire_pages(), 17u);
	EXPECT_EQ(transport.counters().config_writes_rejected.load(), 3u);
}

TEST_F(BalloonConfigPolicy, PoisonValueIsWritableOnlyBeforeDriverOk)
{
	guest.negotiate();
	EXPECT_TRUE(transport.config_write32(VB_CONFIG_POISON_VAL_OFFSET, 0xaaaaaaaa));
	guest.setup_queues();
	guest.driver_ok();
	EXPECT_FALSE(transport.config_write32(VB_CONFIG_POISON_VAL_OFFSET, 0));
	EXPECT_EQ(device.poison_value(), 0xaaaaaaaau);
}

TEST_F(BalloonConfigPolicy, PoisonValueNeedsPagePoison)
{
	guest.negotiate(~VB_FEATURE(VB_F_PAGE_POISON));
	EXPECT_FALSE(transport.config_write32(VB_CONFIG_POISON_VAL_OFFSET, 0xaaaaaaaa));
	EXPECT_EQ(device.poison_value(), 0u);
}

TEST_F(BalloonConfigPolicy, SettingTheTargetRaisesAConfigInterrupt)
{
	guest.start();
	const uint32_t generation = transport.config_generation();
	device.set_target_wire_pages(1000);
	EXPECT_EQ(transport.wait_for_config_change(test::kHangTimeout), 1u);
	EXPECT_EQ(transport.config_read32(VB_CONFIG_NUM_PAGES_OFFSET), 1000u);
	EXPECT_EQ(transport.config_generation(), generation + 1);
}

TEST(BalloonMustTellHost, TheDeviceMayRequireIt)
{
	GuestMemory memory({.size_bytes = 16ull << 20});
	BalloonDevice device(memory, {.profile = full_profile(), .require_must_tell_host = true});
	TestGuest guest(memory, device.transport());
	EXPECT_THROW(guest.negotiate(~VB_FEATURE(VB_F_MUST_TELL_HOST)), std::runtime_error);
	EXPECT_EQ(device.transport().counters().features_ok_refused.load(), 1u);
	EXPECT_NO_THROW(guest.negotiate());
}

TEST(BalloonProfileCheck, InconsistentProfilesAreRefused)
{
	GuestMemory memory({.size_bytes = 16ull << 20});
	BalloonProfile poison_without_field = firecracker_profile();
	poison_without_field.offered_features |= VB_FEATURE(VB_F_PAGE_POISON); // 12-byte config
	EXPECT_THROW(BalloonDevice(memory, {.profile = poison_without_field}),
		     std::invalid_argument);
	BalloonProfile odd_queue = full_profile();
	odd_queue.queue_size = 100;
	EXPECT_THROW(BalloonDevice(memory, {.profile = odd_queue}), std::invalid_argument);
}

} // namespace
} // namespace vbsim
