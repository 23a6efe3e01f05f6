// SPDX-License-Identifier: GPL-2.0
//
// The host's use of free page hints (FreePageTracker), event by event: a hint clears pages
// from the bitmap of pages still to send only while the round it belongs to is the host's
// current one. Once the host stopped the round (its bitmap sync has folded in whatever the
// guest wrote since), or for another round's id, a hint must change nothing: the guest may
// have written those pages since the id was issued (BAL-DEV-FPH-05).
#include <gtest/gtest.h>

#include "migration/free_page_tracker.h"

namespace vbsim::migration
{
namespace
{

constexpr uint64_t kPage = 4096;
constexpr uint64_t kPages = 1024;

struct Host {
	Host() : to_send(kPages), tracker(to_send, kPages * kPage) { to_send.set_all(); }

	// The host writes a new id; the guest echoes it (the order QEMU usually sees).
	uint32_t start_round(uint32_t cmd_id)
	{
		tracker.host_starting_round();
		tracker.host_started_round(cmd_id);
		tracker.hint_round_started(cmd_id);
		return cmd_id;
	}

	PageBitmap to_send;
	FreePageTracker tracker;
};

TEST(FreePageTracker, HintsOfTheCurrentRoundClearPagesStillToSend)
{
	Host host;
	uint32_t id = host.start_round(5);
	host.tracker.pages_hinted(id, 16 * kPage, 8 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages - 8);
	EXPECT_EQ(host.tracker.pages_cleared_total(), 8u);
	EXPECT_EQ(host.tracker.hints_ignored(), 0u);
}

TEST(FreePageTracker, AnEchoBeforeTheHostLearntTheIdStillCounts)
{
	Host host;
	host.tracker.host_starting_round();
	host.tracker.hint_round_started(9); // the guest was quicker than the host's bookkeeping
	host.tracker.host_started_round(9);
	host.tracker.pages_hinted(9, 0, 4 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages - 4);
}

TEST(FreePageTracker, HintsAfterTheHostStoppedTheRoundChangeNothing)
{
	Host host;
	uint32_t id = host.start_round(5);
	host.tracker.host_stopped_round();
	// The guest has not seen STOP yet and goes on hinting pages it may write meanwhile.
	host.tracker.pages_hinted(id, 0, 64 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages);
	EXPECT_EQ(host.tracker.hints_ignored(), 64u);
	// The guest's STOP echo changes nothing either.
	host.tracker.hint_round_stopped(id);
	host.tracker.pages_hinted(id, 0, 64 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages);
	EXPECT_EQ(host.tracker.pages_hinted_after_stop(), 128u);
}

// What a device that missed the stop could have applied: the stopped round's own hints
// after the host's STOP or the guest's, nothing else.
TEST(FreePageTracker, CountsTheHintsOfARoundThatArriveAfterItWasStopped)
{
	Host host;
	const uint32_t first = host.start_round(5);
	host.tracker.pages_hinted(first, 0, 8 * kPage);
	EXPECT_EQ(host.tracker.pages_hinted_after_stop(), 0u);
	host.tracker.host_stopped_round();
	host.tracker.pages_hinted(first, 8 * kPage, 4 * kPage);
	EXPECT_EQ(host.tracker.pages_hinted_after_stop(), 4u);

	const uint32_t second = host.start_round(6);
	host.tracker.pages_hinted(first, 16 * kPage, 2 * kPage); // another round's id
	host.tracker.pages_hinted(second, 32 * kPage, 2 * kPage);
	EXPECT_EQ(host.tracker.pages_hinted_after_stop(), 4u);
	host.tracker.hint_round_stopped(second); // the guest closed its round
	host.tracker.pages_hinted(second, 64 * kPage, 1 * kPage);
	EXPECT_EQ(host.tracker.pages_hinted_after_stop(), 5u);
	EXPECT_EQ(host.to_send.count(), kPages - 8 - 2);
}

TEST(FreePageTracker, HintsOfAnEarlierRoundChangeNothing)
{
	Host host;
	uint32_t old_id = host.start_round(5);
	host.tracker.host_stopped_round();
	uint32_t id = host.start_round(6);
	host.tracker.pages_hinted(old_id, 0, 32 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages);
	// The stale id's late echo does not reopen it.
	host.tracker.hint_round_started(old_id);
	host.tracker.pages_hinted(old_id, 0, 32 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages);
	host.tracker.pages_hinted(id, 0, 32 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages - 32);
}

TEST(FreePageTracker, HintsBeforeTheGuestEchoedTheIdChangeNothing)
{
	Host host;
	host.tracker.host_starting_round();
	host.tracker.host_started_round(7);
	host.tracker.pages_hinted(7, 0, 8 * kPage);
	EXPECT_EQ(host.to_send.count(), kPages);
}

TEST(FreePageTracker, HintsOutsideGuestRamOrUnalignedAreIgnored)
{
	Host host;
	uint32_t id = host.start_round(5);
	host.tracker.pages_hinted(id, kPages * kPage, kPage);          // just past the end
	host.tracker.pages_hinted(id, (kPages - 1) * kPage, 2 * kPage); // straddles the end
	host.tracker.pages_hinted(id, ~0ull - kPage + 1, kPage);        // would wrap
	host.tracker.pages_hinted(id, 100, kPage);                      // not page aligned
	EXPECT_EQ(host.to_send.count(), kPages);
	EXPECT_EQ(host.tracker.pages_cleared_total(), 0u);
}

} // namespace
} // namespace vbsim::migration
