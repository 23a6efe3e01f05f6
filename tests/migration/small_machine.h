// SPDX-License-Identifier: GPL-2.0
//
// A small machine for the migration model's tests: guest RAM, a kernel area, the guest's
// page allocator, and stand-ins for the guest and device sides of free page hinting and
// reporting that act directly on the allocator (the virtqueue path has its own tests).
// Hints are synchronous here (they win every race); the benchmark hints from a thread.
#ifndef VB_TESTS_MIGRATION_SMALL_MACHINE_H
#define VB_TESTS_MIGRATION_SMALL_MACHINE_H

#include <memory>
#include <mutex>
#include <vector>

#include "balloon/free_page_events.h"
#include "buddy_allocator.h"
#include "memory/guest_memory.h"
#include "migration/direct_hinter.h"
#include "migration/migration.h"
#include "migration/workload.h"

namespace vbsim::migration::testing
{

struct SmallMachine {
	static constexpr uint64_t kKernelPages = 256; // 1 MiB

	explicit SmallMachine(uint64_t ram_bytes, PageBacking backing = PageBacking::kSmallPages)
	    : memory({.size_bytes = ram_bytes, .backing = backing}),
	      allocator(kKernelPages, ram_bytes / GuestMemory::kWirePageBytes - kKernelPages),
	      user_memory(make_allocator_user_memory(memory, allocator)), hinter(allocator, true)
	{
		// The kernel area holds data written outside the write helpers: make it non-zero.
		std::vector<uint8_t> kernel(kKernelPages * GuestMemory::kWirePageBytes, 0x5a);
		uint8_t* base = memory.translate(0, kernel.size());
		std::copy(kernel.begin(), kernel.end(), base);
	}

	// Free page reporting as the guest and device do it: free blocks are taken, discarded
	// by the host, and given back to the guest's free lists.
	uint64_t report_free_pages(FreePageEvents* observer)
	{
		std::vector<uint64_t> blocks;
		while (auto block = allocator.allocate(BuddyAllocator::kMaxOrder))
			blocks.push_back(*block);
		uint64_t pages = 0;
		for (uint64_t block : blocks) {
			const uint64_t bytes = GuestMemory::kWirePageBytes
					       << BuddyAllocator::kMaxOrder;
			if (memory.discard(block * GuestMemory::kWirePageBytes, bytes) != 0)
				throw std::runtime_error("discard failed");
			if (observer)
				observer->pages_reported(block * GuestMemory::kWirePageBytes,
							 bytes);
			allocator.free_run(block, uint64_t{1} << BuddyAllocator::kMaxOrder);
			pages += uint64_t{1} << BuddyAllocator::kMaxOrder;
		}
		return pages;
	}

	MigrationMachine machine(Workload& workload)
	{
		MigrationMachine m;
		m.memory = &memory;
		m.always_dirty = {{0, kKernelPages}};
		m.pages_in_use = [&workload] { return workload.pages_in_use(); };
		m.hints = &hinter;
		m.set_free_page_observer = [this](FreePageEvents* o) { hinter.set_observer(o); };
		m.workload = &workload;
		// Nothing but the workload writes this machine's RAM: pausing it stops everything,
		// so the kernel area is verified too.
		m.pause_guest = [] {};
		m.resume_guest = [] {};
		return m;
	}

	GuestMemory memory;
	BuddyAllocator allocator;
	std::unique_ptr<GuestUserMemory> user_memory;
	DirectHinter hinter;
};

} // namespace vbsim::migration::testing

#endif
