// SPDX-License-Identifier: GPL-2.0
//
// merge_into_runs: the PFN compaction behind the "merge" discard mode. Examples, then
// properties over seeded random inputs (as Firecracker tests compact_page_frame_numbers):
// no page lost, none duplicated, runs sorted, disjoint and maximal.
#include <gtest/gtest.h>

#include <random>
#include <set>

#include "balloon/page_runs.h"

namespace vbsim
{
namespace
{

TEST(PageRuns, EmptyInputGivesNoRuns)
{
	std::vector<uint64_t> pfns;
	std::vector<PfnRun> runs{{1, 1}};
	merge_into_runs(pfns, runs);
	EXPECT_TRUE(runs.empty());
}

TEST(PageRuns, MergesSortsAndDeduplicates)
{
	std::vector<uint64_t> pfns{7, 3, 4, 5, 9, 3, 8, 100, 0};
	std::vector<PfnRun> runs;
	merge_into_runs(pfns, runs);
	const std::vector<PfnRun> expected{{0, 1}, {3, 3}, {7, 3}, {100, 1}};
	EXPECT_EQ(runs, expected);
}

TEST(PageRuns, OneContiguousBlockIsOneRun)
{
	std::vector<uint64_t> pfns;
	for (uint64_t pfn = 4096 + 255; pfn + 1 > 4096; --pfn)
		pfns.push_back(pfn);
	std::vector<PfnRun> runs;
	merge_into_runs(pfns, runs);
	ASSERT_EQ(runs.size(), 1u);
	EXPECT_EQ(runs[0], (PfnRun{4096, 256}));
}

TEST(PageRuns, PropertiesHoldForRandomInputs)
{
	std::mt19937_64 random(0x5eed);
	for (int round = 0; round < 1500; ++round) {
		const size_t count = random() % 300;
		const uint64_t span = 1 + random() % 600; // small spans make runs and duplicates
		std::vector<uint64_t> pfns(count);
		for (uint64_t& pfn : pfns)
			pfn = random() % span;
		const std::set<uint64_t> distinct(pfns.begin(), pfns.end());

		std::vector<PfnRun> runs;
		merge_into_runs(pfns, runs);

		std::set<uint64_t> covered;
		uint64_t total = 0;
		for (size_t i = 0; i < runs.size(); ++i) {
			ASSERT_GT(runs[i].wire_pages, 0u);
			if (i > 0) { // sorted, disjoint and maximal: a gap between neighbours
				ASSERT_GT(runs[i].first_pfn,
					  runs[i - 1].first_pfn + runs[i - 1].wire_pages);
			}
			for (uint64_t p = 0; p < runs[i].wire_pages; ++p)
				covered.insert(runs[i].first_pfn + p);
			total += runs[i].wire_pages;
		}
		ASSERT_EQ(covered, distinct) << "round " << round;
		ASSERT_EQ(total, distinct.size()) << "round " << round;
	}
}

} // namespace
} // namespace vbsim
