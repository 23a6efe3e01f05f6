// SPDX-License-Identifier: GPL-2.0
//
// What a balloon device offers, modelled on the hosts a guest driver meets in practice.
// Facts were read from each host's source (noted beside each profile in the .cpp); the
// simulator reproduces the guest-visible surface (features, config size, queue sizes,
// descriptor size cap), not the host's internals.
#ifndef VBSIM_BALLOON_BALLOON_PROFILE_H
#define VBSIM_BALLOON_BALLOON_PROFILE_H

#include <cstdint>
#include <optional>
#include <string_view>

namespace vbsim
{

struct BalloonProfile {
	std::string_view name;
	uint64_t offered_features = 0;
	// Features this host can be told to offer on top (DEFLATE_ON_OOM etc.).
	uint64_t optional_features = 0;
	uint32_t config_size_bytes = 0;
	uint16_t queue_size = 0; // inflateq, deflateq and statsq
	uint16_t free_page_queue_size = 0;
	uint16_t reporting_queue_size = 0;
	// Largest PFN array one inflate/deflate request may carry; larger ones are rejected
	// whole. Firecracker and cloud-hypervisor stop at 256 PFNs (1 KiB); QEMU has no cap,
	// and there our bound keeps the work per request finite.
	uint32_t max_pfn_bytes_per_request = 0;
	// Inflate and deflate requests: the device may interrupt after each request it returns
	// (as the driver's interrupt suppression allows), not only once it has emptied the
	// queue. A driver with several requests in flight then hears of the first while the
	// host still works on the others.
	bool notifies_each_request = false;
};

// The PFN-array bound for profiles whose host has none: 16384 PFNs (64 MiB of guest
// memory), 64 times what Linux sends, so only a broken or hostile driver reaches it.
inline constexpr uint32_t kUncappedHostPfnBytesBound = 64 * 1024;

// `extra_features` must be a subset of the profile's optional features, or the call
// throws std::invalid_argument: a profile never offers what its host cannot.
BalloonProfile qemu_7_2_profile(uint64_t extra_features = 0);
BalloonProfile firecracker_profile(uint64_t extra_features = 0);
BalloonProfile cloud_hypervisor_profile(uint64_t extra_features = 0);
// Everything the spec defines, MUST_TELL_HOST included: for testing a driver's every path.
BalloonProfile full_profile();

// "qemu-7.2", "firecracker", "cloud-hypervisor" or "full"; nothing for other names.
std::optional<BalloonProfile> profile_by_name(std::string_view name, uint64_t extra_features = 0);

} // namespace vbsim

#endif
