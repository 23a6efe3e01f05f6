// SPDX-License-Identifier: GPL-2.0
#include "migration/host_profile.h"

#include <array>

namespace vbsim::migration
{

namespace
{

constexpr std::array kProfiles = {
	HostProfile{
		"qemu-7.2",
		"Debian 12's QEMU 7.2: zero detection in the migration thread, one stream unless "
		"--threads asks for multifd channels, hints applied at 50 ms iteration boundaries "
		"under the bitmap mutex, reported pages scanned as zero pages, QEMU's convergence "
		"rule (pending bytes over measured bandwidth against the downtime limit); the one "
		"stream is exec:cat's pipe, whose reader's copy the migration thread waits for",
		1,
		ZeroDetectionPlace::kMigrationThread,
		1,
		HintApplication::kAtIterationBoundaries,
		ReportedPages::kScanned,
		ConvergenceRule::kQemuPendingOverBandwidth,
		ChannelStream::kPipe,
		false,
	},
	HostProfile{
		"qemu-9",
		"QEMU 9: as qemu-7.2, with zero detection in the --threads multifd channels "
		"(zero-page-detection=multifd, 2 channels by default)",
		2,
		ZeroDetectionPlace::kSenderThreads,
		0,
		HintApplication::kAtIterationBoundaries,
		ReportedPages::kScanned,
		ConvergenceRule::kQemuPendingOverBandwidth,
		ChannelStream::kSocketPair,
		true,
	},
	HostProfile{
		"ideal",
		"what a host could do: multifd zero detection, hints applied as they arrive, "
		"reported pages skipped unscanned, remaining pages costed as whole pages",
		2,
		ZeroDetectionPlace::kSenderThreads,
		0,
		HintApplication::kImmediately,
		ReportedPages::kSkippedUnscanned,
		ConvergenceRule::kWholePageCost,
		ChannelStream::kSocketPair,
		true,
	},
};

} // namespace

std::span<const HostProfile> all_host_profiles()
{
	return kProfiles;
}

const HostProfile* find_host_profile(std::string_view name)
{
	for (const HostProfile& profile : kProfiles)
		if (name == profile.name)
			return &profile;
	return nullptr;
}

void apply_host_profile(const HostProfile& profile, unsigned threads, MigrationConfig& config)
{
	config.sender_threads = threads != 0 ? threads : profile.default_threads;
	config.zero_detection_place = profile.zero_detection_place;
	config.zero_page_extra_bytes = profile.zero_page_extra_bytes;
	config.hint_application = profile.hint_application;
	config.reported_pages = profile.reported_pages;
	config.convergence = profile.convergence;
	config.stream =
		config.sender_threads == 1 ? profile.single_stream : ChannelStream::kSocketPair;
}

std::vector<Strategy> strategies_of(const HostProfile& profile)
{
	std::vector<Strategy> strategies;
	for (Strategy strategy : all_strategies())
		if (profile.zero_detection_optional || uses_zero_detection(strategy))
			strategies.push_back(strategy);
	return strategies;
}

} // namespace vbsim::migration
