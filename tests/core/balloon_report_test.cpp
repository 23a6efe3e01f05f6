// SPDX-License-Identifier: GPL-2.0
//
// Free page reporting in the core, against the inline device of fake_os.h.
#include <gtest/gtest.h>

#include "fake_os.h"

namespace vbtest {
namespace {

constexpr uint64_t kFirstPfn = 1024;
constexpr uint64_t kGuestPages = 16384;
constexpr uint64_t kReporting = VB_FEATURE(VB_F_PAGE_REPORTING);

struct ReportGuest {
	explicit ReportGuest(uint64_t features = kReporting, vb::GuestTraits traits = {})
	    : os(kFirstPfn, kGuestPages), balloon(os, features, traits, workspace)
	{
		EXPECT_TRUE(balloon.prepare());
		balloon.start();
	}
	FakeOs os;
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon;
};

std::vector<vb::PageRun> blocks_of_order(unsigned order, size_t count)
{
	std::vector<vb::PageRun> runs;
	for (size_t i = 0; i < count; i++)
		runs.push_back({kFirstPfn + i * (2ull << order), 1ull << order});
	return runs;
}

TEST(FreePageReport, OneChainOfDeviceWritableBlocksAcknowledgedBeforeItReturns)
{
	ReportGuest guest;
	auto runs = blocks_of_order(9, 32);
	EXPECT_TRUE(guest.balloon.report_free_pages(runs.data(), runs.size()));

	ASSERT_EQ(guest.os.reports.size(), 1u);
	ASSERT_EQ(guest.os.reports[0].size(), 32u);
	for (size_t i = 0; i < runs.size(); i++) {
		EXPECT_EQ(guest.os.reports[0][i].phys_addr, runs[i].first_pfn * 4096);
		EXPECT_EQ(guest.os.reports[0][i].len, 512u * 4096);
	}
	// The add, the kick and the ack, in that order, before the call returned.
	std::vector<Event::Kind> kinds;
	for (const Event& e : guest.os.events)
		if (e.queue == vb::QueueKind::kReporting)
			kinds.push_back(e.kind);
	EXPECT_EQ(kinds, (std::vector<Event::Kind>{Event::kAdd, Event::kKick, Event::kAck}));
	EXPECT_EQ(guest.balloon.counters().reports.get(), 1u);
	EXPECT_EQ(guest.balloon.counters().wire_pages_reported.get(), 32u * 512);
	EXPECT_TRUE(guest.os.events_of(Event::kInitialise).empty()) << "reported pages are not touched";
}

TEST(FreePageReport, MoreThan32RunsOrEmptyRunsAreRefusedWithoutTravelling)
{
	ReportGuest guest;
	auto runs = blocks_of_order(9, 33);
	EXPECT_FALSE(guest.balloon.report_free_pages(runs.data(), runs.size()));
	EXPECT_FALSE(guest.balloon.report_free_pages(runs.data(), 0));
	vb::PageRun empty = {kFirstPfn, 0};
	EXPECT_FALSE(guest.balloon.report_free_pages(&empty, 1));
	vb::PageRun huge = {kFirstPfn, 1ull << 21}; // 8 GiB: does not fit one descriptor
	EXPECT_FALSE(guest.balloon.report_free_pages(&huge, 1));
	EXPECT_TRUE(guest.os.reports.empty());
}

TEST(FreePageReport, NothingTravelsBeforeDriverOk)
{
	FakeOs os(kFirstPfn, kGuestPages);
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon(os, kReporting, {}, workspace);
	ASSERT_TRUE(balloon.prepare());
	auto runs = blocks_of_order(9, 2);
	EXPECT_FALSE(balloon.report_free_pages(runs.data(), runs.size()));
	EXPECT_TRUE(os.reports.empty());
	EXPECT_TRUE(os.events_of(Event::kKick).empty());
	EXPECT_EQ(balloon.counters().reports.get(), 0u);
	// Once the device is live, the same report goes.
	balloon.start();
	EXPECT_TRUE(balloon.report_free_pages(runs.data(), runs.size()));
	EXPECT_EQ(os.reports.size(), 1u);
}

TEST(FreePageReport, NothingTravelsWithoutTheFeature)
{
	ReportGuest guest(0);
	auto runs = blocks_of_order(9, 1);
	EXPECT_FALSE(guest.balloon.report_free_pages(runs.data(), runs.size()));
	EXPECT_TRUE(guest.os.reports.empty());
}

TEST(FreePageReport, AReportNeverAcknowledgedFailsAndAPatternGuestRewritesThePages)
{
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = true;
	ReportGuest guest(kReporting | VB_FEATURE(VB_F_PAGE_POISON), traits);
	guest.os.acks_before_gone = 0; // takes the report, then goes away
	auto runs = blocks_of_order(9, 3);
	EXPECT_FALSE(guest.balloon.report_free_pages(runs.data(), runs.size()));
	EXPECT_EQ(guest.balloon.counters().reports.get(), 0u);
	EXPECT_EQ(guest.balloon.counters().report_failures.get(), 1u);
	EXPECT_EQ(guest.os.events_of(Event::kInitialise).size(), 3u);
}

TEST(FreePageReport, AReportLongerThanTheRingIsNeverTried)
{
	ReportGuest guest;
	guest.os.queue_sizes[static_cast<int>(vb::QueueKind::kReporting)] = 16;
	auto runs = blocks_of_order(9, 17);
	EXPECT_FALSE(guest.balloon.report_free_pages(runs.data(), runs.size()));
	EXPECT_TRUE(guest.os.reports.empty());
	EXPECT_TRUE(guest.balloon.report_free_pages(runs.data(), 16));
}

TEST(FreePageReport, ARefusedReportFailsAndTouchesNothing)
{
	ReportGuest guest;
	guest.os.refuse[static_cast<int>(vb::QueueKind::kReporting)] = true;
	auto runs = blocks_of_order(9, 2);
	EXPECT_FALSE(guest.balloon.report_free_pages(runs.data(), runs.size()));
	EXPECT_EQ(guest.balloon.counters().report_failures.get(), 1u);
	EXPECT_TRUE(guest.os.events_of(Event::kInitialise).empty()) << "never sent, never touched";
}

// DEVICE_INIT_REPORTED: a report whose used length is exactly its bytes was zeroed by the
// device; anything else (shorter: which pages?; longer: more than it was given; without
// the bit: a used length that means nothing) is trusted for nothing.
TEST(FreePageReport, DeviceInitReportedTrustsOnlyAUsedLengthOfExactlyTheReport)
{
	const uint64_t with_bit6 = kReporting | VB_FEATURE(VB_F_DEVICE_INIT_REPORTED);
	auto runs = blocks_of_order(9, 4);
	const uint32_t bytes = 4 * 512 * 4096;
	struct Case {
		uint64_t features;
		uint32_t used_len;
		bool trusted;
		uint64_t overclaims;
	};
	const Case cases[] = {
		{with_bit6, bytes, true, 0},	     {with_bit6, 0, false, 0},
		{with_bit6, bytes - 4096, false, 0}, {with_bit6, bytes + 4096, false, 1},
		{with_bit6, ~0u, false, 1},	     {kReporting, bytes, false, 0},
	};
	for (const Case& c : cases) {
		ReportGuest guest(c.features);
		guest.os.report_used_len = c.used_len;
		bool initialised = !c.trusted;
		EXPECT_TRUE(
			guest.balloon.report_free_pages(runs.data(), runs.size(), &initialised));
		EXPECT_EQ(initialised, c.trusted) << "used length " << c.used_len;
		EXPECT_EQ(guest.balloon.counters().wire_pages_reported_device_initialised.get(),
			  c.trusted ? 4u * 512 : 0u);
		EXPECT_EQ(guest.balloon.counters().device_init_overclaims.get(), c.overclaims);
		EXPECT_EQ(guest.balloon.counters().wire_pages_reported.get(), 4u * 512)
			<< "reported either way";
	}
}

TEST(FreePageReport, ARefusedReportIsNeverDeviceInitialised)
{
	ReportGuest guest(kReporting | VB_FEATURE(VB_F_DEVICE_INIT_REPORTED));
	guest.os.report_used_len = 512 * 4096;
	auto runs = blocks_of_order(9, 33);
	bool initialised = true;
	EXPECT_FALSE(guest.balloon.report_free_pages(runs.data(), runs.size(), &initialised));
	EXPECT_FALSE(initialised);
}

} // namespace
} // namespace vbtest
