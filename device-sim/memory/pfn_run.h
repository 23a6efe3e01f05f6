// SPDX-License-Identifier: GPL-2.0
//
// A run of contiguous 4 KiB frames of guest RAM, the one frame range of the host side: the
// balloon device's PFN arrays, chunks and discards, and the migration model's pages (QEMU's
// 4 KiB target pages) all count wire pages (VB_PFN_UNIT_BYTES), and so does the simulated
// guest, whose pages are 4 KiB.
//
// The driver core's vb::PageRun (driver/core/include/vballoon/core/os_interface.h) stays a
// type of its own: it counts the guest's pages, which are wire pages only on a 4 KiB-page
// guest, carries flags the host never sees, and lives in the freestanding core, which
// cannot include the simulator.
#ifndef VBSIM_MEMORY_PFN_RUN_H
#define VBSIM_MEMORY_PFN_RUN_H

#include <cstdint>

namespace vbsim
{

struct PfnRun {
	uint64_t first_pfn = 0;	 // guest-physical address >> VB_PFN_SHIFT
	uint64_t wire_pages = 0; // 4 KiB frames from first_pfn on

	bool operator==(const PfnRun&) const = default;
};

} // namespace vbsim

#endif
