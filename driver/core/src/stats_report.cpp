// SPDX-License-Identifier: GPL-2.0
#include "vballoon/core/stats_report.h"

#include "vballoon/support/little_endian.h"

namespace vb {

uint32_t fill_stats_entries(vb_stat_entry* entries, const MemoryStats& stats, uint32_t tag_mask)
{
	uint32_t count = 0;

	for (uint16_t tag = 0; tag < VB_S_NR; tag++) {
		if (!(tag_mask & (1u << tag)))
			continue;
		entries[count].tag = to_le16(tag);
		entries[count].val = to_le64((stats.present_mask & (1u << tag)) ? stats.value[tag] : 0);
		count++;
	}
	return count;
}

} // namespace vb
