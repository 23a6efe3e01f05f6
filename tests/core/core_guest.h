// SPDX-License-Identifier: GPL-2.0
//
// A guest for the core tests: the core over FakeOs, driven as the OS's work item would.
#ifndef VBALLOON_TESTS_CORE_CORE_GUEST_H
#define VBALLOON_TESTS_CORE_CORE_GUEST_H

#include <functional>
#include <map>
#include <set>
#include <vector>

#include "fake_os.h"

namespace vbtest {

constexpr uint64_t kFirstPfn = 256;
constexpr uint64_t kGuestPages = 16384; // 64 MiB

struct Guest {
	explicit Guest(
		uint64_t features, vb::GuestTraits traits = {},
		const std::function<void(FakeOs&)>& configure_device = [](FakeOs&) {})
	    : os(kFirstPfn, kGuestPages),
	      balloon((configure_device(os), os), features, traits, workspace)
	{
		EXPECT_TRUE(balloon.prepare());
		balloon.start();
	}

	void set_target(uint32_t pfns) { os.config[VB_CONFIG_NUM_PAGES_OFFSET / 4] = pfns; }
	uint32_t actual() const { return os.config[VB_CONFIG_ACTUAL_OFFSET / 4]; }

	// Drives the core as the OS's work item would, until it settles or stalls.
	vb::StepResult settle()
	{
		for (int steps = 0; steps < 100000; steps++) {
			vb::StepResult result = balloon.adjust_towards_target();
			if (result != vb::StepResult::kMoreWork)
				return result;
		}
		ADD_FAILURE() << "the balloon never settled";
		return vb::StepResult::kMoreWork;
	}

	FakeOs os;
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon;
};

constexpr uint64_t kStandard = VB_FEATURE(VB_F_STATS_VQ);
constexpr uint64_t kWithMustTellHost = kStandard | VB_FEATURE(VB_F_MUST_TELL_HOST);
constexpr uint64_t kWithDeflateOnOom = kStandard | VB_FEATURE(VB_F_DEFLATE_ON_OOM);

// The allocator, the balloon list, the core's count and `actual` agree.
inline void expect_accounted(const Guest& guest, uint64_t ballooned)
{
	EXPECT_EQ(guest.balloon.balloon_wire_pages(), ballooned);
	EXPECT_EQ(guest.os.balloon_list.size() + guest.os.held.size(), ballooned);
	EXPECT_TRUE(guest.os.dequeued.empty()) << "pages taken off the balloon and left nowhere";
	EXPECT_EQ(guest.os.allocator.counts().balloon, ballooned);
	EXPECT_EQ(guest.os.allocator.counts().free, kGuestPages - ballooned);
	EXPECT_EQ(guest.actual(), ballooned);
	EXPECT_EQ(guest.os.allocator.check_consistency(), "");
	EXPECT_EQ(guest.os.actual_writes_without_lock, 0u);
}

inline std::set<uint64_t> sent_pfns(const FakeOs& os, vb::QueueKind queue)
{
	std::set<uint64_t> pfns;
	for (const Event& e : os.events_of(Event::kAdd)) {
		if (e.queue != queue)
			continue;
		for (uint32_t pfn : e.wire_pfns)
			EXPECT_TRUE(pfns.insert(pfn).second) << "PFN " << pfn << " sent twice";
	}
	return pfns;
}

// The statsq buffer as {tag: value}.
inline std::map<uint16_t, uint64_t> decode_stats_entries(const std::vector<uint8_t>& bytes)
{
	std::map<uint16_t, uint64_t> out;
	EXPECT_EQ(bytes.size() % VB_STAT_ENTRY_BYTES, 0u);
	for (size_t at = 0; at + VB_STAT_ENTRY_BYTES <= bytes.size(); at += VB_STAT_ENTRY_BYTES) {
		uint16_t tag = static_cast<uint16_t>(bytes[at] | bytes[at + 1] << 8);
		uint64_t val = 0;
		for (int i = 7; i >= 0; i--)
			val = val << 8 | bytes[at + 2 + static_cast<size_t>(i)];
		out[tag] = val;
	}
	return out;
}

} // namespace vbtest

#endif
