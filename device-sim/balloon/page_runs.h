// SPDX-License-Identifier: GPL-2.0
//
// Turning a list of PFNs into runs of contiguous pages, so a discard costs one syscall per
// run instead of one per page (Firecracker sorts and compacts the same way). Pure, so the
// properties (nothing lost, nothing duplicated, sorted, maximal runs) are tested directly.
#ifndef VBSIM_BALLOON_PAGE_RUNS_H
#define VBSIM_BALLOON_PAGE_RUNS_H

#include <cstdint>
#include <vector>

#include "memory/pfn_run.h"

namespace vbsim
{

// Sorts and de-duplicates `pfns` in place, then writes the maximal runs they form, in
// ascending order, into `runs` (cleared first).
void merge_into_runs(std::vector<uint64_t>& pfns, std::vector<PfnRun>& runs);

} // namespace vbsim

#endif
