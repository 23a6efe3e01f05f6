// SPDX-License-Identifier: GPL-2.0
//
// The destination's RAM, as far as verification needs it: a 64-bit digest per page
// (page_digest.h), never the page itself, so the destination costs 8 bytes per guest page
// (2 MiB per GiB) whatever the strategy sends whole. It starts all zero, as a fresh QEMU's
// RAM does; the table is mapped untouched, so pages that never receive data cost nothing.
//
// A stream that stands for a real destination QEMU (loopback TCP) also has the RAM itself
// (ram()): its receiver reads each page into it at the page's address, as QEMU's multifd
// receiver reads straight into guest RAM, so a page's first arrival costs what first
// touching memory costs on this host. Mapped on first use, guest-sized, MADV_HUGEPAGE as
// QEMU maps guest RAM; resident only where pages landed.
#ifndef VBSIM_MIGRATION_DESTINATION_IMAGE_H
#define VBSIM_MIGRATION_DESTINATION_IMAGE_H

#include <cstdint>
#include <mutex>

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

	// The destination's RAM (see above), mapped on the first call; any thread.
	uint8_t* ram();
	// Whether data ever landed in the page's RAM (a zero page over one that did is written
	// as zeros, over one that did not it is left alone, as QEMU's receiver does). Receivers
	// of different channels mark different pages; a page's later round on another channel
	// comes after the channels' sync.
	bool ram_written(uint64_t page) const { return ram_written_[page] != 0; }
	void mark_ram_written(uint64_t page) { ram_written_[page] = 1; }

private:
	void store(uint64_t page, uint64_t digest);

	uint64_t pages_ = 0;
	uint64_t* digests_ = nullptr; // one per page: receivers write neighbours
	std::once_flag ram_mapped_;
	uint8_t* ram_ = nullptr;
	uint8_t* ram_written_ = nullptr;
};

} // namespace vbsim::migration

#endif
