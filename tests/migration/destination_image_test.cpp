// SPDX-License-Identifier: GPL-2.0
//
// The destination keeps a digest per page, not the page: what it received must still be
// told apart from anything else, and it must not cost a page of memory per page received.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "migration/destination_image.h"
#include "migration/page_digest.h"

namespace vbsim::migration
{
namespace
{

constexpr uint64_t kPage = 4096;

std::vector<uint8_t> patterned_page(uint8_t multiplier, uint8_t offset)
{
	std::vector<uint8_t> page(kPage);
	for (size_t i = 0; i < page.size(); i++)
		page[i] = uint8_t(i * multiplier + offset);
	return page;
}

uint64_t resident_bytes()
{
	std::ifstream statm("/proc/self/statm");
	uint64_t size_pages = 0, resident_pages = 0;
	statm >> size_pages >> resident_pages;
	return resident_pages * kPage;
}

} // namespace

// The stored digest is XXH64 shifted by the zero page's XXH64: a wrong shift would put some
// other page at 0, where the destination keeps "never received, zero".
TEST(PageDigest, IsXxh64ShiftedByTheZeroPagesXxh64)
{
	const uint64_t zero = xxh64_of_page(std::vector<uint8_t>(kPage, 0).data());
	for (const auto& page : {patterned_page(7, 1), patterned_page(131, 7)})
		EXPECT_EQ(page_digest(page.data()), xxh64_of_page(page.data()) ^ zero);
}

TEST(PageDigest, TheZeroPageIsZeroAndAnyOtherPageIsNot)
{
	EXPECT_EQ(page_digest(std::vector<uint8_t>(kPage, 0).data()), 0u);
	std::vector<uint8_t> one_bit(kPage, 0);
	for (size_t byte : {size_t{0}, size_t{2048}, kPage - 1}) {
		one_bit[byte] = 0x80;
		EXPECT_NE(page_digest(one_bit.data()), 0u) << byte;
		one_bit[byte] = 0;
	}
}

TEST(DestinationImage, EveryPageReadsAsZeroUntilDataArrives)
{
	DestinationImage image(64 * kPage);
	const std::vector<uint8_t> data = patterned_page(7, 1);
	for (uint64_t page = 0; page < 64; page++) {
		EXPECT_FALSE(image.differs(page, nullptr)) << page;
		EXPECT_TRUE(image.differs(page, data.data())) << page;
	}
}

// A page changed by one bit anywhere after it was sent (written and never sent again, or
// corrupted on the way) differs.
TEST(DestinationImage, APageThatChangedAnywhereDiffers)
{
	DestinationImage image(4 * kPage);
	std::vector<uint8_t> page = patterned_page(131, 7);
	image.receive_page(2, page.data());
	ASSERT_FALSE(image.differs(2, page.data()));
	for (size_t byte = 0; byte < kPage; byte += 61) {
		page[byte] ^= 0x01;
		EXPECT_TRUE(image.differs(2, page.data())) << byte;
		page[byte] ^= 0x01;
	}
	EXPECT_FALSE(image.differs(2, page.data()));
	// The same bytes at another page's place are not that page.
	EXPECT_TRUE(image.differs(3, page.data()));
}

TEST(DestinationImage, APageThatShouldBeZeroDiffersAndAZeroPageClearsIt)
{
	DestinationImage image(4 * kPage);
	const std::vector<uint8_t> data = patterned_page(7, 1);
	image.receive_page(1, data.data());
	EXPECT_TRUE(image.differs(1, nullptr));
	EXPECT_TRUE(image.differs(1, std::vector<uint8_t>(kPage, 0).data()));
	image.receive_zero_page(1);
	EXPECT_FALSE(image.differs(1, nullptr));
	EXPECT_TRUE(image.differs(1, data.data()));
	// A whole page of zeros sent as data is a zero page too.
	image.receive_page(1, data.data());
	image.receive_page(1, std::vector<uint8_t>(kPage, 0).data());
	EXPECT_FALSE(image.differs(1, nullptr));
}

// The point of digests: 64 MiB received costs the destination 128 KiB of digests, not
// 64 MiB of copies (a copy per page would put a 16 GiB freed guest beyond 24 GiB of host).
TEST(DestinationImage, HoldsADigestPerPageNotACopy)
{
	constexpr uint64_t kPagesReceived = 16384; // 64 MiB
	DestinationImage image(1ull << 30);
	std::vector<uint8_t> page = patterned_page(7, 1);
	const uint64_t before = resident_bytes();
	for (uint64_t i = 0; i < kPagesReceived; i++) {
		std::memcpy(page.data(), &i, sizeof(i)); // every page different
		image.receive_page(i, page.data());
	}
	const uint64_t grown = resident_bytes() - before;
	// Digests: 8 bytes a page. The bound leaves room for what else the process allocates
	// and is still 16 times below the copies' 64 MiB.
	EXPECT_LT(grown, 4ull << 20) << "the destination grew by " << grown << " bytes";
	for (uint64_t i = 0; i < kPagesReceived; i += 1000) {
		std::memcpy(page.data(), &i, sizeof(i));
		EXPECT_FALSE(image.differs(i, page.data())) << i;
	}
}

} // namespace vbsim::migration
