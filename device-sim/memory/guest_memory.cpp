// SPDX-License-Identifier: GPL-2.0
#include "memory/guest_memory.h"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <system_error>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include "vballoon/support/mutant.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14; older libc headers lack the name
#endif

namespace vbsim
{

namespace
{

// Huge pages can only back RAM that starts on a 2 MiB boundary, so THP-backed RAM is
// placed there; 4 KiB-backed RAM needs no more than page alignment.
constexpr uint64_t kHugePageBytes = 2 * 1024 * 1024;

uint64_t align_up(uint64_t value, uint64_t align)
{
	return (value + align - 1) & ~(align - 1);
}

} // namespace

GuestMemory::GuestMemory(const GuestMemoryOptions& options) : backing_(options.backing)
{
	if (options.size_bytes == 0 || options.size_bytes % kWirePageBytes != 0)
		throw std::invalid_argument("guest RAM size must be a non-zero multiple of 4 KiB");
	size_ = options.size_bytes;

	const uint64_t alignment =
		backing_ == PageBacking::kTransparentHugePages ? kHugePageBytes : kWirePageBytes;
	reservation_bytes_ = kGuardBytes + (alignment - kWirePageBytes) + size_ + kGuardBytes;

	// Reserve guard + RAM + guard inaccessible, then map RAM read-write over the middle:
	// the guards stay PROT_NONE and RAM gets a mapping (VMA) of its own for madvise.
	void* reservation = mmap(nullptr, reservation_bytes_, PROT_NONE,
				 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (reservation == MAP_FAILED)
		throw std::system_error(errno, std::generic_category(), "reserving guest RAM");
	reservation_ = static_cast<uint8_t*>(reservation);

	const uint64_t ram_start =
		align_up(reinterpret_cast<uint64_t>(reservation_) + kGuardBytes, alignment);
	void* ram = mmap(reinterpret_cast<void*>(ram_start), size_, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
	if (ram == MAP_FAILED) {
		const int error = errno;
		munmap(reservation_, reservation_bytes_);
		throw std::system_error(error, std::generic_category(), "mapping guest RAM");
	}
	base_ = static_cast<uint8_t*>(ram);

	// Ask explicitly either way, so the backing does not depend on the host's THP default.
	const int advice =
		backing_ == PageBacking::kTransparentHugePages ? MADV_HUGEPAGE : MADV_NOHUGEPAGE;
	if (madvise(base_, size_, advice) != 0 && backing_ == PageBacking::kTransparentHugePages) {
		const int error = errno;
		munmap(reservation_, reservation_bytes_);
		throw std::system_error(error, std::generic_category(),
					"MADV_HUGEPAGE on guest RAM");
	}
}

GuestMemory::~GuestMemory()
{
	munmap(reservation_, reservation_bytes_);
}

bool GuestMemory::read(uint64_t gpa, void* dst, uint64_t len) const
{
	if (!contains(gpa, len))
		return false;
	if (len != 0)
		std::memcpy(dst, base_ + gpa, len);
	return true;
}

bool GuestMemory::load_le16_acquire(uint64_t gpa, uint16_t* value) const
{
	if (!contains(gpa, sizeof(uint16_t)) || gpa % alignof(uint16_t) != 0)
		return false;
	std::atomic_ref<uint16_t> field(*reinterpret_cast<uint16_t*>(base_ + gpa));
	*value = from_le(field.load(std::memory_order_acquire));
	return true;
}

uint8_t* GuestMemory::writable_span(uint64_t gpa, uint64_t len)
{
	if (!contains(gpa, len))
		return nullptr;
	return base_ + gpa;
}

bool GuestMemory::write(uint64_t gpa, const void* src, uint64_t len)
{
	uint8_t* dst = writable_span(gpa, len);
	if (dst == nullptr)
		return false;
	if (len != 0)
		std::memcpy(dst, src, len);
	// Mutant for the migration verifier (spec/compare_mutants.tsv): this path unlogged.
	if (!VB_MUTANT(MIG_PLAIN_WRITES_UNLOGGED))
		mark_written(gpa, len);
	return true;
}

bool GuestMemory::write(uint64_t gpa, const void* src, uint64_t len, DirtyMarker& marker)
{
	uint8_t* dst = writable_span(gpa, len);
	if (dst == nullptr)
		return false;
	if (len == 0)
		return true;
	std::memcpy(dst, src, len);
	if (VB_MUTANT(MIG_MARKER_WRITES_UNLOGGED)) // spec/compare_mutants.tsv
		return true;
	for (uint64_t page = gpa / kWirePageBytes; page <= (gpa + len - 1) / kWirePageBytes; page++)
		marker.mark(page);
	return true;
}

bool GuestMemory::fill(uint64_t gpa, uint8_t byte, uint64_t len)
{
	uint8_t* dst = writable_span(gpa, len);
	if (dst == nullptr)
		return false;
	if (len != 0)
		std::memset(dst, byte, len);
	mark_written(gpa, len);
	return true;
}

bool GuestMemory::store_le16_release(uint64_t gpa, uint16_t value)
{
	if (gpa % alignof(uint16_t) != 0)
		return false;
	uint8_t* dst = writable_span(gpa, sizeof(uint16_t));
	if (dst == nullptr)
		return false;
	std::atomic_ref<uint16_t> field(*reinterpret_cast<uint16_t*>(dst));
	field.store(to_le(value), std::memory_order_release);
	mark_written(gpa, sizeof(uint16_t));
	return true;
}

bool GuestMemory::page_range_valid(uint64_t gpa, uint64_t len) const
{
	return len != 0 && gpa % kWirePageBytes == 0 && len % kWirePageBytes == 0 &&
	       contains(gpa, len);
}

int GuestMemory::discard(uint64_t gpa, uint64_t len)
{
	if (!page_range_valid(gpa, len))
		return EINVAL;
	// Discarding changes what the guest reads (zeroes), so it is a write for the dirty log
	// too, marked once the pages are gone.
	uint8_t* start = writable_span(gpa, len);
	if (madvise(start, len, MADV_DONTNEED) != 0)
		return errno;
	mark_written(gpa, len);
	return 0;
}

int GuestMemory::populate(uint64_t gpa, uint64_t len)
{
	if (!page_range_valid(gpa, len))
		return EINVAL;
	uint8_t* start = base_ + gpa;
	if (madvise(start, len, MADV_POPULATE_WRITE) == 0)
		return 0;
	if (errno != EINVAL)
		return errno;
	// Old kernel: fault each page in for write without changing a byte of it. Contents
	// are unchanged, so this is not a guest-visible write and bypasses the dirty log.
	for (uint64_t offset = 0; offset < len; offset += kWirePageBytes)
		std::atomic_ref<uint8_t>(start[offset]).fetch_or(0, std::memory_order_relaxed);
	return 0;
}

uint64_t GuestMemory::resident_bytes(uint64_t gpa, uint64_t len) const
{
	if (!contains(gpa, len))
		throw std::out_of_range("resident_bytes: range outside guest RAM");
	if (len == 0)
		return 0;
	const uint64_t first = gpa / kWirePageBytes * kWirePageBytes;
	const uint64_t end = align_up(gpa + len, kWirePageBytes);
	std::vector<unsigned char> residency((end - first) / kWirePageBytes);
	if (mincore(base_ + first, end - first, residency.data()) != 0)
		throw std::system_error(errno, std::generic_category(), "mincore on guest RAM");
	uint64_t resident_pages = 0;
	for (unsigned char page : residency)
		resident_pages += page & 1;
	return resident_pages * kWirePageBytes;
}

} // namespace vbsim
