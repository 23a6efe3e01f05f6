// SPDX-License-Identifier: GPL-2.0
//
// Host profiles: which QEMU (or which better host) the model stands for. A profile sets
// where zero detection runs, how many channels send by default, when hints land, what
// happens to reported pages and when pre-copy stops; every other knob (link, threads,
// downtime limit) stays the caller's.
#ifndef VBSIM_MIGRATION_HOST_PROFILE_H
#define VBSIM_MIGRATION_HOST_PROFILE_H

#include <optional>
#include <span>
#include <string_view>
#include <vector>

#include "migration/migration.h"

namespace vbsim::migration
{

struct HostProfile {
	const char* name;
	const char* models; // one line: what the profile stands for
	unsigned default_threads;
	// Where pages are checked for zero with one stream (--threads 1: QEMU without multifd)
	// and with multifd channels (--threads 2 and up). A zero page checked in the migration
	// thread goes as the legacy stream's record, with its fill byte; one checked in a
	// sender thread as an offset in the multifd packet, with none.
	ZeroDetectionPlace single_stream_zero_detection;
	ZeroDetectionPlace multifd_zero_detection;
	HintApplication hint_application;
	ReportedPages reported_pages;
	ConvergenceRule convergence;
	// What its single stream (one channel, multifd off) writes into, and what its multifd
	// channels are.
	ChannelStream single_stream;
	ChannelStream multifd_stream;
	// Whether the host can send pages without checking them for zero. QEMU 7.2 cannot (every
	// page goes through save_zero_page; zero-page-detection=none came with 9.0), so the
	// strategies without zero detection are not something such a host runs.
	bool zero_detection_optional;
};

std::span<const HostProfile> all_host_profiles(); // qemu-7.2 (the default), qemu-10, ideal
// By name, or by an older name that stands for the same mechanisms (qemu-9: qemu-10).
const HostProfile* find_host_profile(std::string_view name);
// Every name find_host_profile() takes.
std::vector<std::string_view> host_profile_names();
// What a caller may ask of a host beyond its profile (compare's options).
struct HostChoices {
	unsigned threads = 0; // channels; 0: the profile's default
	// QEMU's multifd capability even with one channel (else multifd means threads >= 2).
	bool multifd = false;
	// zero-page-detection=legacy (the migration thread) or multifd (the channels' threads),
	// with multifd; unset: the profile's.
	std::optional<ZeroDetectionPlace> multifd_zero_detection{};
	// The single stream's kind (exec:cat's pipe or tcp:); unset: the profile's.
	std::optional<ChannelStream> single_stream{};
};
// The profile's settings into `config`, with `threads` channels (0: the profile's default).
void apply_host_profile(const HostProfile& profile, unsigned threads, MigrationConfig& config);
void apply_host_profile(const HostProfile& profile, const HostChoices& choices,
			MigrationConfig& config);
// The strategies this host can run, in all_strategies() order.
std::vector<Strategy> strategies_of(const HostProfile& profile);

} // namespace vbsim::migration

#endif
