// SPDX-License-Identifier: GPL-2.0
//
// The destination's copy of guest RAM. It starts all zero, as a fresh QEMU's RAM does, and
// only pages received with data are ever written: a zero page received for a page never
// written costs nothing (QEMU's destination also checks before zeroing).
#ifndef VBSIM_MIGRATION_DESTINATION_IMAGE_H
#define VBSIM_MIGRATION_DESTINATION_IMAGE_H

#include <cstdint>
#include <memory>

namespace vbsim::migration
{

class DestinationImage
{
public:
	explicit DestinationImage(uint64_t bytes);
	~DestinationImage();
	DestinationImage(const DestinationImage&) = delete;
	DestinationImage& operator=(const DestinationImage&) = delete;

	void receive_page(uint64_t page, const uint8_t* data);
	void receive_zero_page(uint64_t page);
	// Whether the page differs from `expected` (nullptr: an all-zero page).
	bool differs(uint64_t page, const uint8_t* expected) const;
	uint64_t pages_written() const;
	bool holds(uint64_t page) const { return page < bytes_ / 4096; }

private:
	uint8_t* base_ = nullptr;
	uint64_t bytes_ = 0;
	std::unique_ptr<uint8_t[]> written_; // one byte per page: senders write neighbours
};

} // namespace vbsim::migration

#endif
