// SPDX-License-Identifier: GPL-2.0
#include "migration/host_profile.h"

#include <array>
#include <utility>

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
		// 7.2's multifd still checks in the migration thread (save_zero_page() before
		// ram_save_multifd_page()).
		ZeroDetectionPlace::kMigrationThread,
		HintApplication::kAtIterationBoundaries,
		ReportedPages::kScanned,
		ConvergenceRule::kQemuPendingOverBandwidth,
		ChannelStream::kPipe,
		ChannelStream::kSocketPair,
		false,
	},
	HostProfile{
		"qemu-10",
		"QEMU 9.0 to 10.0 (Debian 13's 10.0): as qemu-7.2 with one stream (multifd off, "
		"QEMU's default: zero detection in the migration thread, exec:cat's pipe); with "
		"--threads 2 or more (or --multifd-channels), multifd channels over loopback TCP "
		"that check their own pages for zero (zero-page-detection=multifd, the default; "
		"legacy: the migration thread) and are synced once per pass; "
		"zero-page-detection=none possible (the strategies without zero-detect)",
		1,
		ZeroDetectionPlace::kMigrationThread,
		ZeroDetectionPlace::kSenderThreads,
		HintApplication::kAtIterationBoundaries,
		ReportedPages::kScanned,
		ConvergenceRule::kQemuPendingOverBandwidth,
		ChannelStream::kPipe,
		ChannelStream::kTcp,
		true,
	},
	HostProfile{
		"ideal",
		"what a host could do: multifd zero detection, hints applied as they arrive, "
		"reported pages skipped unscanned, remaining pages costed as whole pages",
		2,
		ZeroDetectionPlace::kSenderThreads,
		ZeroDetectionPlace::kSenderThreads,
		HintApplication::kImmediately,
		ReportedPages::kSkippedUnscanned,
		ConvergenceRule::kWholePageCost,
		ChannelStream::kSocketPair,
		ChannelStream::kSocketPair,
		true,
	},
};

// Names that stand for a profile above: QEMU 9.0 brought zero-page-detection and multifd's
// own zero checks, and 10.0 runs them as 9.0 did (tests/guest/README.md, "QEMU 10.0").
constexpr std::array<std::pair<std::string_view, std::string_view>, 1> kAliases = {{
	{"qemu-9", "qemu-10"},
}};

} // namespace

std::span<const HostProfile> all_host_profiles()
{
	return kProfiles;
}

const HostProfile* find_host_profile(std::string_view name)
{
	for (const auto& [alias, profile] : kAliases)
		if (name == alias)
			name = profile;
	for (const HostProfile& profile : kProfiles)
		if (name == profile.name)
			return &profile;
	return nullptr;
}

std::vector<std::string_view> host_profile_names()
{
	std::vector<std::string_view> names;
	for (const HostProfile& profile : kProfiles)
		names.push_back(profile.name);
	for (const auto& alias : kAliases)
		names.push_back(alias.first);
	return names;
}

void apply_host_profile(const HostProfile& profile, unsigned threads, MigrationConfig& config)
{
	apply_host_profile(profile, HostChoices{.threads = threads}, config);
}

void apply_host_profile(const HostProfile& profile, const HostChoices& choices,
			MigrationConfig& config)
{
	config.sender_threads = choices.threads != 0 ? choices.threads : profile.default_threads;
	const bool multifd = choices.multifd || config.sender_threads > 1;
	config.zero_detection_place =
		!multifd ? profile.single_stream_zero_detection
			 : choices.multifd_zero_detection.value_or(profile.multifd_zero_detection);
	// The legacy stream's zero-page record carries a fill byte; a multifd packet lists
	// zero pages by offset alone.
	config.zero_page_extra_bytes =
		config.zero_detection_place == ZeroDetectionPlace::kMigrationThread ? 1 : 0;
	config.hint_application = profile.hint_application;
	config.reported_pages = profile.reported_pages;
	config.convergence = profile.convergence;
	config.stream = multifd ? profile.multifd_stream
				: choices.single_stream.value_or(profile.single_stream);
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
