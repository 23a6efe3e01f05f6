// SPDX-License-Identifier: GPL-2.0
//
// The squeeze (device-sim/machine/squeeze.h): a guest with a page cache and a workload,
// its balloon target stepped past its working set, with the pressure governor off (what
// Linux's own driver does) and on. The governor must keep the workload running: refaults
// near its baseline, throughput at 90% or more, `actual` short of the absurd target, and no
// inflate/give-back cycle.
#include <gtest/gtest.h>

#include <numeric>

#include "machine/squeeze.h"

namespace
{

vbsim::SqueezeOptions squeeze(bool governor, bool deflate_on_oom = true)
{
	vbsim::SqueezeOptions options;
	options.governor = governor;
	options.deflate_on_oom = deflate_on_oom;
	// 512 MiB: 64 MiB anonymous, a 160 MiB file working set, 96 MiB of cold cache; the
	// last target would leave the workload about 60 MiB.
	options.target_mib = {128, 256, 450};
	options.step_seconds = 40;
	return options;
}

uint64_t refaults_in(const vbsim::SqueezeResult& result, size_t from)
{
	uint64_t sum = 0;
	for (size_t i = from; i < result.seconds.size(); i++)
		sum += result.seconds[i].refaults;
	return sum;
}

uint64_t throughput_permille(const vbsim::SqueezeResult& result, size_t from)
{
	uint64_t sum = 0;
	for (size_t i = from; i < result.seconds.size(); i++)
		sum += result.seconds[i].throughput_permille;
	return sum / (result.seconds.size() - from);
}

TEST(PressureSqueeze, WithoutTheGovernorAnAbsurdTargetThrashesTheWorkload)
{
	vbsim::SqueezeResult result;
	ASSERT_EQ(vbsim::run_squeeze(squeeze(false), &result), "");
	EXPECT_TRUE(result.problems.empty());
	EXPECT_EQ(result.baseline_refaults, 0u);
	const size_t last = result.seconds.size() - 20;
	// Every second of the last 20 reads most of the 160 MiB working set back.
	EXPECT_GT(refaults_in(result, last), 20u * 20000);
	EXPECT_LT(throughput_permille(result, last), 100u);
	// The balloon keeps what it took: deflate-on-OOM gives back 1 MiB when the page cache
	// runs dry, and the stalled inflate, retried every second, takes it straight back.
	EXPECT_GE(result.actual_pages, 400u * 256);
	EXPECT_EQ(result.give_back_wire_pages, 0u);
}

TEST(PressureSqueeze, TheGovernorKeepsTheWorkingSetAndNeverCycles)
{
	vbsim::SqueezeResult result;
	ASSERT_EQ(vbsim::run_squeeze(squeeze(true), &result), "");
	EXPECT_TRUE(result.problems.empty());
	const size_t start = squeeze(true).baseline_seconds;
	EXPECT_EQ(result.baseline_refaults, 0u);
	// It did inflate: the first two targets fit, the last one stops short.
	EXPECT_EQ(result.seconds[start + 39].balloon_pages, 128u * 256);
	EXPECT_EQ(result.seconds[start + 79].balloon_pages, 256u * 256);
	EXPECT_LT(result.actual_pages, result.target_pages);
	EXPECT_GT(result.actual_pages, 200u * 256);
	// The workload runs: 90% or more over the whole squeeze, and once the governor has
	// found the working set, no refaults at all.
	EXPECT_GE(throughput_permille(result, start), 900u);
	const size_t last = result.seconds.size() - 20;
	EXPECT_EQ(refaults_in(result, last), 0u);
	EXPECT_GE(throughput_permille(result, last), 990u);
	// At most one give-back episode: grow, give back, grow to the learned floor, stay.
	EXPECT_LE(result.direction_changes, 2u);
	EXPECT_LE(result.give_back_wire_pages, 4u * 8 * 256) << "a few 8 MiB quanta at most";
	EXPECT_GT(result.floor_pages, 160u * 256) << "the floor covers the file working set";
	EXPECT_EQ(result.oom_notifications, 0u);
}

TEST(PressureSqueeze, WithoutDeflateOnOomTheGovernorNeitherReclaimsNorGivesBack)
{
	vbsim::SqueezeResult result;
	ASSERT_EQ(vbsim::run_squeeze(squeeze(true, false), &result), "");
	EXPECT_TRUE(result.problems.empty());
	EXPECT_EQ(result.give_back_wire_pages, 0u);
	EXPECT_LT(result.actual_pages, result.target_pages);
	// It takes free pages only, so the workload never notices.
	EXPECT_EQ(refaults_in(result, 0), 0u);
	EXPECT_EQ(throughput_permille(result, 0), 1000u);
	// The balloon only ever grows.
	for (size_t i = 1; i < result.seconds.size(); i++)
		EXPECT_GE(result.seconds[i].balloon_pages, result.seconds[i - 1].balloon_pages)
			<< "second " << i;
}

TEST(PressureSqueeze, AMappedWorkingSetIsNeverReclaimedOnlyTheColdCache)
{
	vbsim::SqueezeOptions options = squeeze(true);
	options.mapped_file = true;
	vbsim::SqueezeResult result;
	ASSERT_EQ(vbsim::run_squeeze(options, &result), "");
	EXPECT_TRUE(result.problems.empty());
	const size_t start = options.baseline_seconds;
	// The second target needs the cold cache (unmapped): it is reclaimed.
	EXPECT_EQ(result.seconds[start + 79].balloon_pages, 256u * 256);
	// The last one would need the working set: the balloon stops short of it, without a
	// single refault, so nothing to give back and nothing to learn.
	EXPECT_LT(result.actual_pages, result.target_pages);
	EXPECT_EQ(refaults_in(result, 0), 0u);
	EXPECT_EQ(throughput_permille(result, 0), 1000u);
	EXPECT_EQ(result.give_back_wire_pages, 0u);
	EXPECT_EQ(result.direction_changes, 0u);
	EXPECT_EQ(result.oom_notifications, 0u);
}

} // namespace
