// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "balloon_page_list.h"

namespace {

using vbsim::BalloonPageList;

TEST(BalloonPageList, TakesNewestFirstAsCoalescedRuns)
{
	BalloonPageList list;
	list.insert({100, 512});
	list.insert({612, 512}); // continues the first run
	list.insert({5000, 10});
	EXPECT_EQ(list.runs(), 2u);
	EXPECT_EQ(list.pages(), 1034u);

	vb::PageRun runs[4];
	ASSERT_EQ(list.take(runs, 4, 20), 2u);
	EXPECT_EQ(runs[0].first_pfn, 5000u);
	EXPECT_EQ(runs[0].count, 10u);
	EXPECT_EQ(runs[1].first_pfn, 1114u); // the top 10 pages of the big run
	EXPECT_EQ(runs[1].count, 10u);
	EXPECT_EQ(list.pages(), 1014u);
}

TEST(BalloonPageList, StopsWhenTheOutputRunsAreFull)
{
	BalloonPageList list;
	for (uint64_t pfn = 0; pfn < 100; pfn += 2)
		list.insert({pfn, 1});
	vb::PageRun runs[3];
	ASSERT_EQ(list.take(runs, 3, 1000), 3u);
	EXPECT_EQ(list.pages(), 47u);
}

TEST(BalloonPageList, InitialisedFlagSplitsRunsAndTravelsWithPages)
{
	BalloonPageList list;
	list.insert({0, 100});
	ASSERT_TRUE(list.mark_initialised({40, 20, vb::kPageRunDeviceInitialised}));
	EXPECT_EQ(list.runs(), 3u);
	EXPECT_FALSE(list.mark_initialised({200, 1, 0})) << "not on the list";

	vb::PageRun runs[8];
	ASSERT_EQ(list.take(runs, 8, 100), 3u);
	EXPECT_EQ(runs[0].first_pfn, 60u);
	EXPECT_EQ(runs[0].flags, 0u);
	EXPECT_EQ(runs[1].first_pfn, 40u);
	EXPECT_EQ(runs[1].count, 20u);
	EXPECT_EQ(runs[1].flags, vb::kPageRunDeviceInitialised);
	EXPECT_EQ(runs[2].first_pfn, 0u);
}

TEST(BalloonPageList, RandomOperationsMatchAReferenceModel)
{
	std::mt19937_64 random(7);
	BalloonPageList list;
	std::map<uint64_t, uint32_t> model; // pfn -> flags
	uint64_t next_pfn = 0;

	for (int round = 0; round < 3000; round++) {
		switch (random() % 4) {
		case 0: {
			uint64_t count = 1 + random() % 64;
			next_pfn += random() % 3; // sometimes contiguous, sometimes not
			list.insert({next_pfn, count});
			for (uint64_t i = 0; i < count; i++)
				model[next_pfn + i] = 0;
			next_pfn += count;
			break;
		}
		case 1: {
			vb::PageRun runs[16];
			size_t n = list.take(runs, 16, random() % 100);
			for (size_t r = 0; r < n; r++) {
				for (uint64_t pfn = runs[r].first_pfn; pfn < runs[r].first_pfn + runs[r].count; pfn++) {
					auto it = model.find(pfn);
					ASSERT_NE(it, model.end()) << "took a page not on the list";
					ASSERT_EQ(it->second, runs[r].flags);
					model.erase(it);
				}
			}
			break;
		}
		case 2:
			if (!model.empty()) {
				auto it = model.begin();
				std::advance(it, random() % model.size());
				ASSERT_TRUE(list.mark_initialised({it->first, 1, vb::kPageRunDeviceInitialised}));
				it->second = vb::kPageRunDeviceInitialised;
			}
			break;
		case 3:
			if (!model.empty()) {
				auto it = model.begin();
				std::advance(it, random() % model.size());
				uint64_t fresh = 1'000'000 + round;
				ASSERT_TRUE(list.replace(it->first, fresh));
				model.erase(it);
				model[fresh] = 0;
			}
			break;
		}
		ASSERT_EQ(list.pages(), model.size());
	}
	for (const auto& [pfn, flags] : model)
		EXPECT_TRUE(list.contains(pfn)) << pfn;
}

} // namespace
