// SPDX-License-Identifier: GPL-2.0
//
// vb_vring_need_event: "notify when the index moved past event_idx", i.e. event_idx in
// [old, new) modulo 2^16. Both ends of every ring decide notifications with it.
#include <gtest/gtest.h>

#include "vballoon/spec/virtio_ring.h"

namespace
{

bool need_event(uint16_t event_idx, uint16_t new_idx, uint16_t old_idx)
{
	return vb_vring_need_event(event_idx, new_idx, old_idx) != 0;
}

TEST(NeedEvent, FiresWhenTheEventIndexWasCrossed)
{
	EXPECT_TRUE(need_event(0, 1, 0));
	EXPECT_TRUE(need_event(5, 6, 5));
	EXPECT_TRUE(need_event(5, 10, 3)); // somewhere inside [3, 10)
	EXPECT_TRUE(need_event(3, 10, 3)); // the first index of the batch
	EXPECT_TRUE(need_event(9, 10, 3)); // the last index of the batch
}

TEST(NeedEvent, StaysQuietOutsideTheBatch)
{
	EXPECT_FALSE(need_event(10, 10, 3)); // not yet reached
	EXPECT_FALSE(need_event(2, 10, 3));  // already passed before this batch
	EXPECT_FALSE(need_event(100, 10, 3));
	EXPECT_FALSE(need_event(7, 7, 7)); // nothing moved
}

TEST(NeedEvent, HandlesWraparoundOfTheIndex)
{
	// Batch [65534, 2) crosses 65535 -> 0.
	EXPECT_TRUE(need_event(65534, 2, 65534));
	EXPECT_TRUE(need_event(65535, 2, 65534));
	EXPECT_TRUE(need_event(0, 2, 65534));
	EXPECT_TRUE(need_event(1, 2, 65534));
	EXPECT_FALSE(need_event(2, 2, 65534));
	EXPECT_FALSE(need_event(65533, 2, 65534));
	// A full lap of 2^16 - 1 entries.
	EXPECT_TRUE(need_event(12345, 9, 10));
	EXPECT_FALSE(need_event(9, 9, 10));
}

TEST(NeedEvent, MatchesTheIntervalDefinitionExhaustivelyForSmallBatches)
{
	// Brute force against the definition for every old index and batches up to 4 around
	// the wrap point.
	for (uint32_t old_base = 65530; old_base < 65536 + 6; ++old_base) {
		const uint16_t old_idx = static_cast<uint16_t>(old_base);
		for (uint16_t batch = 0; batch <= 4; ++batch) {
			const uint16_t new_idx = static_cast<uint16_t>(old_idx + batch);
			for (uint16_t offset = 0; offset < 8; ++offset) {
				const uint16_t event = static_cast<uint16_t>(old_idx - 2 + offset);
				const uint16_t distance = static_cast<uint16_t>(event - old_idx);
				EXPECT_EQ(need_event(event, new_idx, old_idx), distance < batch)
					<< "event " << event << " new " << new_idx << " old "
					<< old_idx;
			}
		}
	}
}

} // namespace
