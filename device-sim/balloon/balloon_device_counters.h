// SPDX-License-Identifier: GPL-2.0
//
// What the balloon device has done, and every balloon-level input it refused, by reason.
// Ring-level rejections (bad descriptors) are counted per queue by the transport; these
// are about the payload of well-formed chains. Atomic: written on the device thread,
// read by tests on theirs.
#ifndef VBSIM_BALLOON_BALLOON_DEVICE_COUNTERS_H
#define VBSIM_BALLOON_BALLOON_DEVICE_COUNTERS_H

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vbsim
{

enum class BalloonRejection : uint8_t {
	// A whole request refused (returned used with length 0, nothing done):
	kEmptyRequest,		 // no device-readable bytes
	kWritableBuffer,	 // device-writable buffers on a queue whose buffers are out-only
	kPfnArrayNotMultipleOf4, // a PFN array is le32 entries
	kPfnArrayTooLarge,	 // above the profile's max_pfn_bytes_per_request
	kChunkMisaligned,	 // VB_F_X_CHUNKED: a range not in whole 4 KiB pages
	kBitmapMissing,		 // bit 21, or bit 7: no device-writable bitmap big enough
	// VB_F_X_CHUNKED: two ranges of one request share a page.
	kChunkOverlap,
	// One PFN of a request refused, the rest still processed:
	kPfnOutsideRam, // the 4 KiB page is not fully inside guest RAM
	// Counted, but done anyway because doing it is harmless:
	kPfnAlreadyHostOwned, // inflate of a page the balloon already holds (discarded again)
	kPfnNotHostOwned,     // deflate of a page the balloon does not hold (acked)
	// Free page hints and reports:
	kHintMalformed,	  // a free_page_vq chain that is neither one 4-byte id nor in-buffers
	kReportMalformed, // a reporting_vq chain with device-readable parts, or empty
	// A hinted or reported range not whole, aligned 4 KiB pages (ranges beyond RAM never get
	// here: the ring refuses their chain):
	kRangeNotWholePages,
	kReportedBalloonPage, // a reported range holding pages the balloon holds (not discarded)
	// Stats buffers (the valid part is still used):
	kStatsPartialEntry,   // length not a multiple of 10: the trailing bytes are ignored
	kStatsTooManyEntries, // entries beyond the bound are ignored
	kCount
};

inline constexpr size_t kBalloonRejectionCount = static_cast<size_t>(BalloonRejection::kCount);

std::string_view to_string(BalloonRejection reason);

// The device sees only wire pages (4 KiB, VB_PFN_UNIT_BYTES), whatever the guest's page
// size: every `wire_pages_*` counter counts them.
struct BalloonDeviceCounters {
	std::atomic<uint64_t> inflate_requests{0}; // inflate chains processed
	std::atomic<uint64_t> deflate_requests{0}; // deflate chains processed
	std::atomic<uint64_t> wire_pages_inflated{0};  // became host-owned
	std::atomic<uint64_t> wire_pages_deflated{0};  // handed back with an ack
	std::atomic<uint64_t> wire_pages_discarded{0}; // madvise'd away
	std::atomic<uint64_t> discard_calls{0};	   // madvise syscalls made
	std::atomic<uint64_t> discard_failures{0}; // madvise calls that returned an error
	std::atomic<uint64_t> wire_pages_reported_initialised{
		0}; // bits set in init-on-inflate bitmaps
	// Requests whose pages were not discarded because discards are inhibited (postcopy,
	// a background snapshot, a device that must see guest RAM: QEMU's
	// virtio_balloon_inhibited()).
	std::atomic<uint64_t> discards_inhibited{0};
	// Device-thread time: validating requests and taking ownership, and inside madvise.
	std::atomic<uint64_t> translate_ns{0};
	std::atomic<uint64_t> discard_ns{0};
	// Requests of more than 256 PFNs: fine here, but Firecracker skips them and
	// cloud-hypervisor rejects them, so a driver that sends them breaks on those hosts.
	std::atomic<uint64_t> requests_over_peer_cap{0};
	std::atomic<uint64_t> wire_pages_released_by_reset{0}; // held by the balloon when reset

	// Free page hinting: rounds the driver echoed and closed, ids ignored (stale, DONE from
	// the driver, repeated), wire pages hinted in a live round or ignored outside one.
	std::atomic<uint64_t> hint_rounds_started{0};
	std::atomic<uint64_t> hint_rounds_stopped{0};
	std::atomic<uint64_t> hint_ids_ignored{0};
	std::atomic<uint64_t> wire_pages_hinted{0};
	std::atomic<uint64_t> wire_pages_hint_ignored{0};
	// Free page reporting: reports acknowledged; wire pages discarded, or kept because
	// poison_val is not zero; reports whose discard failed.
	std::atomic<uint64_t> report_requests{0};
	std::atomic<uint64_t> wire_pages_reported_discarded{0};
	std::atomic<uint64_t> wire_pages_reported_kept{0};
	std::atomic<uint64_t> report_discard_failures{0};
	// DEVICE_INIT_REPORTED: wire pages a report's used length said were initialised.
	std::atomic<uint64_t> wire_pages_reported_device_initialised{0};
	std::atomic<uint64_t> stats_requests{0};      // buffers returned to ask for fresh stats
	std::atomic<uint64_t> stats_updates{0};	      // buffers parsed
	std::atomic<uint64_t> stats_extra_buffers{0}; // a second buffer while one was held
	std::atomic<uint64_t> stats_unknown_tags{0};  // entries ignored for an unknown tag
	std::atomic<uint64_t> stats_requests_without_buffer{0}; // asked while none was held
	// Legacy interface: first statsq buffers held but not read (old drivers left them
	// uninitialised), and byte writes to `actual` kept until its last byte came.
	std::atomic<uint64_t> stats_buffers_disregarded{0};
	std::atomic<uint64_t> actual_partial_writes{0};

	std::array<std::atomic<uint64_t>, kBalloonRejectionCount> rejected{};

	uint64_t rejected_by(BalloonRejection reason) const
	{
		return rejected[static_cast<size_t>(reason)].load();
	}
	void reject(BalloonRejection reason, uint64_t count = 1)
	{
		rejected[static_cast<size_t>(reason)].fetch_add(count, std::memory_order_relaxed);
	}
};

} // namespace vbsim

#endif
