// SPDX-License-Identifier: GPL-2.0
#include <stdexcept>

#include "migration/workload.h"
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

	std::vector<PageRange> allocate(uint64_t pages) override
	{
		// The guest writes its fill byte, the workload its own contents after: the page
		// is written whole either way.
		UserMemory user = guest_.allocate_user_memory(pages, 0x11);
		std::vector<PageRange> runs;
		for (const vb::PageRun& run : user.runs)
			runs.push_back({run.first_pfn, run.count});
		return runs;
	}

	void free(const std::vector<PageRange>& runs) override
	{
		UserMemory user;
		for (const PageRange& run : runs) {
			user.runs.push_back({run.first_page, run.pages});
			user.pages += run.pages;
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

} // namespace vbsim::migration
