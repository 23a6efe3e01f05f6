// SPDX-License-Identifier: GPL-2.0
//
// Guest RAM: bounds-checked translation (overflow included), the write helpers, and the
// real effect of discard/populate on residency as mincore sees it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "memory/guest_memory.h"
#include "support/printers.h"

namespace vbsim
{
namespace
{

constexpr uint64_t kMiB = 1ull << 20;
constexpr uint64_t kPage = GuestMemory::kWirePageBytes;

TEST(GuestMemory, RefusesSizesThatAreNotWholePages)
{
	EXPECT_THROW(GuestMemory({.size_bytes = 0}), std::invalid_argument);
	EXPECT_THROW(GuestMemory({.size_bytes = kPage + 1}), std::invalid_argument);
}

TEST(GuestMemory, TranslateChecksTheWholeRange)
{
	GuestMemory memory({.size_bytes = 1 * kMiB});
	uint8_t* base = memory.translate(0, 1);
	ASSERT_NE(base, nullptr);
	EXPECT_EQ(memory.translate(4096, 16), base + 4096);
	EXPECT_EQ(memory.translate(kMiB - 8, 8), base + kMiB - 8);
	EXPECT_EQ(memory.translate(0, kMiB), base);

	EXPECT_EQ(memory.translate(kMiB - 8, 9), nullptr); // one byte past the end
	EXPECT_EQ(memory.translate(kMiB, 1), nullptr);
	EXPECT_EQ(memory.translate(0, kMiB + 1), nullptr);
	EXPECT_EQ(memory.translate(16, 0), nullptr); // empty ranges get no pointer
	// gpa + len wraps around 2^64 to a small number: must still be refused.
	EXPECT_EQ(memory.translate(~uint64_t{0} - 15, 32), nullptr);
	EXPECT_EQ(memory.translate(8, ~uint64_t{0}), nullptr);
	EXPECT_FALSE(memory.contains(~uint64_t{0}, 2));
	EXPECT_TRUE(memory.contains(kMiB, 0));
}

TEST(GuestMemory, WriteHelpersStoreLittleEndianAndRefuseOutOfRange)
{
	GuestMemory memory({.size_bytes = 64 * 1024});
	ASSERT_TRUE(memory.write_le<uint32_t>(100, 0x11223344));
	const uint8_t* bytes = memory.translate(100, 4);
	EXPECT_EQ(bytes[0], 0x44);
	EXPECT_EQ(bytes[3], 0x11);
	uint32_t value = 0;
	ASSERT_TRUE(memory.read_le(100, &value));
	EXPECT_EQ(value, 0x11223344u);

	ASSERT_TRUE(memory.store_le16_release(200, 0xbeef));
	uint16_t index = 0;
	ASSERT_TRUE(memory.load_le16_acquire(200, &index));
	EXPECT_EQ(index, 0xbeef);
	EXPECT_FALSE(memory.store_le16_release(201, 1)); // misaligned atomics are refused
	EXPECT_FALSE(memory.load_le16_acquire(201, &index));

	EXPECT_FALSE(memory.write_le<uint64_t>(64 * 1024 - 4, 1));
	EXPECT_FALSE(memory.fill(64 * 1024 - 4, 0xff, 5));
	EXPECT_FALSE(memory.read(~uint64_t{0} - 1, &value, 4));
	// Nothing was written by the refused calls.
	std::vector<uint8_t> tail(8);
	ASSERT_TRUE(memory.read(64 * 1024 - 8, tail.data(), tail.size()));
	EXPECT_EQ(tail, std::vector<uint8_t>(8, 0));
}

class GuestMemoryBacking : public ::testing::TestWithParam<PageBacking>
{
};

TEST_P(GuestMemoryBacking, DiscardDropsResidencyAndZeroesContents)
{
	GuestMemory memory({.size_bytes = 8 * kMiB, .backing = GetParam()});
	ASSERT_EQ(memory.populate(0, 8 * kMiB), 0);
	EXPECT_EQ(memory.resident_bytes(0, 8 * kMiB), 8 * kMiB);
	ASSERT_TRUE(memory.fill(2 * kMiB, 0x5a, 2 * kMiB));

	ASSERT_EQ(memory.discard(2 * kMiB, 2 * kMiB), 0);
	EXPECT_EQ(memory.resident_bytes(2 * kMiB, 2 * kMiB), 0u);
	// Neighbours keep their pages.
	EXPECT_EQ(memory.resident_bytes(0, 2 * kMiB), 2 * kMiB);
	EXPECT_EQ(memory.resident_bytes(4 * kMiB, 4 * kMiB), 4 * kMiB);

	uint8_t byte = 0xff;
	ASSERT_TRUE(memory.read(3 * kMiB, &byte, 1));
	EXPECT_EQ(byte, 0); // anonymous memory reads back as zero after MADV_DONTNEED
}

TEST_P(GuestMemoryBacking, PopulateKeepsContents)
{
	GuestMemory memory({.size_bytes = 4 * kMiB, .backing = GetParam()});
	ASSERT_TRUE(memory.write_le<uint64_t>(kPage, 0x0123456789abcdef));
	ASSERT_EQ(memory.populate(0, 4 * kMiB), 0);
	uint64_t value = 0;
	ASSERT_TRUE(memory.read_le(kPage, &value));
	EXPECT_EQ(value, 0x0123456789abcdefu);
	EXPECT_EQ(memory.resident_bytes(0, 4 * kMiB), 4 * kMiB);
}

TEST_P(GuestMemoryBacking, PageOperationsRefuseUnalignedOrOutsideRanges)
{
	GuestMemory memory({.size_bytes = 1 * kMiB, .backing = GetParam()});
	EXPECT_EQ(memory.discard(100, kPage), EINVAL);
	EXPECT_EQ(memory.discard(0, 100), EINVAL);
	EXPECT_EQ(memory.discard(kMiB, kPage), EINVAL);
	EXPECT_EQ(memory.discard(0, 0), EINVAL);
	EXPECT_EQ(memory.populate(kMiB - kPage, 2 * kPage), EINVAL);
	EXPECT_THROW(memory.resident_bytes(kMiB, 1), std::out_of_range);
}

INSTANTIATE_TEST_SUITE_P(Backings, GuestMemoryBacking,
			 ::testing::Values(PageBacking::kSmallPages,
					   PageBacking::kTransparentHugePages),
			 [](const auto& info) {
				 return info.param == PageBacking::kSmallPages ? "SmallPages"
									       : "Thp";
			 });

// The guards are what turn a device's stray access just outside RAM into an immediate,
// visible crash instead of silent corruption of host memory: prove they are there.
TEST(GuestMemoryDeathTest, BytesJustOutsideRamAreInaccessible)
{
	GTEST_FLAG_SET(death_test_style, "threadsafe");
	GuestMemory memory({.size_bytes = 64 * 1024});
	volatile uint8_t* base = memory.translate(0, 1);
	EXPECT_DEATH(base[-1] = 1, "");
	EXPECT_DEATH(base[64 * 1024] = 1, "");
	EXPECT_DEATH((void)base[64 * 1024 + GuestMemory::kGuardBytes - 1], "");
}

} // namespace
} // namespace vbsim
