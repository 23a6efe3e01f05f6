// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

#include <random>

#include "balloon/host_page_ownership.h"

namespace vbsim
{
namespace
{

TEST(HostPageOwnership, TakeAndGiveBackChangeHandsOnce)
{
	HostPageOwnership ownership(130); // not a multiple of 64: the last word is partial
	EXPECT_FALSE(ownership.owns(5));
	EXPECT_TRUE(ownership.take(5));
	EXPECT_FALSE(ownership.take(5));
	EXPECT_TRUE(ownership.owns(5));
	EXPECT_TRUE(ownership.take(129));
	EXPECT_EQ(ownership.owned_wire_pages(), 2u);
	EXPECT_TRUE(ownership.give_back(5));
	EXPECT_FALSE(ownership.give_back(5));
	EXPECT_FALSE(ownership.owns(5));
	EXPECT_EQ(ownership.owned_wire_pages(), 1u);
}

TEST(HostPageOwnership, PagesBeyondRamAreNeverOwned)
{
	HostPageOwnership ownership(64);
	EXPECT_FALSE(ownership.take(64));
	EXPECT_FALSE(ownership.owns(64));
	EXPECT_FALSE(ownership.give_back(1ull << 40));
	EXPECT_EQ(ownership.owned_wire_pages(), 0u);
}

TEST(HostPageOwnership, GiveBackAllReturnsTheCount)
{
	HostPageOwnership ownership(1000);
	for (uint64_t pfn = 0; pfn < 1000; pfn += 3)
		ASSERT_TRUE(ownership.take(pfn));
	EXPECT_EQ(ownership.give_back_all(), 334u);
	EXPECT_EQ(ownership.owned_wire_pages(), 0u);
	EXPECT_FALSE(ownership.owns(999));
}

} // namespace
} // namespace vbsim

namespace vbsim
{
namespace
{

// The run versions must agree with page-at-a-time ownership for any run, whatever its
// alignment to the bitmap's words and whatever was owned before.
TEST(HostPageOwnership, RunsAgreeWithSinglePages)
{
	std::mt19937_64 random(99);
	HostPageOwnership by_run(1000);
	HostPageOwnership by_page(1000);
	for (int round = 0; round < 2000; round++) {
		uint64_t first = random() % 1100; // sometimes beyond RAM
		uint64_t count = 1 + random() % 200;
		bool take = random() % 2;
		uint64_t changed_by_page = 0;
		for (uint64_t pfn = first; pfn < first + count; pfn++)
			changed_by_page += take ? by_page.take(pfn) : by_page.give_back(pfn);
		uint64_t changed_by_run = take ? by_run.take_run(first, count) : by_run.give_back_run(first, count);
		ASSERT_EQ(changed_by_run, changed_by_page) << "round " << round;
		ASSERT_EQ(by_run.owned_wire_pages(), by_page.owned_wire_pages());
		// The run query agrees with asking page by page.
		uint64_t probe_first = random() % 1100, probe_count = 1 + random() % 300, owned = 0;
		for (uint64_t pfn = probe_first; pfn < probe_first + probe_count; pfn++)
			owned += by_page.owns(pfn);
		ASSERT_EQ(by_run.owned_in_run(probe_first, probe_count), owned) << "round " << round;
	}
	for (uint64_t pfn = 0; pfn < 1000; pfn++)
		ASSERT_EQ(by_run.owns(pfn), by_page.owns(pfn)) << pfn;
}

} // namespace
} // namespace vbsim
