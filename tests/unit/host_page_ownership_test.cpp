// SPDX-License-Identifier: GPL-2.0
#include <gtest/gtest.h>

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
	EXPECT_EQ(ownership.owned_pages(), 2u);
	EXPECT_TRUE(ownership.give_back(5));
	EXPECT_FALSE(ownership.give_back(5));
	EXPECT_FALSE(ownership.owns(5));
	EXPECT_EQ(ownership.owned_pages(), 1u);
}

TEST(HostPageOwnership, PagesBeyondRamAreNeverOwned)
{
	HostPageOwnership ownership(64);
	EXPECT_FALSE(ownership.take(64));
	EXPECT_FALSE(ownership.owns(64));
	EXPECT_FALSE(ownership.give_back(1ull << 40));
	EXPECT_EQ(ownership.owned_pages(), 0u);
}

TEST(HostPageOwnership, GiveBackAllReturnsTheCount)
{
	HostPageOwnership ownership(1000);
	for (uint64_t pfn = 0; pfn < 1000; pfn += 3)
		ASSERT_TRUE(ownership.take(pfn));
	EXPECT_EQ(ownership.give_back_all(), 334u);
	EXPECT_EQ(ownership.owned_pages(), 0u);
	EXPECT_FALSE(ownership.owns(999));
}

} // namespace
} // namespace vbsim
