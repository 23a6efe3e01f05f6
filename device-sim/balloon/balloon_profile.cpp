// SPDX-License-Identifier: GPL-2.0
#include "balloon/balloon_profile.h"

#include <stdexcept>

#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

namespace
{

constexpr uint64_t feature(unsigned bit)
{
	return VB_FEATURE(bit);
}

BalloonProfile with_extra_features(BalloonProfile profile, uint64_t extra_features)
{
	if (extra_features & ~profile.optional_features)
		throw std::invalid_argument("balloon profile: feature not offered by this host");
	profile.offered_features |= extra_features;
	return profile;
}

} // namespace

// QEMU 7.2, hw/virtio/virtio-balloon.c (checked at qemu d1c81c34; unchanged since 7.2 for
// these facts): STATS_VQ is added unconditionally in get_features; the properties are
// deflate-on-oom=off, free-page-hint=off, page-poison=on, free-page-reporting=off;
// MUST_TELL_HOST is never offered. The config size is 16 bytes as soon as PAGE_POISON (or
// FPH, or reporting) is offered, so 16 with the defaults. ivq/dvq/svq have 128 entries,
// free_page_vq VIRTQUEUE_MAX_SIZE (1024), reporting_vq 32. virtio-pci adds
// RING_INDIRECT_DESC and RING_EVENT_IDX (DEFINE_VIRTIO_COMMON_FEATURES, both on).
// Inflate has no per-descriptor cap. virtio_balloon_handle_output() calls virtio_notify()
// after each element it pushes, so the guest hears of every request as it is done
// (EVENT_IDX permitting).
BalloonProfile qemu_7_2_profile(uint64_t extra_features)
{
	BalloonProfile profile;
	profile.name = "qemu-7.2";
	profile.offered_features = feature(VB_F_VERSION_1) | feature(VB_F_RING_EVENT_IDX) |
				   feature(VB_F_RING_INDIRECT_DESC) | feature(VB_F_STATS_VQ) |
				   feature(VB_F_PAGE_POISON);
	profile.optional_features = feature(VB_F_DEFLATE_ON_OOM) | feature(VB_F_FREE_PAGE_HINT) |
				    feature(VB_F_PAGE_REPORTING);
	profile.config_size_bytes = VB_CONFIG_SIZE_WITH_POISON;
	profile.queue_size = 128;
	profile.free_page_queue_size = 1024;
	profile.reporting_queue_size = 32;
	profile.max_pfn_bytes_per_request = kUncappedHostPfnBytesBound;
	profile.notifies_each_request = true;
	return with_extra_features(profile, extra_features);
}

// Firecracker, src/vmm/src/devices/virtio/balloon/ (checked at 81b38b9d): VERSION_1 always;
// DEFLATE_ON_OOM, STATS_VQ (when stats_polling_interval_s > 0), FREE_PAGE_HINTING and
// FREE_PAGE_REPORTING on request; no MUST_TELL_HOST, no ring features. process_inflate()
// signals the used queue once, after its pass over the queue (as cloud-hypervisor does).
// BALLOON_CONFIG_SPACE_SIZE = 12, every queue FIRECRACKER_MAX_QUEUE_SIZE = 256, and
// descriptors of more than MAX_PAGES_IN_DESC = 256 PFNs are skipped.
BalloonProfile firecracker_profile(uint64_t extra_features)
{
	BalloonProfile profile;
	profile.name = "firecracker";
	profile.offered_features = feature(VB_F_VERSION_1);
	profile.optional_features = feature(VB_F_STATS_VQ) | feature(VB_F_DEFLATE_ON_OOM) |
				    feature(VB_F_FREE_PAGE_HINT) | feature(VB_F_PAGE_REPORTING);
	profile.config_size_bytes = VB_CONFIG_SIZE_WITH_HINT;
	profile.queue_size = 256;
	profile.free_page_queue_size = 256;
	profile.reporting_queue_size = 256;
	profile.max_pfn_bytes_per_request = VB_PFNS_PER_DESCRIPTOR_MAX * VB_PFN_ENTRY_BYTES;
	return with_extra_features(profile, extra_features);
}

// cloud-hypervisor, virtio-devices/src/balloon.rs (checked at ae44c297): VERSION_1 always;
// DEFLATE_ON_OOM and REPORTING on request (ACCESS_PLATFORM for confidential guests, not
// modelled); no stats queue. The config is {num_pages, actual} = 8 bytes and only `actual`
// is writable; QUEUE_SIZE = 128, REPORTING_QUEUE_SIZE = 32; descriptors above
// VIRTIO_BALLOON_MAX_PFN_BYTES = 1024 are rejected.
BalloonProfile cloud_hypervisor_profile(uint64_t extra_features)
{
	BalloonProfile profile;
	profile.name = "cloud-hypervisor";
	profile.offered_features = feature(VB_F_VERSION_1);
	profile.optional_features = feature(VB_F_DEFLATE_ON_OOM) | feature(VB_F_PAGE_REPORTING);
	profile.config_size_bytes = VB_CONFIG_SIZE_MIN;
	profile.queue_size = 128;
	profile.reporting_queue_size = 32;
	profile.max_pfn_bytes_per_request = VB_PFNS_PER_DESCRIPTOR_MAX * VB_PFN_ENTRY_BYTES;
	return with_extra_features(profile, extra_features);
}

BalloonProfile full_profile()
{
	BalloonProfile profile;
	profile.name = "full";
	profile.offered_features = feature(VB_F_VERSION_1) | feature(VB_F_RING_EVENT_IDX) |
				   feature(VB_F_RING_INDIRECT_DESC) | feature(VB_F_MUST_TELL_HOST) |
				   feature(VB_F_STATS_VQ) | feature(VB_F_DEFLATE_ON_OOM) |
				   feature(VB_F_FREE_PAGE_HINT) | feature(VB_F_PAGE_POISON) |
				   feature(VB_F_PAGE_REPORTING);
	profile.config_size_bytes = VB_CONFIG_SIZE_WITH_POISON;
	profile.queue_size = 256;
	profile.free_page_queue_size = 256;
	profile.reporting_queue_size = 32;
	profile.max_pfn_bytes_per_request = kUncappedHostPfnBytesBound;
	return profile;
}

std::optional<BalloonProfile> profile_by_name(std::string_view name, uint64_t extra_features)
{
	if (name == "qemu-7.2")
		return qemu_7_2_profile(extra_features);
	if (name == "firecracker")
		return firecracker_profile(extra_features);
	if (name == "cloud-hypervisor")
		return cloud_hypervisor_profile(extra_features);
	if (name == "full") {
		if (extra_features != 0)
			throw std::invalid_argument(
				"balloon profile: full already offers everything");
		return full_profile();
	}
	return std::nullopt;
}

} // namespace vbsim
