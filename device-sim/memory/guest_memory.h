// SPDX-License-Identifier: GPL-2.0
//
// Simulated guest RAM: one anonymous mapping, guest-physical address (gpa) 0 at its start.
//
// Two rules make this the only safe way to touch guest RAM:
//  - Every gpa range coming from the guest is checked here (translate/contains) before a
//    host pointer exists for it, with the gpa + len overflow handled.
//  - Every write into guest RAM, by the device or by the simulated guest, goes through the
//    write helpers below, which all funnel into writable_span() and, once the bytes are
//    stored, into mark_written(): the dirty-page log of the live-migration model
//    (migration/dirty_log.h) sees every write, so no other code may write through a
//    pointer it got from translate().
// The mapping is surrounded by PROT_NONE guard regions: a stray access just outside RAM
// faults at once instead of corrupting host memory, which is what lets tests prove the
// device never reaches outside guest RAM.
#ifndef VBSIM_MEMORY_GUEST_MEMORY_H
#define VBSIM_MEMORY_GUEST_MEMORY_H

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "memory/little_endian.h"
#include "migration/dirty_log.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

enum class PageBacking : uint8_t {
	kSmallPages,	      // plain 4 KiB pages (MADV_NOHUGEPAGE), as QEMU without THP
	kTransparentHugePages // MADV_HUGEPAGE: 2 MiB faults and cheap whole-range discards
};

struct GuestMemoryOptions {
	uint64_t size_bytes = 0; // a non-zero multiple of 4 KiB
	PageBacking backing = PageBacking::kSmallPages;
};

class GuestMemory
{
public:
	// The host side's one page size: the protocol's 4 KiB wire page (the spec header's
	// VB_PFN_UNIT_BYTES), which the device, the migration model and the simulated guest
	// (its pages are 4 KiB) all count in.
	static constexpr uint64_t kWirePageBytes = VB_PFN_UNIT_BYTES;
	// Guard regions are this large on each side; big enough that an off-by-a-table
	// mistake (a 16-byte descriptor index past the end, a 4 KiB page past RAM) lands in one.
	static constexpr uint64_t kGuardBytes = 64 * 1024;

	// Throws std::invalid_argument for a bad size and std::system_error when the mapping
	// cannot be made.
	explicit GuestMemory(const GuestMemoryOptions& options);
	~GuestMemory();
	GuestMemory(const GuestMemory&) = delete;
	GuestMemory& operator=(const GuestMemory&) = delete;

	uint64_t size() const { return size_; }
	PageBacking backing() const { return backing_; }

	// True when [gpa, gpa + len) lies inside RAM. An empty range is inside when gpa <= size.
	bool contains(uint64_t gpa, uint64_t len) const
	{
		return gpa <= size_ && len <= size_ - gpa;
	}

	// Host pointer for a non-empty range fully inside RAM, else nullptr. For reading and
	// for syscalls on the range; writes must use the helpers below.
	uint8_t* translate(uint64_t gpa, uint64_t len) const
	{
		return len != 0 && contains(gpa, len) ? base_ + gpa : nullptr;
	}

	// ---- Reads (false, and nothing read, when the range is not inside RAM) ------------
	[[nodiscard]] bool read(uint64_t gpa, void* dst, uint64_t len) const;

	template <class T> [[nodiscard]] bool read_le(uint64_t gpa, T* value) const
	{
		T wire;
		if (!read(gpa, &wire, sizeof(wire)))
			return false;
		*value = from_le(wire);
		return true;
	}

	// An acquire load of a naturally aligned le16 (ring indices shared with another
	// thread). False when out of RAM or misaligned.
	[[nodiscard]] bool load_le16_acquire(uint64_t gpa, uint16_t* value) const;

	// ---- Writes: the single choke point for every store into guest RAM ----------------
	// Each returns false, and writes nothing, when the range is not inside RAM.
	[[nodiscard]] bool write(uint64_t gpa, const void* src, uint64_t len);
	[[nodiscard]] bool fill(uint64_t gpa, uint8_t byte, uint64_t len);

	template <class T> [[nodiscard]] bool write_le(uint64_t gpa, T value)
	{
		const T wire = to_le(value);
		return write(gpa, &wire, sizeof(wire));
	}

	// A release store of a naturally aligned le16 (publishing a ring index).
	[[nodiscard]] bool store_le16_release(uint64_t gpa, uint16_t value);

	// ---- Dirty logging (live migration) --------------------------------------------------
	// While a log is attached every write marks its pages, after the bytes are stored.
	// Attach and detach while no writer runs (the migration model pauses the guest for it);
	// writers load the pointer on each write.
	void attach_dirty_log(DirtyLog* log) { dirty_log_.store(log, std::memory_order_release); }
	DirtyLog* dirty_log() const { return dirty_log_.load(std::memory_order_acquire); }
	// Writes that mark through a writer's own DirtyMarker (batched marks; see dirty_log.h).
	[[nodiscard]] bool write(uint64_t gpa, const void* src, uint64_t len, DirtyMarker& marker);

	// ---- Host-side page management (whole 4 KiB pages; return 0 or an errno) ----------
	// madvise(MADV_DONTNEED): the pages read back as zero and stop being resident. One
	// call is one syscall, so callers count calls to measure discard cost.
	int discard(uint64_t gpa, uint64_t len);
	// Makes pages resident without changing their contents (MADV_POPULATE_WRITE, or a
	// content-preserving touch of each page on kernels without it).
	int populate(uint64_t gpa, uint64_t len);
	// Bytes of the 4 KiB pages overlapping [gpa, gpa + len) that are resident now
	// (mincore). Throws std::out_of_range for a range outside RAM.
	uint64_t resident_bytes(uint64_t gpa, uint64_t len) const;

private:
	// Where every write lands (nullptr when outside RAM).
	uint8_t* writable_span(uint64_t gpa, uint64_t len);
	// Marks the pages of [gpa, gpa + len) in the attached log, after the write.
	void mark_written(uint64_t gpa, uint64_t len)
	{
		DirtyLog* log = dirty_log_.load(std::memory_order_acquire);
		if (log != nullptr && len != 0)
			log->mark_range(gpa / kWirePageBytes, (gpa + len - 1) / kWirePageBytes -
								      gpa / kWirePageBytes + 1);
	}
	bool page_range_valid(uint64_t gpa, uint64_t len) const;

	uint8_t* reservation_ = nullptr;
	uint64_t reservation_bytes_ = 0;
	uint8_t* base_ = nullptr;
	uint64_t size_ = 0;
	PageBacking backing_;
	std::atomic<DirtyLog*> dirty_log_{nullptr};
};

} // namespace vbsim

#endif
