// SPDX-License-Identifier: GPL-2.0
//
// Which 4 KiB guest pages the host holds right now: set when an inflate is processed,
// cleared just before a deflate is acked. With MUST_TELL_HOST the guest must not touch a
// deflated page until the ack, so a simulated guest asks owns(pfn) before reusing a page
// and catches any reuse that came too early. Atomic words: read from the guest and test
// threads while the device thread updates them.
#ifndef VBSIM_BALLOON_HOST_PAGE_OWNERSHIP_H
#define VBSIM_BALLOON_HOST_PAGE_OWNERSHIP_H

#include <atomic>
#include <cstdint>
#include <memory>

namespace vbsim
{

class HostPageOwnership
{
public:
	explicit HostPageOwnership(uint64_t page_count);

	uint64_t page_count() const { return page_count_; }
	// False for PFNs beyond RAM.
	bool owns(uint64_t pfn) const;
	uint64_t owned_wire_pages() const
	{
		return owned_wire_pages_.load(std::memory_order_acquire);
	}

	// Each returns whether the page changed hands (false: already so, or beyond RAM).
	bool take(uint64_t pfn);
	bool give_back(uint64_t pfn);
	// The same for a run of pages, a word of the bitmap at a time; each returns how many
	// pages changed hands (pages beyond RAM are ignored).
	uint64_t take_run(uint64_t first_pfn, uint64_t count);
	uint64_t give_back_run(uint64_t first_pfn, uint64_t count);
	// How many pages of the run the host holds (pages beyond RAM count as not held).
	uint64_t owned_in_run(uint64_t first_pfn, uint64_t count) const;
	// Gives every page back; returns how many the host held.
	uint64_t give_back_all();

private:
	const uint64_t page_count_;
	std::unique_ptr<std::atomic<uint64_t>[]> words_;
	std::atomic<uint64_t> owned_wire_pages_{0};
};

} // namespace vbsim

#endif
