// SPDX-License-Identifier: GPL-2.0
//
// VB_F_X_PRESSURE on the wire: who may negotiate it, and the stats tags it adds
// (spec/proposals/vb-f-x-pressure.md).
#include <gtest/gtest.h>

#include <map>

#include "core_guest.h"

namespace
{

using namespace vbtest;

TEST(PressureFeature, AcceptedOnlyFromAGuestThatRunsTheGovernor)
{
	const uint64_t bit = VB_FEATURE(VB_F_X_PRESSURE);
	vb::GuestTraits traits;
	EXPECT_EQ(vb::accept_features(bit | VB_FEATURE(VB_F_STATS_VQ), traits),
		  VB_FEATURE(VB_F_STATS_VQ))
		<< "a guest without the governor would promise the device refusals it never makes";
	traits.runs_pressure_governor = true;
	EXPECT_EQ(vb::accept_features(bit | VB_FEATURE(VB_F_STATS_VQ), traits),
		  bit | VB_FEATURE(VB_F_STATS_VQ));
	EXPECT_EQ(vb::accept_features(VB_FEATURE(VB_F_STATS_VQ), traits), VB_FEATURE(VB_F_STATS_VQ))
		<< "never taken unoffered";
}

// The OS can report every tag; which reach the wire depends on VB_F_X_PRESSURE alone.
class PressureStatsTags : public ::testing::TestWithParam<bool>
{
};

TEST_P(PressureStatsTags, TagsPastLinuxsOwnOnlyWithTheBit)
{
	const bool negotiated = GetParam();
	FakeOs os(kFirstPfn, kGuestPages);
	os.stats.present_mask = (1u << VB_S_NR) - 1;
	for (unsigned tag = 0; tag < VB_S_NR; tag++)
		os.stats.value[tag] = 1000 + tag;
	const uint64_t features = kStandard | (negotiated ? VB_FEATURE(VB_F_X_PRESSURE) : 0);
	vb::Balloon<FakeOs>::Workspace workspace;
	vb::Balloon<FakeOs> balloon(os, features, {}, workspace);
	ASSERT_TRUE(balloon.prepare());
	balloon.start();

	for (int report = 0; report < 2; report++) {
		auto sent = decode_stats_entries(os.last_stats);
		const unsigned expected_tags = negotiated ? VB_S_NR : VB_S_FIRST_PRESSURE_TAG;
		ASSERT_EQ(sent.size(), expected_tags) << "report " << report;
		// The governor's own (27-29) are its, not the OS's: zero while it is off.
		for (unsigned tag = 0; tag < expected_tags; tag++)
			EXPECT_EQ(sent[static_cast<uint16_t>(tag)],
				  tag >= VB_S_X_HELD_BACK ? 0 : 1000 + tag)
				<< "tag " << tag;
		ASSERT_TRUE(os.request_stats());
		balloon.handle_stats_request();
	}
}

INSTANTIATE_TEST_SUITE_P(Negotiated, PressureStatsTags, ::testing::Bool(),
			 [](const auto& info) { return info.param ? "WithBit" : "WithoutBit"; });

} // namespace
