// SPDX-License-Identifier: GPL-2.0
#include "migration/destination_image.h"

#include <cerrno>
#include <cstring>
#include <system_error>

#include <sys/mman.h>

#include "migration/zero_page.h"

namespace vbsim::migration
{

namespace
{
constexpr uint64_t kPage = 4096;
}

DestinationImage::DestinationImage(uint64_t bytes) : bytes_(bytes), written_(new uint8_t[bytes / kPage]())
{
	void* map = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
			 -1, 0);
	if (map == MAP_FAILED)
		throw std::system_error(errno, std::generic_category(), "mapping the destination image");
	base_ = static_cast<uint8_t*>(map);
	// Huge pages: first touches cost 2 MiB faults, not 4 KiB ones (on this machine a first touch of a 2 MiB page costs a fault per 2 MiB).
	madvise(base_, bytes, MADV_HUGEPAGE);
}

DestinationImage::~DestinationImage()
{
	munmap(base_, bytes_);
}

void DestinationImage::receive_page(uint64_t page, const uint8_t* data)
{
	if (!written_[page] && page_is_zero(data))
		return; // already zero here: do not allocate memory for it
	std::memcpy(base_ + page * kPage, data, kPage);
	written_[page] = 1;
}

void DestinationImage::receive_zero_page(uint64_t page)
{
	if (!written_[page])
		return;
	std::memset(base_ + page * kPage, 0, kPage);
	written_[page] = 0;
}

bool DestinationImage::differs(uint64_t page, const uint8_t* expected) const
{
	if (!written_[page])
		return expected != nullptr && !page_is_zero(expected);
	if (expected == nullptr)
		return !page_is_zero(base_ + page * kPage);
	return std::memcmp(base_ + page * kPage, expected, kPage) != 0;
}

uint64_t DestinationImage::pages_written() const
{
	uint64_t n = 0;
	for (uint64_t p = 0; p < bytes_ / kPage; p++)
		n += written_[p];
	return n;
}

} // namespace vbsim::migration
