// SPDX-License-Identifier: GPL-2.0
//
// What the benchmark compares. A mode is a way of moving memory into the balloon:
//   pfn-per-page  4 KiB PFN arrays, the driver allocating a page at a time, the host making
//                 one madvise per PFN (QEMU's way)
//   pfn-merged    PFN arrays of a balloon allocated in 2 MiB blocks, the host merging each
//                 request's runs into one madvise per run (Firecracker's way)
//   chunked       VB_F_X_CHUNKED: one descriptor per run of 2 MiB blocks, one madvise per
//                 descriptor
// each as is, with the guest zeroing ballooned pages (`+guest-zero`: the 2017 kernel of the
// VIRTIO_BALLOON_F_SG thread, docs/references.md, plus init_on_free when they come back) and
// with the host promising zeroed pages (`+host-init`: VB_F_X_INIT_ON_INFLATE, the guest skips
// its zeroing). And `limit`: one madvise(MADV_DONTNEED) over the same populated range, what this machine allows at best.
#ifndef VBALLOON_BENCH_INFLATE_MODES_H
#define VBALLOON_BENCH_INFLATE_MODES_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "balloon/page_discarder.h"

namespace vbbench
{

enum class Transfer : uint8_t { kPfnPerPage, kPfnMerged, kChunked, kLimit };
enum class Zeroing : uint8_t { kNone, kGuest, kHost };

struct Mode {
	std::string name;
	Transfer transfer = Transfer::kPfnPerPage;
	Zeroing zeroing = Zeroing::kNone;

	bool is_limit() const { return transfer == Transfer::kLimit; }
	bool chunked() const { return transfer == Transfer::kChunked; }
	// Largest block the driver allocates: 0 is a page at a time (Linux), 9 is 2 MiB.
	unsigned max_chunk_order() const { return transfer == Transfer::kPfnPerPage ? 0 : 9; }
	vbsim::DiscardMode discard_mode() const
	{
		return transfer == Transfer::kPfnPerPage ? vbsim::DiscardMode::kPerPage
							 : vbsim::DiscardMode::kMergeRuns;
	}
	std::string_view transfer_name() const;
	std::string_view zeroing_name() const;
	// One line saying what the mode does, for the printed header.
	std::string description() const;
};

// Every mode, in the order the table prints them.
std::vector<Mode> all_modes();
// "pfn-per-page,chunked+host-init,limit" (or "all"). Returns nothing, with *error set,
// for an unknown or repeated name. The result keeps the table's order.
std::optional<std::vector<Mode>> parse_modes(std::string_view list, std::string* error);

} // namespace vbbench

#endif
