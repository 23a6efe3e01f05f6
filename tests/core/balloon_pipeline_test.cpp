// SPDX-License-Identifier: GPL-2.0
//
// The pipelined inflate: a step goes to the host batch by batch, each batch on the ring as
// soon as it is allocated, the lock let go while the guest allocates the next one. Pages
// still join the balloon only once acknowledged, never-sent pages go back, lost ones stay
// until a reset, and a deflate from the OOM notifier or a migration between two batches
// neither waits for the inflate nor disturbs it.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

#include "core_guest.h"

namespace vbtest {
namespace {

constexpr int kInflate = static_cast<int>(vb::QueueKind::kInflate);
using Core = vb::Balloon<FakeOs>;
// PFN arrays and order-0 pages: one batch is one message of 256 pages, one step four.
constexpr uint64_t kBatch = Core::kWirePagesPerMessage;
constexpr uint64_t kStep = Core::kWirePagesPerStep;

uint64_t pages_of(const std::vector<Event>& events)
{
	uint64_t pages = 0;
	for (const Event& e : events)
		pages += e.count;
	return pages;
}

// Replays the event log: every page inserted into the balloon list was in an inflate
// message the device had returned before. Returns the pages inserted.
uint64_t expect_inserted_only_after_ack(const FakeOs& os)
{
	std::map<const void*, std::vector<uint32_t>> on_ring; // token -> wire PFNs in flight
	std::set<uint64_t> acknowledged;
	uint64_t inserted = 0;
	for (const Event& e : os.events) {
		if (e.kind == Event::kAdd && e.queue == vb::QueueKind::kInflate)
			on_ring[e.token] = e.wire_pfns;
		if (e.kind == Event::kAck && e.queue == vb::QueueKind::kInflate) {
			auto message = on_ring.find(e.token);
			if (message == on_ring.end()) {
				ADD_FAILURE() << "an ack for a buffer not on the ring";
				continue;
			}
			acknowledged.insert(message->second.begin(), message->second.end());
			on_ring.erase(message);
		}
		if (e.kind == Event::kInsert) {
			for (uint64_t pfn = e.first_pfn; pfn < e.first_pfn + e.count; pfn++)
				EXPECT_EQ(acknowledged.erase(pfn), 1u) << "page " << pfn << " joined the balloon unacknowledged";
			inserted += e.count;
		}
	}
	return inserted;
}

TEST(BalloonPipeline, MessagesGoOutBeforeTheStepIsAllocated)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(0);
	guest.set_target(kStep);
	ASSERT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kMoreWork);

	// Allocations and messages interleave: batch n is on the ring (and kicked) before
	// the first page of batch n + 1 is allocated.
	size_t allocated = 0, sent_batches = 0;
	for (const Event& e : guest.os.events) {
		if (e.kind == Event::kAlloc) {
			EXPECT_EQ(allocated / kBatch, sent_batches)
				<< "page " << allocated << " allocated before batch " << sent_batches << " went out";
			allocated++;
		}
		if (e.kind == Event::kKick && e.queue == vb::QueueKind::kInflate)
			sent_batches = allocated / kBatch;
	}
	EXPECT_EQ(allocated, kStep);
	size_t inflate_kicks = 0;
	for (const Event& e : guest.os.events_of(Event::kKick))
		inflate_kicks += e.queue == vb::QueueKind::kInflate;
	EXPECT_EQ(inflate_kicks, kStep / kBatch) << "a kick per batch";
	EXPECT_EQ(expect_inserted_only_after_ack(guest.os), kStep);
	expect_accounted(guest, kStep);
}

// The device finishes each request while the guest allocates the next batch: acknowledged
// pages join the balloon at once, while later batches are still in flight.
TEST(BalloonPipeline, AcknowledgedBatchesJoinTheBalloonWhileLaterOnesAreAllocated)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(0);
	guest.os.device_works_alongside = true;
	std::vector<size_t> listed_during_step;
	guest.os.after_alloc = [&] { listed_during_step.push_back(guest.os.balloon_list.size()); };
	guest.set_target(kStep);
	ASSERT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kMoreWork);

	ASSERT_EQ(listed_during_step.size(), kStep);
	// While batch n is allocated, batches before n - 1 may be on the list already.
	EXPECT_EQ(listed_during_step.front(), 0u);
	EXPECT_EQ(listed_during_step.back(), 2 * kBatch) << "two batches kept while the last is allocated";
	EXPECT_EQ(expect_inserted_only_after_ack(guest.os), kStep);
	expect_accounted(guest, kStep);
}

TEST(BalloonPipeline, AllocationFailureMidStepSendsWhatWasAllocatedAndStalls)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(0);
	guest.os.allocations_before_failure = static_cast<int>(kBatch + 44);
	guest.set_target(kStep);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	EXPECT_EQ(guest.balloon.counters().alloc_failures.get(), 1u);
	EXPECT_EQ(sent_pfns(guest.os, vb::QueueKind::kInflate).size(), kBatch + 44);
	EXPECT_TRUE(guest.os.events_of(Event::kFree).empty());
	EXPECT_EQ(expect_inserted_only_after_ack(guest.os), kBatch + 44);
	expect_accounted(guest, kBatch + 44);

	guest.os.fail_allocations = false;
	guest.os.allocations_before_failure = -1;
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	expect_accounted(guest, kStep);
}

// The queue takes two batches, then refuses: those two are acknowledged and kept, the
// third (allocated, never sent) goes back to the guest, the fourth is never allocated.
TEST(BalloonPipeline, AQueueRefusingMidStepGivesBackExactlyWhatWasNeverSent)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(0);
	guest.os.inflate_adds_before_refusal = 2;
	guest.set_target(kStep);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);

	const uint64_t allocated = pages_of(guest.os.events_of(Event::kAlloc));
	const uint64_t freed = pages_of(guest.os.events_of(Event::kFree));
	const uint64_t sent = sent_pfns(guest.os, vb::QueueKind::kInflate).size();
	EXPECT_EQ(sent, 2 * kBatch);
	EXPECT_EQ(allocated, 3 * kBatch) << "no batch is allocated once the queue refused";
	EXPECT_EQ(freed, allocated - sent) << "exactly the pages never sent go back";
	EXPECT_EQ(guest.balloon.counters().queue_failures.get(), 1u);
	EXPECT_EQ(expect_inserted_only_after_ack(guest.os), 2 * kBatch);
	expect_accounted(guest, 2 * kBatch);

	guest.os.refuse[kInflate] = false;
	guest.os.inflate_adds_before_refusal = -1;
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	expect_accounted(guest, kStep);
}

// One acknowledgement, then the device goes away with the rest of the step in flight: the
// lost batches stay in the balloon until the reset, and nothing more is allocated.
TEST(BalloonPipeline, ADeviceGoneMidPipelineLosesNothing)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(0);
	guest.os.acks_before_gone = 1;
	guest.set_target(2 * kStep);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);

	EXPECT_EQ(guest.os.events_of(Event::kAck).size(), 1u);
	EXPECT_TRUE(guest.os.events_of(Event::kFree).empty()) << "a page the host may hold went back";
	const uint64_t sent = sent_pfns(guest.os, vb::QueueKind::kInflate).size();
	EXPECT_EQ(sent, pages_of(guest.os.events_of(Event::kAlloc)));
	EXPECT_LE(sent, kStep) << "a step stops at the first ack it never gets";
	expect_accounted(guest, sent);

	guest.balloon.release_after_reset();
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 0u);
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
	EXPECT_EQ(guest.os.managed_pages, 0);
}

// The OOM notifier runs between two batches (the inflate holds no lock while it allocates):
// it deflates acknowledged pages only, on a message slot the inflate does not hold, and
// the inflate goes on undisturbed.
TEST(BalloonPipeline, AnOomDeflateBetweenBatchesTakesOnlyAcknowledgedPages)
{
	Guest guest(kWithDeflateOnOom);
	guest.balloon.set_max_chunk_order(0);
	guest.os.device_works_alongside = true;
	guest.set_target(kStep);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.os.events.clear();

	std::set<uint64_t> listed_before_oom;
	uint64_t oom_freed = 0;
	size_t allocations = 0;
	guest.os.after_alloc = [&] {
		// Mid-way through the third batch: two batches in flight or acknowledged.
		if (++allocations != 2 * kBatch + kBatch / 2)
			return;
		listed_before_oom.insert(guest.os.balloon_list.begin(), guest.os.balloon_list.end());
		oom_freed = guest.balloon.deflate_for_oom();
	};
	guest.set_target(2 * kStep);
	ASSERT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kMoreWork);

	EXPECT_EQ(oom_freed, Core::kOomDeflateWirePages);
	const auto deflated = sent_pfns(guest.os, vb::QueueKind::kDeflate);
	EXPECT_EQ(deflated.size(), Core::kOomDeflateWirePages);
	for (uint64_t pfn : deflated)
		EXPECT_TRUE(listed_before_oom.count(pfn)) << "the OOM deflate named page " << pfn << " not yet acknowledged";
	// Its message used a slot no inflate message was using at the time.
	std::set<const void*> inflate_tokens_in_flight;
	for (const Event& e : guest.os.events) {
		if (e.kind == Event::kAdd && e.queue == vb::QueueKind::kInflate)
			inflate_tokens_in_flight.insert(e.token);
		if (e.kind == Event::kAck && e.queue == vb::QueueKind::kInflate)
			inflate_tokens_in_flight.erase(e.token);
		if (e.kind == Event::kAdd && e.queue == vb::QueueKind::kDeflate) {
			EXPECT_FALSE(inflate_tokens_in_flight.count(e.token)) << "a message slot used twice";
		}
	}
	EXPECT_EQ(expect_inserted_only_after_ack(guest.os), kStep);
	expect_accounted(guest, 2 * kStep - Core::kOomDeflateWirePages);
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	expect_accounted(guest, 2 * kStep);
}

// Compaction between two batches: inflateq is the inflate's, so the migration is refused
// (compaction retries) and changes nothing; after the step it goes through.
TEST(BalloonPipeline, MigrationIsRefusedWhileTheInflateHasMessagesInFlight)
{
	Guest guest(kWithMustTellHost);
	guest.balloon.set_max_chunk_order(0);
	guest.set_target(kBatch);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	const uint64_t old_pfn = guest.os.balloon_list.front();
	auto spare = guest.os.allocator.allocate(0);
	ASSERT_TRUE(spare);

	bool migrated_mid_step = true;
	size_t allocations = 0;
	guest.os.after_alloc = [&] {
		if (++allocations == kBatch + 1) // the second batch: the first is in flight
			migrated_mid_step = guest.balloon.migrate_page(old_pfn, *spare);
	};
	guest.set_target(kBatch + kStep);
	ASSERT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kMoreWork);
	EXPECT_FALSE(migrated_mid_step);
	EXPECT_EQ(guest.os.allocator.state(old_pfn), vbsim::BuddyAllocator::FrameState::kBalloon);
	EXPECT_EQ(guest.os.allocator.state(*spare), vbsim::BuddyAllocator::FrameState::kUsed);
	EXPECT_EQ(guest.balloon.counters().migrations.get(), 0u);
	EXPECT_EQ(guest.balloon.counters().foreign_used_buffers.get(), 0u);

	guest.os.after_alloc = nullptr;
	EXPECT_TRUE(guest.balloon.migrate_page(old_pfn, *spare));
	EXPECT_EQ(guest.balloon.counters().migrations.get(), 1u);
	EXPECT_TRUE(guest.os.allocator.free_run(old_pfn, 1)); // compaction frees the old page
	expect_accounted(guest, kBatch + kStep);
}

// The host lowers the target while a step runs: the step stops after the batch it is
// allocating, without overshooting by the rest of the step (and then deflating it back).
TEST(BalloonPipeline, ATargetLoweredMidStepEndsTheStepAtTheNextBatch)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(0);
	size_t allocations = 0;
	guest.os.after_alloc = [&] {
		if (++allocations == kBatch + 10)
			guest.set_target(2 * kBatch);
	};
	guest.set_target(kStep);
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kMoreWork);
	EXPECT_EQ(pages_of(guest.os.events_of(Event::kAlloc)), 2 * kBatch);
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_TRUE(sent_pfns(guest.os, vb::QueueKind::kDeflate).empty());
	expect_accounted(guest, 2 * kBatch);
}

// Chunked, with 2 MiB blocks: batches never make the blocks smaller, and each batch is a
// message of its own.
TEST(BalloonPipeline, ChunkedBatchesKeepTheLargestBlocks)
{
	Guest guest(kStandard | VB_FEATURE(VB_F_X_CHUNKED));
	guest.os.chunked = true;
	guest.set_target(kGuestPages / 2);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	for (const Event& e : guest.os.events_of(Event::kAlloc))
		EXPECT_EQ(e.count, 512u);
	EXPECT_EQ(expect_inserted_only_after_ack(guest.os), kGuestPages / 2);
	expect_accounted(guest, kGuestPages / 2);
}

} // namespace
} // namespace vbtest
