// SPDX-License-Identifier: GPL-2.0
//
// The core against an inline device: exact counts and exact ordering.
#include <gtest/gtest.h>

#include <algorithm>
#include <tuple>
#include <map>
#include <set>

#include "core_guest.h"

namespace vbtest {
namespace {

TEST(BalloonCore, InflatesExactlyToTargetInMessagesOfAtMost256Pfns)
{
	Guest guest(kWithMustTellHost);
	guest.set_target(10000);

	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 10000u);
	EXPECT_EQ(guest.actual(), 10000u);
	EXPECT_EQ(guest.os.allocator.counts().balloon, 10000u);
	EXPECT_EQ(guest.os.balloon_list.size(), 10000u);

	std::set<uint64_t> sent = sent_pfns(guest.os, vb::QueueKind::kInflate);
	std::set<uint64_t> held(guest.os.balloon_list.begin(), guest.os.balloon_list.end());
	EXPECT_EQ(sent, held) << "the host was told of exactly the pages the balloon holds";
	for (const Event& e : guest.os.events_of(Event::kAdd))
		EXPECT_LE(e.wire_pfns.size(), 256u);
	EXPECT_EQ(guest.balloon.counters().inflate_messages.get(), (10000u + 255) / 256);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

TEST(BalloonCore, ChunkedAndPageAtATimeAllocationGiveTheSameGuestVisibleResult)
{
	for (unsigned order : {0u, 9u}) {
		Guest guest(kStandard);
		guest.balloon.set_max_chunk_order(order);
		guest.set_target(5000);
		EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
		EXPECT_EQ(guest.balloon.balloon_wire_pages(), 5000u) << "order " << order;
		EXPECT_EQ(guest.os.allocator.counts().balloon, 5000u);
		EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages - 5000u);
		std::set<uint64_t> held(guest.os.balloon_list.begin(), guest.os.balloon_list.end());
		EXPECT_EQ(sent_pfns(guest.os, vb::QueueKind::kInflate), held);

		guest.set_target(0);
		EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
		EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
		EXPECT_EQ(guest.os.allocator.check_consistency(), "");
	}
}

TEST(BalloonCore, LargeChunksAreTakenFirstAndSentInAscendingRuns)
{
	Guest guest(kStandard);
	guest.balloon.set_max_chunk_order(9);
	guest.set_target(2048);
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);

	auto allocs = guest.os.events_of(Event::kAlloc);
	ASSERT_EQ(allocs.size(), 4u) << "four 2 MiB blocks make 8 MiB";
	for (const Event& e : allocs)
		EXPECT_EQ(e.count, 512u);
	for (const Event& e : guest.os.events_of(Event::kAdd)) {
		if (e.queue != vb::QueueKind::kInflate)
			continue;
		for (size_t i = 1; i < e.wire_pfns.size(); i++)
			EXPECT_EQ(e.wire_pfns[i], e.wire_pfns[i - 1] + 1) << "chunk-ordered PFN array";
	}
}

TEST(BalloonCore, DeflateFreesEachPageOnlyAfterTheHostAcknowledgedIt)
{
	Guest guest(kWithMustTellHost);
	guest.set_target(3000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.os.events.clear();

	guest.set_target(1000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 1000u);

	// Replay the log: a page may be freed only once the message carrying it is acked.
	std::map<const void*, std::vector<uint32_t>> in_flight;
	std::set<uint64_t> acked;
	uint64_t freed = 0;
	for (const Event& e : guest.os.events) {
		if (e.kind == Event::kAdd && e.queue == vb::QueueKind::kDeflate)
			in_flight[e.token] = e.wire_pfns;
		if (e.kind == Event::kAck && e.queue == vb::QueueKind::kDeflate) {
			ASSERT_TRUE(in_flight.count(e.token));
			acked.insert(in_flight[e.token].begin(), in_flight[e.token].end());
			in_flight.erase(e.token);
		}
		if (e.kind == Event::kFree) {
			for (uint64_t pfn = e.first_pfn; pfn < e.first_pfn + e.count; pfn++)
				EXPECT_TRUE(acked.count(pfn)) << "page " << pfn << " freed before its deflate ack";
			freed += e.count;
		}
	}
	EXPECT_EQ(freed, 2000u);
	EXPECT_EQ(guest.os.allocator.counts().balloon, 1000u);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

TEST(BalloonCore, NeverDeflatesAPageBeforeItsInflateWasAcknowledged)
{
	Guest guest(kWithMustTellHost);
	guest.set_target(600);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.set_target(0);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);

	std::map<const void*, std::vector<uint32_t>> in_flight;
	std::set<uint64_t> inflate_acked;
	for (const Event& e : guest.os.events) {
		if (e.kind == Event::kAdd && e.queue == vb::QueueKind::kInflate)
			in_flight[e.token] = e.wire_pfns;
		if (e.kind == Event::kAck && e.queue == vb::QueueKind::kInflate) {
			inflate_acked.insert(in_flight[e.token].begin(), in_flight[e.token].end());
			in_flight.erase(e.token);
		}
		if (e.kind == Event::kAdd && e.queue == vb::QueueKind::kDeflate) {
			for (uint32_t pfn : e.wire_pfns)
				EXPECT_TRUE(inflate_acked.count(pfn)) << pfn;
		}
	}
}

TEST(BalloonCore, AbsurdTargetIsPursuedOnlyWhileAllocationsSucceed)
{
	Guest guest(kStandard);
	guest.set_target(0xffffffffu);

	EXPECT_EQ(guest.settle(), vb::StepResult::kStalled);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), kGuestPages) << "every free page, and not one more";
	EXPECT_EQ(guest.os.allocator.counts().free, 0u);
	EXPECT_EQ(guest.actual(), kGuestPages);
	EXPECT_GE(guest.balloon.counters().alloc_failures.get(), 1u);

	// Asking again changes nothing and loses nothing.
	EXPECT_EQ(guest.balloon.adjust_towards_target(), vb::StepResult::kStalled);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), kGuestPages);

	guest.set_target(0);
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

TEST(BalloonCore, TargetBeyondWirePfnsStillStallsCleanly)
{
	// A page beyond 16 TiB cannot be named by a 32-bit PFN: it goes straight back.
	FakeOs os(0x100000000ull - 8, 64);
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon(os, kStandard, {}, workspace);
	ASSERT_TRUE(balloon.prepare());
	os.config[0] = 64;
	vb::StepResult result;
	while ((result = balloon.adjust_towards_target()) == vb::StepResult::kMoreWork) {
	}
	EXPECT_EQ(result, vb::StepResult::kStalled);
	EXPECT_EQ(balloon.balloon_wire_pages(), 8u);
	EXPECT_GE(balloon.counters().unreachable_wire_pages.get(), 1u);
	EXPECT_EQ(os.allocator.counts().balloon, 8u);
	EXPECT_EQ(os.allocator.counts().used, 0u) << "no page lost";
}

TEST(BalloonCore, DeflateOnOomFreesAtMost256PagesAndAllocatesNothing)
{
	Guest guest(kWithDeflateOnOom);
	guest.set_target(2000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	size_t before = guest.os.events.size();

	EXPECT_EQ(guest.balloon.deflate_for_oom(), 256u);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 1744u);
	EXPECT_EQ(guest.actual(), 1744u);
	for (size_t i = before; i < guest.os.events.size(); i++) {
		EXPECT_NE(guest.os.events[i].kind, Event::kAlloc);
		EXPECT_NE(guest.os.events[i].kind, Event::kAllocFail);
	}
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages - 1744u);

	// Drained to the last page, then nothing more to give.
	uint64_t total = 256;
	uint64_t freed;
	while ((freed = guest.balloon.deflate_for_oom()) != 0)
		total += freed;
	EXPECT_EQ(total, 2000u);
	EXPECT_EQ(guest.balloon.counters().oom_wire_pages_freed.get(), 2000u);
}

TEST(BalloonCore, DeflateOnOomDoesNothingUnlessNegotiated)
{
	Guest guest(kStandard);
	guest.set_target(1000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.deflate_for_oom(), 0u);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 1000u);
}

TEST(BalloonCore, ManagedMemoryShrinksOnlyWithoutDeflateOnOom)
{
	Guest plain(kStandard);
	plain.set_target(1000);
	ASSERT_EQ(plain.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(plain.os.managed_pages, -1000);
	plain.set_target(400);
	ASSERT_EQ(plain.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(plain.os.managed_pages, -400);

	Guest oom(kWithDeflateOnOom);
	oom.set_target(1000);
	ASSERT_EQ(oom.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(oom.os.managed_pages, 0);
}

TEST(BalloonCore, StatsCarryTheSameTagSubsetEveryTimeWithOneBufferOutstanding)
{
	FakeOs os(kFirstPfn, kGuestPages);
	os.stats.present_mask = (1u << VB_S_MEMFREE) | (1u << VB_S_MEMTOT) | (1u << VB_S_AVAIL);
	os.stats.value[VB_S_MEMFREE] = 111;
	os.stats.value[VB_S_MEMTOT] = 222;
	os.stats.value[VB_S_AVAIL] = 333;
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon(os, kStandard, {}, workspace);
	ASSERT_TRUE(balloon.prepare());
	ASSERT_EQ(os.events_of(Event::kKick).size(), 0u) << "statsq is notified only after DRIVER_OK";
	balloon.start();

	auto decode = [](const std::vector<uint8_t>& bytes) {
		std::map<uint16_t, uint64_t> out;
		EXPECT_EQ(bytes.size() % VB_STAT_ENTRY_BYTES, 0u);
		for (size_t at = 0; at + VB_STAT_ENTRY_BYTES <= bytes.size(); at += VB_STAT_ENTRY_BYTES) {
			uint16_t tag = bytes[at] | bytes[at + 1] << 8;
			uint64_t val = 0;
			for (int i = 7; i >= 0; i--)
				val = val << 8 | bytes[at + 2 + i];
			out[tag] = val;
		}
		return out;
	};
	auto primed = decode(os.last_stats);
	EXPECT_EQ(primed, (std::map<uint16_t, uint64_t>{{4, 111}, {5, 222}, {6, 333}}));

	os.stats.value[VB_S_MEMFREE] = 444;
	os.stats.present_mask &= ~(1u << VB_S_AVAIL); // the OS lost track of one value
	ASSERT_TRUE(os.request_stats());
	EXPECT_FALSE(os.request_stats()) << "only one buffer is ever outstanding";
	balloon.handle_stats_request();
	EXPECT_EQ(decode(os.last_stats), (std::map<uint16_t, uint64_t>{{4, 444}, {5, 222}, {6, 0}}));
	EXPECT_EQ(balloon.counters().stats_reports.get(), 1u);

	balloon.handle_stats_request(); // a spurious interrupt: nothing was returned
	EXPECT_EQ(balloon.counters().stats_reports.get(), 1u);
}

TEST(BalloonCore, StatsEntryIsTenPackedBytes)
{
	EXPECT_EQ(sizeof(vb_stat_entry), 10u);
	EXPECT_EQ(offsetof(vb_stat_entry, val), 2u);
}

TEST(BalloonCore, MigrationTellsTheHostOfTheNewPageBeforeReleasingTheOld)
{
	Guest guest(kWithMustTellHost);
	guest.set_target(16);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	uint64_t old_pfn = guest.os.balloon_list.front();
	auto spare = guest.os.allocator.allocate(0);
	ASSERT_TRUE(spare);
	guest.os.events.clear();

	ASSERT_TRUE(guest.balloon.migrate_page(old_pfn, *spare));
	auto adds = guest.os.events_of(Event::kAdd);
	ASSERT_EQ(adds.size(), 2u);
	EXPECT_EQ(adds[0].queue, vb::QueueKind::kInflate);
	EXPECT_EQ(adds[0].wire_pfns, std::vector<uint32_t>{static_cast<uint32_t>(*spare)});
	EXPECT_EQ(adds[1].queue, vb::QueueKind::kDeflate);
	EXPECT_EQ(adds[1].wire_pfns, std::vector<uint32_t>{static_cast<uint32_t>(old_pfn)});
	EXPECT_EQ(guest.os.allocator.state(*spare), vbsim::BuddyAllocator::FrameState::kBalloon);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 16u);

	guest.os.lock_held = true; // someone else holds the balloon lock
	EXPECT_FALSE(guest.balloon.migrate_page(*spare, old_pfn));
	guest.os.lock_held = false;
}

TEST(BalloonCore, ARingWithRoomForOneBufferStillCarriesEverything)
{
	Guest guest(kStandard);
	guest.os.queue_capacity = 1;
	guest.set_target(3000);
	EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 3000u);
	EXPECT_EQ(sent_pfns(guest.os, vb::QueueKind::kInflate).size(), 3000u);
}

TEST(BalloonCore, RoundsTargetUpToWholeGuestPages)
{
	// 64 KiB guest pages: 16 wire PFNs each.
	vb::GuestTraits traits;
	traits.page_shift = 16;
	FakeOs os(16, 1024);
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon(os, kStandard, traits, workspace);
	ASSERT_TRUE(balloon.prepare());
	os.config[0] = 33; // two pages and one 4 KiB unit
	vb::StepResult result;
	while ((result = balloon.adjust_towards_target()) == vb::StepResult::kMoreWork) {
	}
	EXPECT_EQ(result, vb::StepResult::kSettled);
	EXPECT_EQ(balloon.balloon_wire_pages(), 48u);
	EXPECT_EQ(os.allocator.counts().balloon, 3u);
	std::set<uint64_t> sent = sent_pfns(os, vb::QueueKind::kInflate);
	EXPECT_EQ(sent.size(), 48u);
	for (uint64_t pfn : sent)
		EXPECT_EQ(os.allocator.state(pfn / 16), vbsim::BuddyAllocator::FrameState::kBalloon);
}

TEST(BalloonCore, DeflateOnOomCountsWirePagesOnLargePages)
{
	// 64 KiB guest pages: the OOM deflate returns wire pages, as deflate() does, and the
	// OS converts them (the module's notifier: 256 wire pages are 16 of its pages).
	vb::GuestTraits traits;
	traits.page_shift = 16;
	Guest guest(kWithDeflateOnOom, traits);
	guest.set_target(1024);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.balloon.deflate_for_oom(), vb::Balloon<FakeOs>::kOomDeflateWirePages);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 1024u - 256u);
	EXPECT_EQ(guest.os.allocator.counts().balloon, (1024u - 256u) / 16);
	EXPECT_EQ(guest.balloon.counters().oom_wire_pages_freed.get(), 256u);
}

TEST(BalloonCore, PoisonValueIsWrittenBeforeDriverOkOnlyWhenNegotiated)
{
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = true;
	traits.free_page_pattern = 0xaaaaaaaa;
	FakeOs os(kFirstPfn, kGuestPages);
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon(os, kStandard | VB_FEATURE(VB_F_PAGE_POISON), traits,
				    workspace);
	ASSERT_TRUE(balloon.prepare());
	// prepare() is what the OS calls before it sets DRIVER_OK.
	EXPECT_EQ(os.config[VB_CONFIG_POISON_VAL_OFFSET / 4], 0xaaaaaaaau);

	Guest plain(kStandard);
	for (const Event& e : plain.os.events_of(Event::kConfigWrite))
		EXPECT_NE(e.first_pfn, VB_CONFIG_POISON_VAL_OFFSET) << "poison_val without PAGE_POISON";
}

// A device that kept `actual` across a reset (QEMU does, after a remove whose deflates it
// refused) hears from start() that the balloon is empty.
TEST(BalloonCore, StartWritesTheEmptyBalloonsActual)
{
	Guest guest(kStandard, {}, [](FakeOs& os) { os.config[VB_CONFIG_ACTUAL_OFFSET / 4] = 262144; });
	EXPECT_EQ(guest.actual(), 0u);
	EXPECT_EQ(guest.os.actual_writes_without_lock, 0u);
}

TEST(BalloonCore, PoisonValueNeverChangesAfterDriverOk)
{
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = true;
	traits.free_page_pattern = 0xaaaaaaaa;
	Guest guest(kStandard | VB_FEATURE(VB_F_PAGE_POISON), traits);
	size_t after_start = guest.os.events.size();
	guest.set_target(3000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	ASSERT_EQ(guest.balloon.deflate_for_oom(), 0u);
	guest.set_target(0);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	guest.balloon.release_all();
	for (size_t i = after_start; i < guest.os.events.size(); i++) {
		const Event& e = guest.os.events[i];
		if (e.kind == Event::kConfigWrite) {
			EXPECT_EQ(e.first_pfn, VB_CONFIG_ACTUAL_OFFSET) << "only actual is written";
		}
	}
}

TEST(BalloonCore, StatsBufferIsPrimedBeforeDriverOk)
{
	FakeOs os(kFirstPfn, kGuestPages);
	os.stats.present_mask = 1u << VB_S_MEMFREE;
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon(os, kStandard, {}, workspace);
	ASSERT_TRUE(balloon.prepare());
	auto& stats = os.queues[static_cast<int>(vb::QueueKind::kStats)];
	EXPECT_EQ(stats.pending.size(), 1u) << "one buffer on the statsq before DRIVER_OK";
	EXPECT_EQ(os.last_stats.size(), VB_STAT_ENTRY_BYTES);
}

TEST(BalloonCore, ActualIsWrittenOnlyAfterTheHostAcknowledgedTheChange)
{
	Guest guest(kWithMustTellHost);
	for (uint32_t target : {3000u, 1000u, 2500u, 0u}) {
		guest.os.events.clear();
		guest.set_target(target);
		ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
		// Replay: every write of `actual` reports pages whose requests are all acked, and
		// the last write reports the target.
		int in_flight = 0;
		uint32_t last_actual = 0;
		bool wrote = false;
		for (const Event& e : guest.os.events) {
			if (e.kind == Event::kAdd && e.queue != vb::QueueKind::kStats)
				in_flight++;
			if (e.kind == Event::kAck && e.queue != vb::QueueKind::kStats)
				in_flight--;
			if (e.kind == Event::kConfigWrite && e.first_pfn == VB_CONFIG_ACTUAL_OFFSET) {
				EXPECT_EQ(in_flight, 0) << "actual written with requests unacknowledged";
				last_actual = static_cast<uint32_t>(e.count);
				wrote = true;
			}
		}
		EXPECT_TRUE(wrote);
		EXPECT_EQ(last_actual, target);
	}
}

TEST(BalloonCore, AForeignBufferFromTheDeviceIsCountedNotTrusted)
{
	Guest guest(kStandard);
	static int stranger;
	guest.os.queues[static_cast<int>(vb::QueueKind::kStats)].used.push_back(&stranger);
	guest.balloon.handle_stats_request();
	EXPECT_EQ(guest.balloon.counters().foreign_used_buffers.get(), 1u);
	EXPECT_EQ(guest.balloon.counters().stats_reports.get(), 0u);
}

} // namespace
} // namespace vbtest

namespace vbtest {
namespace {

constexpr uint64_t kChunked = kStandard | VB_FEATURE(VB_F_X_CHUNKED);

TEST(BalloonCoreChunked, EachChunkTravelsAsOneDescriptor)
{
	Guest guest(kChunked);
	guest.os.chunked = true;
	guest.set_target(8192); // 32 MiB: sixteen 2 MiB chunks
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);

	// Inflate sends each batch as soon as it is allocated; a batch's chunks fit one message.
	constexpr uint64_t kBatch = vb::Balloon<FakeOs>::kChunkedFirstBatchWirePages;
	auto adds = guest.os.events_of(Event::kAdd);
	size_t inflate_messages = 0;
	for (const Event& e : adds)
		inflate_messages += e.queue == vb::QueueKind::kInflate;
	EXPECT_EQ(inflate_messages, (8192 + kBatch - 1) / kBatch) << "one message per batch";
	std::set<uint64_t> held(guest.os.balloon_list.begin(), guest.os.balloon_list.end());
	EXPECT_EQ(sent_pfns(guest.os, vb::QueueKind::kInflate), held);
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), 8192u);
}

TEST(BalloonCoreChunked, EachContiguousRangeTravelsAsOneDescriptor)
{
	// The buddy allocator splits 4 MiB blocks and hands them out in falling address
	// order: the 2 MiB blocks arrive as [a, a+2M), [a+2M, a+4M), [a-4M, a-2M), [a-2M, a).
	Guest guest(kChunked);
	guest.os.chunked = true;
	guest.set_target(17 * 512); // 34 MiB: seventeen 2 MiB blocks
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);

	// What was allocated, as maximal contiguous ranges.
	std::map<uint64_t, uint64_t> blocks;
	for (const Event& e : guest.os.events_of(Event::kAlloc))
		blocks[e.first_pfn] = e.count;
	size_t ranges = 0;
	uint64_t end = UINT64_MAX;
	for (const auto& [first, count] : blocks) {
		ranges += first != end;
		end = first + count;
	}
	ASSERT_EQ(blocks.size(), 17u);
	ASSERT_LT(ranges, 4u) << "the fake's free memory should be mostly contiguous";

	// Each message (one per batch) carries one descriptor per contiguous range of its pages.
	constexpr uint64_t kBatch = vb::Balloon<FakeOs>::kChunkedFirstBatchWirePages;
	std::vector<Event> inflate_adds;
	for (const Event& e : guest.os.events_of(Event::kAdd))
		if (e.queue == vb::QueueKind::kInflate)
			inflate_adds.push_back(e);
	ASSERT_EQ(inflate_adds.size(), (17 * 512 + kBatch - 1) / kBatch);
	size_t descriptors = 0;
	for (const Event& add : inflate_adds) {
		std::set<uint64_t> pages(add.wire_pfns.begin(), add.wire_pfns.end());
		size_t message_ranges = 0;
		uint64_t next = UINT64_MAX;
		for (uint64_t pfn : pages) {
			message_ranges += pfn != next;
			next = pfn + 1;
		}
		EXPECT_EQ(add.descriptors, message_ranges) << "one descriptor per range, not per block";
		descriptors += add.descriptors;
	}
	EXPECT_LE(descriptors, ranges + inflate_adds.size() - 1)
		<< "a range is cut only where a batch ends";
	std::set<uint64_t> held(guest.os.balloon_list.begin(), guest.os.balloon_list.end());
	EXPECT_EQ(sent_pfns(guest.os, vb::QueueKind::kInflate), held);
	EXPECT_EQ(held.size(), 17u * 512);
}

// The host is the slow side of a chunked inflate, so a step's batches start small (the
// host starts early) and double (each request costs the host a fixed amount).
TEST(BalloonCoreChunked, BatchesStartSmallAndDoubleUpToTheCap)
{
	using Core = vb::Balloon<FakeOs>;
	// 64 KiB guest pages (16 wire PFNs each) make the fake's 8 GiB of wire PFNs cheap.
	constexpr uint64_t kWirePagesPerPage = 16;
	vb::GuestTraits traits;
	traits.page_shift = 16;
	FakeOs os(16, 131072);
	os.chunked = true;
	Core::Workspace workspace;
	Core balloon(os, VB_FEATURE(VB_F_X_CHUNKED), traits, workspace);
	ASSERT_TRUE(balloon.prepare());
	balloon.start();
	constexpr uint64_t kTargetPages = 100000;
	static_assert(kTargetPages * kWirePagesPerPage <= Core::kChunkedStepWirePages, "one step");
	os.config[VB_CONFIG_NUM_PAGES_OFFSET / 4] = kTargetPages * kWirePagesPerPage;
	vb::StepResult result;
	while ((result = balloon.adjust_towards_target()) == vb::StepResult::kMoreWork) {
	}
	ASSERT_EQ(result, vb::StepResult::kSettled);

	std::vector<uint64_t> expected;
	uint64_t batch = Core::kChunkedFirstBatchWirePages;
	for (uint64_t left = kTargetPages * kWirePagesPerPage; left; left -= expected.back()) {
		expected.push_back(std::min(batch, left));
		batch = std::min(2 * batch, Core::kChunkedBatchWirePagesMax);
	}
	ASSERT_EQ(expected.size(), 8u) << "1, 2, 4, 8, 16, 32, 32 times the first, and the rest";
	std::vector<uint64_t> sent;
	for (const Event& e : os.events_of(Event::kAdd))
		if (e.queue == vb::QueueKind::kInflate)
			sent.push_back(e.wire_pfns.size());
	EXPECT_EQ(sent, expected) << "one message per batch over contiguous free memory";
	EXPECT_EQ(balloon.balloon_wire_pages(), kTargetPages * kWirePagesPerPage);
	EXPECT_EQ(os.allocator.counts().balloon, kTargetPages);
}

TEST(BalloonCoreChunked, GivesTheSameGuestVisibleResultAsPfnArrays)
{
	auto run = [](uint64_t features, bool chunked) {
		Guest guest(features);
		guest.os.chunked = chunked;
		guest.set_target(12345);
		EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
		auto inflated = guest.os.allocator.counts();
		uint32_t actual_inflated = guest.actual();
		guest.set_target(345);
		EXPECT_EQ(guest.settle(), vb::StepResult::kSettled);
		auto deflated = guest.os.allocator.counts();
		EXPECT_EQ(guest.os.allocator.check_consistency(), "");
		return std::tuple(inflated.balloon, inflated.free, actual_inflated, deflated.balloon,
				  deflated.free, guest.actual(), guest.os.managed_pages);
	};
	EXPECT_EQ(run(kStandard, false), run(kChunked, true));
}

TEST(BalloonCoreChunked, DeflateWorksWhenCompactionMovedPagesOutOfAChunk)
{
	Guest guest(kChunked | VB_FEATURE(VB_F_MUST_TELL_HOST));
	guest.os.chunked = true;
	guest.set_target(2048);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);

	// Compaction moves every 100th ballooned page somewhere else.
	std::vector<uint64_t> before = guest.os.balloon_list;
	for (size_t i = 0; i < before.size(); i += 100) {
		auto spare = guest.os.allocator.allocate(0);
		ASSERT_TRUE(spare);
		ASSERT_TRUE(guest.balloon.migrate_page(before[i], *spare));
		ASSERT_TRUE(guest.os.allocator.free_run(before[i], 1)) << "the OS frees the old page";
	}
	std::set<uint64_t> held(guest.os.balloon_list.begin(), guest.os.balloon_list.end());
	EXPECT_EQ(held.size(), 2048u);
	guest.os.events.clear();

	guest.set_target(0);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(sent_pfns(guest.os, vb::QueueKind::kDeflate), held) << "exactly the pages held";
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

// BAL-DRV-XCH-02..04: whatever the balloon's history (inflate, compaction moving pages out
// of chunks, partial deflate, inflate again), every range is whole 4 KiB pages, never
// empty, and no page is named twice in one request.
TEST(BalloonCoreChunked, EveryRangeIsWholePagesNonEmptyAndNamedOnce)
{
	Guest guest(kChunked | VB_FEATURE(VB_F_MUST_TELL_HOST));
	guest.os.chunked = true;
	guest.set_target(8192);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	std::vector<uint64_t> before = guest.os.balloon_list;
	for (size_t i = 0; i < before.size(); i += 50) {
		auto spare = guest.os.allocator.allocate(0);
		ASSERT_TRUE(spare);
		ASSERT_TRUE(guest.balloon.migrate_page(before[i], *spare));
		ASSERT_TRUE(guest.os.allocator.free_run(before[i], 1));
	}
	for (uint32_t target : {1000u, 6000u, 0u}) {
		guest.set_target(target);
		ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	}

	size_t requests = 0, multi_range_requests = 0;
	for (const Event& e : guest.os.events_of(Event::kAdd)) {
		if (e.queue != vb::QueueKind::kInflate && e.queue != vb::QueueKind::kDeflate)
			continue;
		requests++;
		ASSERT_EQ(e.ranges.size(), e.descriptors);
		multi_range_requests += e.ranges.size() > 1;
		for (const vb::Segment& r : e.ranges) {
			EXPECT_NE(r.len, 0u) << "an empty range";
			EXPECT_EQ(r.phys_addr % 4096, 0u);
			EXPECT_EQ(r.len % 4096, 0u);
		}
		std::set<uint32_t> unique(e.wire_pfns.begin(), e.wire_pfns.end());
		EXPECT_EQ(unique.size(), e.wire_pfns.size()) << "a page named twice in one request";
	}
	EXPECT_GT(multi_range_requests, 10u) << "compaction should have left fragmented requests";
	EXPECT_GT(requests, multi_range_requests);
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
}

vb::GuestTraits initialising_guest()
{
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = true;
	return traits;
}

TEST(BalloonCoreInitOnInflate, PagesTheDeviceInitialisedAreFreedAsInitialised)
{
	for (bool chunked : {false, true}) {
		uint64_t features = kStandard | VB_FEATURE(VB_F_X_INIT_ON_INFLATE) |
				    (chunked ? VB_FEATURE(VB_F_X_CHUNKED) : 0);
		Guest guest(features, initialising_guest());
		guest.os.chunked = chunked;
		guest.set_target(3000);
		ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
		EXPECT_EQ(guest.os.initialised.size(), 3000u) << "chunked " << chunked;
		EXPECT_EQ(guest.os.bitmap_requests, guest.balloon.counters().inflate_messages.get());
		EXPECT_EQ(guest.balloon.counters().wire_pages_device_initialised.get(), 3000u);
		guest.set_target(0);
		ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
		EXPECT_EQ(guest.os.freed_initialised, 3000u);
	}
}

TEST(BalloonCoreInitOnInflate, PagesTheDeviceDidNotInitialiseAreLeftToTheGuest)
{
	Guest guest(kStandard | VB_FEATURE(VB_F_X_INIT_ON_INFLATE), initialising_guest());
	guest.os.device_initialises = false;
	guest.set_target(1000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_TRUE(guest.os.initialised.empty());
	guest.set_target(0);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.os.freed_initialised, 0u);
}

TEST(BalloonCoreInitOnInflate, WithoutTheFeatureNoBitmapTravels)
{
	Guest guest(kStandard, initialising_guest());
	guest.set_target(1000);
	ASSERT_EQ(guest.settle(), vb::StepResult::kSettled);
	EXPECT_EQ(guest.os.bitmap_requests, 0u);
	EXPECT_TRUE(guest.os.initialised.empty());
}

} // namespace
} // namespace vbtest

namespace vbtest {
namespace {

TEST(BalloonCoreInitOnInflate, AGuestThatZeroesOnInflateStopsWhenTheDevicePromises)
{
	vb::GuestTraits traits = initialising_guest();
	traits.initialise_before_inflate = true;
	Guest zeroing(kStandard, traits);
	zeroing.set_target(1000);
	ASSERT_EQ(zeroing.settle(), vb::StepResult::kSettled);
	uint64_t zeroed = 0;
	for (const Event& e : zeroing.os.events_of(Event::kInitialise))
		zeroed += e.count;
	EXPECT_EQ(zeroed, 1000u) << "every page, before the host hears of it";
	auto first_init = std::find_if(zeroing.os.events.begin(), zeroing.os.events.end(),
				       [](const Event& e) { return e.kind == Event::kInitialise; });
	auto first_add = std::find_if(zeroing.os.events.begin(), zeroing.os.events.end(),
				      [](const Event& e) { return e.kind == Event::kAdd && e.queue == vb::QueueKind::kInflate; });
	EXPECT_LT(first_init, first_add);

	Guest promised(kStandard | VB_FEATURE(VB_F_X_INIT_ON_INFLATE), traits);
	promised.set_target(1000);
	ASSERT_EQ(promised.settle(), vb::StepResult::kSettled);
	EXPECT_TRUE(promised.os.events_of(Event::kInitialise).empty());
}

} // namespace
} // namespace vbtest
