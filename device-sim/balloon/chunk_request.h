// SPDX-License-Identifier: GPL-2.0
//
// The payload of an inflate or deflate request under VB_F_X_CHUNKED
// (spec/proposals/vb-f-x-chunked.md): every device-readable descriptor IS a ballooned range,
// {guest-physical address, length}, both multiples of 4 KiB. The ring already checked that
// each range lies inside guest RAM; this checks the balloon's own rules (whole pages, no
// empty range, no page in two ranges, nothing device-writable) and turns the ranges into
// page runs. The device never reads the bytes of these buffers.
#ifndef VBSIM_BALLOON_CHUNK_REQUEST_H
#define VBSIM_BALLOON_CHUNK_REQUEST_H

#include <optional>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "balloon/page_runs.h"

namespace vbsim
{

struct DescriptorChain;

// Fills `chunks` with one run per readable descriptor, in order, or says why the whole
// request is refused (then nothing may be done with any of it).
std::optional<BalloonRejection> read_chunk_request(const DescriptorChain& chain,
						   std::vector<PfnRun>& chunks);

} // namespace vbsim

#endif
