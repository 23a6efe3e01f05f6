// SPDX-License-Identifier: GPL-2.0
//
// The destination's RAM, as far as verification needs it: a 64-bit digest per page
// (page_digest.h), never the page itself, so the destination costs 8 bytes per guest page
// (2 MiB per GiB) whatever the strategy sends whole. It starts all zero, as a fresh QEMU's
// RAM does; the table is mapped untouched, so pages that never receive data cost nothing.
#ifndef VBSIM_MIGRATION_DESTINATION_IMAGE_H
#define VBSIM_MIGRATION_DESTINATION_IMAGE_H

#include <cstdint>

namespace vbsim::migration
{

class DestinationImage
{
public:
	explicit DestinationImage(uint64_t bytes);
	~DestinationImage();
	DestinationImage(const DestinationImage&) = delete;
	DestinationImage& operator=(const DestinationImage&) = delete;

	// Receivers of different channels call these at once, for different pages.
	void receive_page(uint64_t page, const uint8_t* data);
	void receive_zero_page(uint64_t page);
	// Whether the page differs from `expected` (nullptr: an all-zero page).
	bool differs(uint64_t page, const uint8_t* expected) const;
	bool holds(uint64_t page) const { return page < pages_; }

private:
	void store(uint64_t page, uint64_t digest);

	uint64_t pages_ = 0;
	uint64_t* digests_ = nullptr; // one per page: receivers write neighbours
};

} // namespace vbsim::migration

#endif
