// SPDX-License-Identifier: GPL-2.0
//
// Chunked inflate/deflate, host-initialised pages and huge-page-aware discards, end to end:
// the driver core in the simulated guest against the simulated device.
#include <map>
#include <tuple>

#include "system_fixture.h"

namespace vbtest {
namespace {

using vbsim::BalloonProfile;

BalloonProfile full_with(uint64_t extra_features)
{
	BalloonProfile profile = vbsim::full_profile();
	profile.offered_features |= extra_features;
	return profile;
}

// Everything the guest or the host can observe after a change of target.
using Observation = std::tuple<uint32_t /*actual*/, uint64_t /*host owned*/, uint64_t /*free*/,
			       uint64_t /*used*/, uint64_t /*balloon*/, int64_t /*managed*/,
			       uint64_t /*resident bytes of guest memory*/>;

Observation observe(Machine& machine)
{
	auto counts = machine.guest.allocator().counts();
	uint64_t managed_gpa = machine.guest.allocator().first_pfn() * kPageBytes;
	return {machine.device.actual_wire_pages(),
		machine.device.host_owned_wire_pages(),
		counts.free,
		counts.used,
		counts.balloon,
		machine.guest.os().managed_pages(),
		machine.memory.resident_bytes(managed_gpa, machine.guest_pages() * kPageBytes)};
}

struct PathResult {
	std::vector<Observation> observations;
	uint64_t inflate_requests = 0;
};

PathResult run_path(unsigned chunk_order, bool chunked, vbsim::DiscardMode mode)
{
	MachineOptions options;
	options.device.profile = full_with(chunked ? VB_FEATURE(VB_F_X_CHUNKED) : 0);
	options.device.discard_mode = mode;
	options.guest.max_chunk_order = chunk_order;
	Machine machine(options);
	machine.boot();
	EXPECT_EQ(bool(machine.guest.negotiated_features() & VB_FEATURE(VB_F_X_CHUNKED)), chunked);

	vbsim::UserMemory dirty = machine.guest.allocate_user_memory(machine.guest_pages(), 0x5a);
	machine.guest.free_user_memory(dirty);
	PathResult result;
	for (uint32_t target : {8192u, 1000u, 12000u, 0u}) {
		EXPECT_EQ(machine.balloon_to(target), vb::StepResult::kSettled);
		if (target == 8192) {
			// What the host holds reads back as zero once the guest has it again.
			for (const vb::PageRun& run : machine.guest.os().balloon_list().all_runs())
				EXPECT_EQ(machine.memory.resident_bytes(run.first_pfn * kPageBytes,
									run.count * kPageBytes),
					  0u);
		}
		result.observations.push_back(observe(machine));
	}
	result.inflate_requests = machine.device.counters().inflate_requests.load();
	return result;
}

TEST(ChunkedInflate, GivesTheSameGuestVisibleResultsAsPfnArrays)
{
	PathResult page_at_a_time = run_path(0, false, vbsim::DiscardMode::kPerPage);
	PathResult chunk_ordered = run_path(9, false, vbsim::DiscardMode::kMergeRuns);
	PathResult chunked = run_path(9, true, vbsim::DiscardMode::kMergeRuns);

	EXPECT_EQ(page_at_a_time.observations, chunk_ordered.observations);
	EXPECT_EQ(page_at_a_time.observations, chunked.observations);
	EXPECT_LT(chunked.inflate_requests * 8, chunk_ordered.inflate_requests)
		<< "chunks travel in far fewer requests";
}

TEST(ChunkedInflate, EachChunkIsOneDiscard)
{
	MachineOptions options;
	options.device.profile = full_with(VB_FEATURE(VB_F_X_CHUNKED));
	options.device.discard_mode = vbsim::DiscardMode::kPerPage; // no merging by the host
	Machine machine(options);
	machine.boot();
	vbsim::UserMemory dirty = machine.guest.allocate_user_memory(machine.guest_pages(), 0x5a);
	machine.guest.free_user_memory(dirty);
	ASSERT_EQ(machine.balloon_to(4096), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.counters().wire_pages_discarded.load(), 4096u);

	MachineOptions merging = options;
	merging.device.discard_mode = vbsim::DiscardMode::kMergeRuns;
	Machine merged(merging);
	merged.boot();
	ASSERT_EQ(merged.balloon_to(4096), vb::StepResult::kSettled);
	// 16 MiB in 2 MiB chunks: at most 8 discards, fewer where chunks are adjacent.
	EXPECT_LE(merged.device.counters().discard_calls.load(), 8u);
	EXPECT_EQ(merged.device.counters().wire_pages_discarded.load(), 4096u);
}

TEST(ChunkedInflate, AMisalignedChunkIsRejectedWholeAndCounted)
{
	MachineOptions options;
	options.device.profile = full_with(VB_FEATURE(VB_F_X_CHUNKED));
	Machine machine(options);
	machine.boot();
	vbsim::DriverRing* inflate = machine.guest.os().ring(vb::QueueKind::kInflate);
	ASSERT_NE(inflate, nullptr);
	uint64_t first = machine.guest.allocator().first_pfn() * kPageBytes;
	// A hostile driver: one good chunk, one that does not start on a page.
	vbsim::ChainBuffer chunks[2] = {{first, 8192}, {first + 16384 + 100, 4096}};
	int token;
	machine.guest.os().lock();
	ASSERT_TRUE(inflate->add(chunks, 2, nullptr, 0, &token));
	machine.guest.os().queue_kick(vb::QueueKind::kInflate);
	uint32_t len;
	EXPECT_EQ(machine.guest.os().queue_wait_used(vb::QueueKind::kInflate, &len), &token);
	machine.guest.os().unlock();
	EXPECT_EQ(machine.device.counters().rejected_by(vbsim::BalloonRejection::kChunkMisaligned), 1u);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 0u)
		<< "nothing of the request was acted on";
}

// BAL-DRV-XCH-08: with MUST_TELL_HOST no page of a deflated range is reused before the
// device acknowledged the deflate that named it.
TEST(ChunkedMustTellHost, NoPageOfADeflatedRangeIsReusedBeforeItsAck)
{
	MachineOptions options;
	options.device.profile = full_with(VB_FEATURE(VB_F_X_CHUNKED));
	Machine machine(options);
	machine.boot();
	ASSERT_TRUE(machine.guest.negotiated_features() & VB_FEATURE(VB_F_X_CHUNKED));
	expect_no_page_reused_before_its_deflate_ack(machine, 4096);
	EXPECT_EQ(machine.device.counters().rejected_by(vbsim::BalloonRejection::kPfnNotHostOwned),
		  0u);
}

// ---- Host-initialised pages ----------------------------------------------------------------

struct InitCase {
	std::string name;
	bool device_promises;
	bool chunked;
	uint8_t pattern;
};

class HostInitialisedPages : public ::testing::TestWithParam<InitCase> {};

TEST_P(HostInitialisedPages, DeflatedPagesHoldThePatternAndOnlyTheGuestsShareIsWritten)
{
	const InitCase& c = GetParam();
	MachineOptions options;
	uint64_t extra = (c.device_promises ? VB_FEATURE(VB_F_X_INIT_ON_INFLATE) : 0) |
			 (c.chunked ? VB_FEATURE(VB_F_X_CHUNKED) : 0);
	options.device.profile = full_with(extra);
	options.guest.free_policy = {true, c.pattern};
	Machine machine(options);
	machine.boot();
	EXPECT_EQ(bool(machine.guest.negotiated_features() & VB_FEATURE(VB_F_X_INIT_ON_INFLATE)),
		  c.device_promises);

	vbsim::UserMemory dirty = machine.guest.allocate_user_memory(machine.guest_pages(), 0x5a);
	machine.guest.free_user_memory(dirty);
	ASSERT_EQ(machine.balloon_to(4096), vb::StepResult::kSettled);
	std::vector<vb::PageRun> ballooned = machine.guest.os().balloon_list().all_runs();
	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);

	const vbsim::SimOsCounters& guest = machine.guest.os().counters();
	if (c.device_promises) {
		EXPECT_EQ(machine.device.counters().wire_pages_reported_initialised.load(), 4096u);
		EXPECT_EQ(guest.pages_skipped_initialising.load(), 4096u);
		EXPECT_EQ(guest.pages_initialised_by_guest.load(), 0u);
	} else {
		EXPECT_EQ(guest.pages_skipped_initialising.load(), 0u);
		EXPECT_EQ(guest.pages_initialised_by_guest.load(), 4096u);
	}
	// Whoever did it, every byte the guest got back holds its pattern.
	for (const vb::PageRun& run : ballooned) {
		const uint8_t* bytes = machine.memory.translate(run.first_pfn * kPageBytes, run.count * kPageBytes);
		for (uint64_t i = 0; i < run.count * kPageBytes; i++)
			ASSERT_EQ(bytes[i], c.pattern) << "pfn " << run.first_pfn + i / kPageBytes;
	}
}

INSTANTIATE_TEST_SUITE_P(Cases, HostInitialisedPages,
			 ::testing::Values(InitCase{"guest_zeroes", false, false, 0},
					   InitCase{"host_zeroes", true, false, 0},
					   InitCase{"host_zeroes_chunks", true, true, 0},
					   InitCase{"guest_poisons", false, false, 0xaa},
					   InitCase{"guest_poisons_chunks", false, true, 0xaa},
					   InitCase{"host_poisons", true, false, 0xaa},
					   InitCase{"host_poisons_chunks", true, true, 0xaa}),
			 [](const auto& info) { return info.param.name; });

TEST(HostInitialisedPages, AGuestThatZeroesOnInflateLeavesItToTheHostWhenPromised)
{
	for (bool promised : {false, true}) {
		MachineOptions options;
		options.device.profile = full_with(promised ? VB_FEATURE(VB_F_X_INIT_ON_INFLATE) : 0);
		options.guest.free_policy = {true, 0};
		options.guest.zero_on_inflate = true;
		Machine machine(options);
		machine.boot();
		ASSERT_EQ(machine.balloon_to(2048), vb::StepResult::kSettled);
		EXPECT_EQ(machine.guest.os().counters().pages_initialised_by_guest.load(), promised ? 0u : 2048u);
	}
}

// ---- Host huge pages -------------------------------------------------------------------------

TEST(HugePageBacking, AHostPageIsDiscardedOnlyWhenAllOfItIsBallooned)
{
	MachineOptions options;
	options.backing = vbsim::PageBacking::kTransparentHugePages;
	options.device.host_page_bytes = 2ull << 20;
	options.guest.max_chunk_order = 0; // page at a time: huge pages fill up gradually
	Machine machine(options);
	machine.boot();
	vbsim::UserMemory dirty = machine.guest.allocate_user_memory(machine.guest_pages(), 0x5a);
	machine.guest.free_user_memory(dirty);

	ASSERT_EQ(machine.balloon_to(100), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.counters().discard_calls.load(), 0u) << "no host page is whole yet";
	for (const vb::PageRun& run : machine.guest.os().balloon_list().all_runs())
		EXPECT_EQ(machine.memory.resident_bytes(run.first_pfn * kPageBytes, run.count * kPageBytes),
			  run.count * kPageBytes);

	ASSERT_EQ(machine.balloon_to(3000), vb::StepResult::kSettled);
	std::map<uint64_t, uint64_t> per_huge_page;
	for (const vb::PageRun& run : machine.guest.os().balloon_list().all_runs())
		for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++)
			per_huge_page[pfn / 512]++;
	uint64_t whole = 0;
	for (const auto& [huge, count] : per_huge_page) {
		uint64_t resident = machine.memory.resident_bytes(huge * 512 * kPageBytes, 512 * kPageBytes);
		if (count == 512) {
			whole++;
			EXPECT_EQ(resident, 0u) << "whole huge page " << huge;
		} else {
			EXPECT_EQ(resident, 512 * kPageBytes) << "partial huge page " << huge << " was split";
		}
	}
	EXPECT_GT(whole, 0u);
	EXPECT_EQ(machine.device.counters().wire_pages_discarded.load(), whole * 512);
	ASSERT_EQ(machine.balloon_to(0), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.host_owned_wire_pages(), 0u);
}

TEST(HugePageBacking, ChunksOfAWholeHostPageAreDiscardedAtOnce)
{
	MachineOptions options;
	options.backing = vbsim::PageBacking::kTransparentHugePages;
	options.device.host_page_bytes = 2ull << 20;
	options.device.profile = full_with(VB_FEATURE(VB_F_X_CHUNKED));
	Machine machine(options);
	machine.boot();
	ASSERT_EQ(machine.balloon_to(4096), vb::StepResult::kSettled);
	EXPECT_EQ(machine.device.counters().wire_pages_discarded.load(), 4096u);
	EXPECT_LE(machine.device.counters().discard_calls.load(), 8u);
}

} // namespace
} // namespace vbtest
