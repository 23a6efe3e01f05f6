// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include "vballoon/core/features.h"
#include "vballoon/core/pfn_packer.h"
#include "vballoon/core/stats_report.h"

namespace {

constexpr uint64_t kEverything = ~0ull;

TEST(FeatureNegotiation, AcceptsOnlyWhatTheCoreServes)
{
	vb::GuestTraits traits;
	uint64_t accepted = vb::accept_features(kEverything, traits);
	EXPECT_EQ(accepted, VB_FEATURE(VB_F_MUST_TELL_HOST) | VB_FEATURE(VB_F_STATS_VQ) |
				    VB_FEATURE(VB_F_DEFLATE_ON_OOM) | VB_FEATURE(VB_F_X_CHUNKED));
	for (unsigned proposal : {6u, 7u, 8u})
		EXPECT_FALSE(accepted & VB_FEATURE(proposal));
}

TEST(FeatureNegotiation, PagePoisonAndDeviceInitOnlyWhenTheGuestWritesAPattern)
{
	vb::GuestTraits traits;
	EXPECT_FALSE(vb::accept_features(kEverything, traits) & VB_FEATURE(VB_F_PAGE_POISON));
	EXPECT_FALSE(vb::accept_features(kEverything, traits) & VB_FEATURE(VB_F_X_INIT_ON_INFLATE));
	traits.freed_pages_need_pattern = true;
	EXPECT_TRUE(vb::accept_features(kEverything, traits) & VB_FEATURE(VB_F_PAGE_POISON));
	EXPECT_TRUE(vb::accept_features(kEverything, traits) & VB_FEATURE(VB_F_X_INIT_ON_INFLATE));
}

TEST(FeatureNegotiation, DeviceInitBitsOnlyWhenTheOsOptsIn)
{
	const uint64_t bit6 = VB_FEATURE(VB_F_DEVICE_INIT_REPORTED);
	const uint64_t bit7 = VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);
	const uint64_t bit21 = VB_FEATURE(VB_F_X_INIT_ON_INFLATE);
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = true; // init_on_free: pattern zero
	traits.runs_page_reporting = true;
	uint64_t accepted = vb::accept_features(kEverything, traits);
	EXPECT_FALSE(accepted & (bit6 | bit7)) << "bit 6 has other owners: never taken unasked";
	EXPECT_TRUE(accepted & bit21);

	traits.accept_device_init = true;
	accepted = vb::accept_features(kEverything, traits);
	EXPECT_TRUE(accepted & bit6);
	EXPECT_TRUE(accepted & bit7);
	EXPECT_FALSE(accepted & bit21) << "one bitmap per inflate: bit 7 replaces bit 21";

	// Bit 7 promises zero only: useless to a guest whose pattern is poison, or that
	// initialises nothing. Bit 6 only with reporting.
	traits.free_page_pattern = 0xaaaaaaaa;
	accepted = vb::accept_features(kEverything, traits);
	EXPECT_FALSE(accepted & bit7);
	EXPECT_TRUE(accepted & bit21);
	traits.free_page_pattern = 0;
	traits.freed_pages_need_pattern = false;
	EXPECT_FALSE(vb::accept_features(kEverything, traits) & bit7);
	traits.runs_page_reporting = false;
	EXPECT_FALSE(vb::accept_features(kEverything, traits) & bit6);
	EXPECT_FALSE(vb::accept_features(kEverything & ~VB_FEATURE(VB_F_PAGE_REPORTING), traits) &
		     bit6);
}

TEST(FeatureNegotiation, HintingAndReportingOnlyWhenTheOsServesThem)
{
	vb::GuestTraits traits;
	uint64_t both = VB_FEATURE(VB_F_FREE_PAGE_HINT) | VB_FEATURE(VB_F_PAGE_REPORTING);
	EXPECT_EQ(vb::accept_features(both, traits), 0u);
	traits.runs_free_page_hinting = true;
	EXPECT_EQ(vb::accept_features(both, traits), VB_FEATURE(VB_F_FREE_PAGE_HINT));
	traits.runs_page_reporting = true;
	EXPECT_EQ(vb::accept_features(both, traits), both);
}

TEST(FeatureNegotiation, APatternGuestReportsOnlyWhenTheDeviceLearnsThePattern)
{
	vb::GuestTraits traits;
	traits.runs_page_reporting = true;
	traits.freed_pages_need_pattern = true;
	uint64_t reporting = VB_FEATURE(VB_F_PAGE_REPORTING);
	EXPECT_EQ(vb::accept_features(reporting, traits), 0u)
		<< "without PAGE_POISON the device could change free pages the guest relies on";
	EXPECT_EQ(vb::accept_features(reporting | VB_FEATURE(VB_F_PAGE_POISON), traits),
		  reporting | VB_FEATURE(VB_F_PAGE_POISON));
	traits.freed_pages_need_pattern = false;
	EXPECT_EQ(vb::accept_features(reporting, traits), reporting);
}

TEST(FeatureNegotiation, NeverAcceptsWhatIsNotOffered)
{
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = true;
	traits.runs_free_page_hinting = true;
	traits.runs_page_reporting = true;
	for (unsigned bit = 0; bit < 64; bit++) {
		uint64_t offered = VB_FEATURE(bit);
		EXPECT_EQ(vb::accept_features(offered, traits) & ~offered, 0u) << bit;
	}
}

TEST(FeatureNegotiation, ConfigBytesFollowTheFeatures)
{
	EXPECT_EQ(vb::config_bytes_needed(0), 8u);
	EXPECT_EQ(vb::config_bytes_needed(VB_FEATURE(VB_F_FREE_PAGE_HINT)), 12u);
	EXPECT_EQ(vb::config_bytes_needed(VB_FEATURE(VB_F_PAGE_POISON)), 16u);
}

TEST(QueueIndex, IsDenseOverNegotiatedQueues)
{
	EXPECT_EQ(vb_queue_index(0, VB_QUEUE_INFLATE), 0);
	EXPECT_EQ(vb_queue_index(0, VB_QUEUE_DEFLATE), 1);
	EXPECT_EQ(vb_queue_index(0, VB_QUEUE_STATS), -1);
	EXPECT_EQ(vb_queue_index(VB_FEATURE(VB_F_PAGE_REPORTING), VB_QUEUE_REPORTING), 2);
	uint64_t all = VB_FEATURE(VB_F_STATS_VQ) | VB_FEATURE(VB_F_FREE_PAGE_HINT) |
		       VB_FEATURE(VB_F_PAGE_REPORTING);
	EXPECT_EQ(vb_queue_index(all, VB_QUEUE_STATS), 2);
	EXPECT_EQ(vb_queue_index(all, VB_QUEUE_FREE_PAGE), 3);
	EXPECT_EQ(vb_queue_index(all, VB_QUEUE_REPORTING), 4);
	EXPECT_EQ(vb_queue_count(all), 5);
	uint64_t hint_only = VB_FEATURE(VB_F_FREE_PAGE_HINT);
	EXPECT_EQ(vb_queue_index(hint_only, VB_QUEUE_FREE_PAGE), 2);
	EXPECT_EQ(vb_queue_count(hint_only), 3);
}

TEST(PfnPacker, SplitsRunsAtTheMessageCapacity)
{
	vb::PageRun runs[] = {{1000, 300}, {5000, 10}};
	vb::PfnPacker packer(runs, 2, 12);
	uint32_t pfns[256];

	ASSERT_EQ(packer.pack(pfns, 256), 256u);
	EXPECT_EQ(pfns[0], 1000u);
	EXPECT_EQ(pfns[255], 1255u);
	ASSERT_EQ(packer.pack(pfns, 256), 54u);
	EXPECT_EQ(pfns[43], 1299u);
	EXPECT_EQ(pfns[44], 5000u);
	EXPECT_EQ(pfns[53], 5009u);
	EXPECT_TRUE(packer.done());
	EXPECT_EQ(packer.pack(pfns, 256), 0u);
}

TEST(PfnPacker, NeverSplitsALargeGuestPage)
{
	vb::PageRun runs[] = {{7, 20}}; // 64 KiB pages: 16 wire PFNs each
	vb::PfnPacker packer(runs, 1, 16);
	uint32_t pfns[256];

	ASSERT_EQ(packer.pack(pfns, 250), 240u) << "15 whole pages fit in 250 entries";
	EXPECT_EQ(pfns[0], 7u * 16);
	EXPECT_EQ(pfns[239], 21u * 16 + 15);
	ASSERT_EQ(packer.pack(pfns, 250), 80u);
	EXPECT_TRUE(packer.done());
}

TEST(PfnPacker, WirePfnsStopAt16TiB)
{
	EXPECT_TRUE(vb::run_fits_wire_pfns({0xffffffffull, 1}, 12));
	EXPECT_FALSE(vb::run_fits_wire_pfns({0x100000000ull, 1}, 12));
	EXPECT_FALSE(vb::run_fits_wire_pfns({0xfffffff0ull, 32}, 12));
	EXPECT_FALSE(vb::run_fits_wire_pfns({0, 0}, 12));
}

TEST(StatsReport, WritesTheMaskedTagsInAscendingOrder)
{
	vb::MemoryStats stats{};
	stats.present_mask = 0xffff;
	for (unsigned tag = 0; tag < VB_S_NR; tag++)
		stats.value[tag] = 100 + tag;
	vb_stat_entry entries[VB_S_NR];
	uint32_t mask = (1u << VB_S_SWAP_IN) | (1u << VB_S_MEMTOT) | (1u << VB_S_DIRECT_RECLAIM);
	ASSERT_EQ(vb::fill_stats_entries(entries, stats, mask), 3u);
	EXPECT_EQ(entries[0].tag, VB_S_SWAP_IN);
	EXPECT_EQ(entries[0].val, 100u);
	EXPECT_EQ(entries[1].tag, VB_S_MEMTOT);
	EXPECT_EQ(entries[2].tag, VB_S_DIRECT_RECLAIM);
	EXPECT_EQ(entries[2].val, 115u);
}

} // namespace
