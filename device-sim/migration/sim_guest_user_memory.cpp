// SPDX-License-Identifier: GPL-2.0
#include <stdexcept>

#include "migration/workload.h"
#include "buddy_allocator.h"
#include "sim_guest.h"

namespace vbsim::migration
{

namespace
{

class SimGuestUserMemory : public GuestUserMemory
{
public:
	SimGuestUserMemory(GuestMemory& ram, SimGuest& guest) : ram_(ram), guest_(guest) {}
	GuestMemory& ram() override { return ram_; }

	std::vector<PfnRun> allocate(uint64_t pages) override
	{
		// Unwritten: the workload writes every page it gets whole right after (as a page
		// fault's zeroing and the program's write land together), each page through the
		// one marking path of its kind.
		UserMemory user = guest_.allocate_user_memory(pages, std::nullopt);
		std::vector<PfnRun> runs;
		for (const vb::PageRun& run : user.runs)
			runs.push_back({run.first_pfn, run.count});
		return runs;
	}

	void shuffle_free_memory(uint64_t seed) override { guest_.allocator().shuffle_free_lists(seed); }
	void order_free_memory_top_first() override { guest_.allocator().order_free_lists_top_first(); }

	void free(const std::vector<PfnRun>& runs) override
	{
		UserMemory user;
		for (const PfnRun& run : runs) {
			user.runs.push_back({run.first_pfn, run.wire_pages});
			user.pages += run.wire_pages;
		}
		guest_.free_user_memory(user);
	}

private:
	GuestMemory& ram_;
	SimGuest& guest_;
};

} // namespace

std::unique_ptr<GuestUserMemory> make_sim_guest_user_memory(GuestMemory& ram, SimGuest& guest)
{
	return std::make_unique<SimGuestUserMemory>(ram, guest);
}

bool wait_for_reporting_to_settle(SimGuest& guest, std::chrono::milliseconds timeout)
{
	// Not "every free block reported": a block split off a reported one stays unreported
	// until a later free asks for a pass (SimGuest::reporting_idle()), as in Linux.
	return guest.wait_for([&] { return guest.reporting_idle(); }, timeout);
}

} // namespace vbsim::migration
