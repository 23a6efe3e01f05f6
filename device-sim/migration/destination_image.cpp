// SPDX-License-Identifier: GPL-2.0
#include "migration/destination_image.h"

#include <cerrno>
#include <system_error>

#include <sys/mman.h>

#include "memory/guest_memory.h"
#include "migration/page_digest.h"

namespace vbsim::migration
{

namespace
{
constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
}

DestinationImage::DestinationImage(uint64_t bytes) : pages_(bytes / kPage)
{
	// mmap, not a zero-filled vector: only the parts of the table a page with data lands in
	// become resident (a 128 GiB fresh guest sends a few hundred MiB with data).
	void* map = mmap(nullptr, pages_ * sizeof(uint64_t), PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (map == MAP_FAILED)
		throw std::system_error(errno, std::generic_category(),
					"mapping the destination's page digests");
	digests_ = static_cast<uint64_t*>(map);
}

DestinationImage::~DestinationImage()
{
	munmap(digests_, pages_ * sizeof(uint64_t));
	if (ram_ != nullptr) {
		munmap(ram_, pages_ * kPage);
		munmap(ram_written_, pages_);
	}
}

uint8_t* DestinationImage::ram()
{
	std::call_once(ram_mapped_, [this] {
		void* ram = mmap(nullptr, pages_ * kPage, PROT_READ | PROT_WRITE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		void* written = mmap(nullptr, pages_, PROT_READ | PROT_WRITE,
				     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (ram == MAP_FAILED || written == MAP_FAILED) {
			const int error = errno;
			if (ram != MAP_FAILED)
				munmap(ram, pages_ * kPage);
			if (written != MAP_FAILED)
				munmap(written, pages_);
			throw std::system_error(error, std::generic_category(),
						"mapping the destination's RAM");
		}
		// As QEMU maps guest RAM (ram_block_add): a first touch then faults in a huge page.
		madvise(ram, pages_ * kPage, MADV_HUGEPAGE);
		ram_ = static_cast<uint8_t*>(ram);
		ram_written_ = static_cast<uint8_t*>(written);
	});
	return ram_;
}

void DestinationImage::receive_page(uint64_t page, const uint8_t* data)
{
	store(page, page_digest(data));
}

void DestinationImage::receive_zero_page(uint64_t page)
{
	store(page, 0);
}

// Writes only a digest that changes: zero pages over never-written ones (most of a fresh
// guest) leave the table's pages untouched, so they cost no memory.
void DestinationImage::store(uint64_t page, uint64_t digest)
{
	if (digests_[page] != digest)
		digests_[page] = digest;
}

bool DestinationImage::differs(uint64_t page, const uint8_t* expected) const
{
	const uint64_t expected_digest = expected == nullptr ? 0 : page_digest(expected);
	return digests_[page] != expected_digest;
}

} // namespace vbsim::migration
