// SPDX-License-Identifier: GPL-2.0
//
// The statsq payload: the same subset of tags on every report, 10-byte packed entries.
#ifndef VBALLOON_CORE_STATS_REPORT_H
#define VBALLOON_CORE_STATS_REPORT_H

#include <stdint.h>

#include "vballoon/core/os_interface.h"

namespace vb {

// Writes one entry per tag in `tag_mask` (ascending tag order) and returns the count.
// Tags the OS cannot report this time are sent as 0 rather than dropped, so the subset
// never changes between reports.
uint32_t fill_stats_entries(vb_stat_entry* entries, const MemoryStats& stats, uint32_t tag_mask);

} // namespace vb

#endif
