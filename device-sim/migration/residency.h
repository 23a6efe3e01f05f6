// SPDX-License-Identifier: GPL-2.0
#ifndef VBSIM_MIGRATION_RESIDENCY_H
#define VBSIM_MIGRATION_RESIDENCY_H

#include <cstdint>
#include <vector>

#include "memory/guest_memory.h"

namespace vbsim::migration
{

// Which source pages are backed by memory now. A page that is not reads as zero; on a
// real host reading it maps the shared zero page, here it would
// allocate a page, so the sender reads a resident zero buffer instead: the same bytes and
// the same cache behaviour as the host's zero page. With the report strategies the host
// uses this to skip absent pages, and pays for the mincore calls.
class Residency
{
public:
	explicit Residency(const GuestMemory& memory)
	    : memory_(memory), resident_(memory.size() / GuestMemory::kWirePageBytes)
	{
	}

	// Returns the host CPU the snapshot took, in ns.
	uint64_t snapshot();
	bool resident(uint64_t page) const { return resident_[page] & 1; }

private:
	const GuestMemory& memory_;
	std::vector<unsigned char> resident_;
};

} // namespace vbsim::migration

#endif
