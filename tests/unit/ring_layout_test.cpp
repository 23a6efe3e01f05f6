// SPDX-License-Identifier: GPL-2.0
//
// The split ring layout (virtio 1.x 2.7): the offsets both ends of our rings use must be
// the spec's, or a real device (or driver) would read garbage.
#include <gtest/gtest.h>

#include "memory/guest_memory.h"
#include "virtqueue/ring_layout.h"

namespace vbsim
{
namespace
{

uint64_t align4(uint64_t value)
{
	return (value + 3) & ~uint64_t{3};
}

class RingLayoutBySize : public ::testing::TestWithParam<uint16_t>
{
};

TEST_P(RingLayoutBySize, ContiguousAreasFollowTheSpec)
{
	const uint16_t size = GetParam();
	const uint64_t base = 0x10000;
	const QueueAreas areas = contiguous_queue_areas(base, size);

	EXPECT_EQ(areas.desc_gpa, base);
	EXPECT_EQ(areas.avail_gpa, base + 16ull * size);
	// Available ring: flags, idx, ring[size], used_event = 6 + 2 * size bytes.
	EXPECT_EQ(areas.used_gpa, base + align4(16ull * size + 6 + 2ull * size));
}

TEST_P(RingLayoutBySize, FieldOffsetsFollowTheSpec)
{
	const uint16_t size = GetParam();
	const QueueAreas areas = contiguous_queue_areas(0, size);
	const RingLayout layout(areas, size);

	EXPECT_EQ(layout.descriptor(0), 0u);
	EXPECT_EQ(layout.descriptor(size - 1), 16ull * (size - 1));
	EXPECT_EQ(layout.avail_flags(), areas.avail_gpa);
	EXPECT_EQ(layout.avail_idx(), areas.avail_gpa + 2);
	EXPECT_EQ(layout.avail_slot(0), areas.avail_gpa + 4);
	// Ring positions wrap at the queue size, whatever the free-running index.
	EXPECT_EQ(layout.avail_slot(size), areas.avail_gpa + 4);
	EXPECT_EQ(layout.avail_slot(static_cast<uint16_t>(size + 1)), layout.avail_slot(1));
	EXPECT_EQ(layout.used_event(), areas.avail_gpa + 4 + 2ull * size);
	EXPECT_EQ(layout.used_flags(), areas.used_gpa);
	EXPECT_EQ(layout.used_idx(), areas.used_gpa + 2);
	EXPECT_EQ(layout.used_slot(0), areas.used_gpa + 4);
	EXPECT_EQ(layout.used_slot(static_cast<uint16_t>(size - 1)),
		  areas.used_gpa + 4 + 8ull * (size - 1));
	EXPECT_EQ(layout.avail_event(), areas.used_gpa + 4 + 8ull * size);
	// The last field ends exactly where the spec's area size says.
	EXPECT_EQ(layout.avail_event() + 2, areas.used_gpa + vb_vring_used_bytes(size));
	EXPECT_EQ(layout.used_event() + 2, areas.avail_gpa + vb_vring_avail_bytes(size));
}

INSTANTIATE_TEST_SUITE_P(PowersOfTwo, RingLayoutBySize,
			 ::testing::Values(uint16_t{1}, uint16_t{2}, uint16_t{8}, uint16_t{128},
					   uint16_t{256}, uint16_t{1024}, uint16_t{32768}));

TEST(RingLayout, Size256MatchesWorkedExample)
{
	const QueueAreas areas = contiguous_queue_areas(0, 256);
	EXPECT_EQ(areas.avail_gpa, 4096u);
	EXPECT_EQ(areas.used_gpa, 4616u); // align4(4096 + 6 + 512)
	EXPECT_EQ(vb_vring_total_bytes(256, VB_VRING_USED_ALIGN), 4616u + 6 + 8 * 256);
}

TEST(RingLayout, LegacyAlignmentPutsUsedRingOnNextPage)
{
	// Linux's vring_size(256, 4096) is 10246: the used ring at 8192.
	const QueueAreas areas = contiguous_queue_areas(0, 256, VB_VRING_LEGACY_ALIGN);
	EXPECT_EQ(areas.used_gpa, 8192u);
	EXPECT_EQ(vb_vring_total_bytes(256, VB_VRING_LEGACY_ALIGN), 10246u);
}

class QueueAreaCheck : public ::testing::Test
{
protected:
	GuestMemory memory{{.size_bytes = 64 * 1024}};
};

TEST_F(QueueAreaCheck, AcceptsAValidQueue)
{
	EXPECT_EQ(check_queue_areas(memory, contiguous_queue_areas(0, 256), 256),
		  QueueAreaError::kNone);
}

TEST_F(QueueAreaCheck, RefusesSizesThatAreNotPowersOfTwo)
{
	const QueueAreas areas = contiguous_queue_areas(0, 8);
	EXPECT_EQ(check_queue_areas(memory, areas, 0), QueueAreaError::kSizeInvalid);
	EXPECT_EQ(check_queue_areas(memory, areas, 6), QueueAreaError::kSizeInvalid);
	EXPECT_EQ(check_queue_areas(memory, areas, 65536), QueueAreaError::kSizeInvalid);
}

TEST_F(QueueAreaCheck, RefusesMisalignedAreas)
{
	QueueAreas areas = contiguous_queue_areas(0, 8);
	areas.desc_gpa += 8; // descriptors need 16
	EXPECT_EQ(check_queue_areas(memory, areas, 8), QueueAreaError::kMisaligned);
	areas = contiguous_queue_areas(0, 8);
	areas.avail_gpa += 1; // avail needs 2
	EXPECT_EQ(check_queue_areas(memory, areas, 8), QueueAreaError::kMisaligned);
	areas = contiguous_queue_areas(0, 8);
	areas.used_gpa += 2; // used needs 4
	EXPECT_EQ(check_queue_areas(memory, areas, 8), QueueAreaError::kMisaligned);
}

TEST_F(QueueAreaCheck, RefusesAreasReachingPastRamIncludingEventFields)
{
	// The used ring fits, but its trailing avail_event would be past the end.
	QueueAreas areas = contiguous_queue_areas(0, 8);
	areas.used_gpa = memory.size() - (4 + 8 * 8);
	EXPECT_EQ(check_queue_areas(memory, areas, 8), QueueAreaError::kOutsideRam);
	// An address so large that gpa + length wraps around.
	areas = contiguous_queue_areas(0, 8);
	areas.desc_gpa = ~uint64_t{0} - 15;
	EXPECT_EQ(check_queue_areas(memory, areas, 8), QueueAreaError::kOutsideRam);
}

} // namespace
} // namespace vbsim
