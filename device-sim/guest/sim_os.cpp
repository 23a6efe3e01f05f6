// SPDX-License-Identifier: GPL-2.0
#include "sim_os.h"

#include "pressure_model.h"

#include <poll.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "vballoon/support/mutant.h"

namespace vbsim {

namespace {

// The simulated guest's pages are 4 KiB: one guest page is one wire page.
constexpr uint64_t kPageBytes = GuestMemory::kWirePageBytes;

std::vector<ChainBuffer> to_chain_buffers(const vb::Segment* segments, unsigned count)
{
	std::vector<ChainBuffer> out(count);
	for (unsigned i = 0; i < count; i++)
		out[i] = {segments[i].phys_addr, segments[i].len};
	return out;
}

} // namespace

SimOs::SimOs(GuestMemory& memory, Transport& transport, BuddyAllocator& allocator,
	     FreePagePolicy free_policy, bool verbose)
    : memory_(memory), transport_(transport), allocator_(allocator), free_policy_(free_policy),
      verbose_(verbose), ram_base_(memory.translate(0, memory.size())),
      dequeued_(allocator.frame_count(), 0), host_zeroed_(allocator.frame_count())
{
	transport_index_.fill(-1);
}

void SimOs::set_ring(vb::QueueKind kind, unsigned transport_index, std::unique_ptr<DriverRing> ring)
{
	rings_[static_cast<size_t>(kind)] = std::move(ring);
	transport_index_[static_cast<size_t>(kind)] = static_cast<int>(transport_index);
}

void SimOs::abort_waits()
{
	aborted_ = true;
	abort_.signal();
}

static uint64_t nanoseconds_since(std::chrono::steady_clock::time_point start)
{
	return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
		.count();
}

// Linux's __setup_per_zone_wmarks() and totalreserve_pages, over the whole guest: the high
// watermark is min plus twice max(min / 4, managed / 1000) (watermark_scale_factor 10), and
// the 16 MiB DMA zone holds back what higher zones' allocations may not take from it,
// their managed pages / 256 (lowmem_reserve_ratio), at most the zone itself; so does DMA32
// against Normal once RAM goes past 4 GiB.
uint64_t SimOs::free_pages_kept()
{
	if (min_free_pages_ == 0)
		return 0;
	const uint64_t managed = allocator_.counts().managed;
	const uint64_t high = min_free_pages_ + 2 * std::max(min_free_pages_ / 4, managed / 1000);
	constexpr uint64_t kDmaPages = (16ull << 20) / kPageBytes;
	constexpr uint64_t kBelow4GiBPages = (4ull << 30) / kPageBytes;
	const uint64_t above_dma = managed > kDmaPages ? managed - kDmaPages : 0;
	const uint64_t normal = managed > kBelow4GiBPages ? managed - kBelow4GiBPages : 0;
	const uint64_t dma32 = above_dma - normal;
	return high + std::min(above_dma / 256, kDmaPages) + std::min(normal / 256, dma32);
}

void SimOs::pressure_sample(vb::PressureSample* sample)
{
	const BuddyAllocator::Counts counts = allocator_.counts();
	*sample = {};
	sample->now_ms =
		static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
					      std::chrono::steady_clock::now().time_since_epoch())
					      .count());
	sample->free_pages = counts.free;
	sample->available_pages = counts.free;
	sample->total_pages = static_cast<uint64_t>(managed_pages());
	if (pressure_model_)
		pressure_model_->sample(sample);
}

bool SimOs::alloc_pages(unsigned order, vb::PageUse, vb::Reclaim reclaim, uint64_t* pfn)
{
	auto start = std::chrono::steady_clock::now();
	// Without reclaim (vballoon_os.c's VB_OS_GFP_BLOCK) Linux refuses a page below the min
	// watermark. With it, the allocation may reclaim, which the simulated guest has nothing
	// for; it is not held to the watermark.
	if (reclaim == vb::Reclaim::kNone && min_free_pages_ != 0 &&
	    allocator_.counts().free < min_free_pages_ + (1ull << order)) {
		counters_.alloc_ns += nanoseconds_since(start);
		return false;
	}
	// With a page cache, a light reclaim at the watermark evicts one batch of it and
	// gives up if that was not enough (__GFP_NORETRY).
	if (reclaim == vb::Reclaim::kLight && pressure_model_ &&
	    !pressure_model_->reclaim_for(order)) {
		counters_.alloc_ns += nanoseconds_since(start);
		return false;
	}
	auto block = allocator_.allocate(order);
	counters_.alloc_ns += nanoseconds_since(start);
	if (!block)
		return false;
	forget_host_zeroed({*block, 1ull << order});
	*pfn = *block;
	return true;
}

void SimOs::mark_dequeued(vb::PageRun run, bool dequeued)
{
	const uint64_t first = allocator_.first_pfn();
	if (run.first_pfn < first || run.first_pfn - first + run.count > dequeued_.size())
		return; // not the allocator's: the allocator itself refuses it
	std::fill_n(dequeued_.begin() + static_cast<ptrdiff_t>(run.first_pfn - first), run.count,
		    dequeued ? 1 : 0);
}

bool SimOs::any_dequeued(vb::PageRun run) const
{
	const uint64_t first = allocator_.first_pfn();
	if (run.first_pfn < first || run.first_pfn - first + run.count > dequeued_.size())
		return false;
	auto begin = dequeued_.begin() + static_cast<ptrdiff_t>(run.first_pfn - first);
	return std::find(begin, begin + static_cast<ptrdiff_t>(run.count), 1) != begin + static_cast<ptrdiff_t>(run.count);
}

void SimOs::free_page_run(vb::PageRun run)
{
	check_reuse(run.first_pfn, run.count);
	mark_dequeued(run, false);
	if (free_policy_.initialise && !VB_MUTANT(POISON02_DEFLATED_PAGE_NOT_FILLED)) {
		if (run.flags & vb::kPageRunDeviceInitialised) {
			counters_.pages_skipped_initialising += run.count;
		} else {
			initialise_pages(run);
		}
	}
	if ((run.flags & vb::kPageRunDeviceInitialised) &&
	    (!free_policy_.initialise || free_policy_.byte == 0))
		mark_host_zeroed(run);
	if (!allocator_.free_run(run.first_pfn, run.count))
		counters_.bad_page_operations++;
}

void SimOs::mark_host_zeroed(vb::PageRun run)
{
	for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++) {
		const uint64_t frame = pfn - allocator_.first_pfn();
		if (frame < host_zeroed_.size())
			host_zeroed_[frame].store(1, std::memory_order_relaxed);
	}
}

void SimOs::forget_host_zeroed(vb::PageRun run)
{
	for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++)
		(void)take_host_zeroed(pfn);
}

bool SimOs::take_host_zeroed(uint64_t pfn)
{
	const uint64_t frame = pfn - allocator_.first_pfn();
	return frame < host_zeroed_.size() &&
	       host_zeroed_[frame].exchange(0, std::memory_order_relaxed);
}

void SimOs::zero_allocated(vb::PageRun run)
{
	auto start = std::chrono::steady_clock::now();
	uint64_t zeroed = 0;
	for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++) {
		if (take_host_zeroed(pfn) && !VB_MUTANT(DI_DRV06_HOST_ZEROED_PAGE_ZEROED_AGAIN))
			continue;
		if (!memory_.fill(pfn * kPageBytes, 0, kPageBytes))
			counters_.bad_page_operations++;
		zeroed++;
	}
	counters_.alloc_zero_ns += nanoseconds_since(start);
	counters_.pages_zeroed_on_alloc += zeroed;
	counters_.pages_alloc_zeroing_skipped += run.count - zeroed;
}

void SimOs::initialise_pages(vb::PageRun run)
{
	auto start = std::chrono::steady_clock::now();
	if (!memory_.fill(run.first_pfn * kPageBytes, free_policy_.byte, run.count * kPageBytes))
		counters_.bad_page_operations++;
	counters_.guest_init_ns += nanoseconds_since(start);
	counters_.pages_initialised_by_guest += run.count;
}

void SimOs::hint_list_insert(vb::PageRun run)
{
	std::lock_guard guard(hint_mutex_);
	hint_list_.push_back(run);
	hint_list_pages_ += run.count;
}

size_t SimOs::hint_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
{
	std::lock_guard guard(hint_mutex_);
	size_t count = 0;
	uint64_t pages = 0;
	while (count < max_runs && pages < max_pages && !hint_list_.empty()) {
		runs[count] = hint_list_.back();
		hint_list_.pop_back();
		pages += runs[count].count;
		hint_list_pages_ -= runs[count].count;
		count++;
	}
	return count;
}

uint64_t SimOs::hint_list_pages() const
{
	std::lock_guard guard(hint_mutex_);
	return hint_list_pages_;
}

bool SimOs::hint_list_contains(uint64_t pfn) const
{
	std::lock_guard guard(hint_mutex_);
	for (const vb::PageRun& run : hint_list_) {
		if (pfn >= run.first_pfn && pfn < run.first_pfn + run.count)
			return true;
	}
	return false;
}

void SimOs::balloon_list_insert(vb::PageRun run)
{
	// Linux's balloon_page_enqueue() BUG()s on a page compaction may hold: a page once
	// taken off the list goes to balloon_hold() instead.
	if (any_dequeued(run) || !allocator_.move_to_balloon(run.first_pfn, run.count)) {
		counters_.bad_page_operations++;
		return;
	}
	balloon_list_.insert(run);
}

size_t SimOs::balloon_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
{
	size_t count = balloon_list_.take(runs, max_runs, max_pages);
	for (size_t i = 0; i < count; i++) {
		if (!allocator_.move_from_balloon(runs[i].first_pfn, runs[i].count))
			counters_.bad_page_operations++;
		mark_dequeued(runs[i], true);
	}
	return count;
}

void SimOs::balloon_hold(vb::PageRun run)
{
	if (!allocator_.move_to_balloon(run.first_pfn, run.count)) {
		counters_.bad_page_operations++;
		return;
	}
	mark_dequeued(run, false);
	held_.insert(run);
}

size_t SimOs::balloon_held_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
{
	size_t count = held_.take(runs, max_runs, max_pages);
	for (size_t i = 0; i < count; i++) {
		if (!allocator_.move_from_balloon(runs[i].first_pfn, runs[i].count))
			counters_.bad_page_operations++;
		mark_dequeued(runs[i], true);
	}
	return count;
}

void SimOs::balloon_list_replace(uint64_t old_pfn, uint64_t new_pfn)
{
	if (!balloon_list_.replace(old_pfn, new_pfn) || !allocator_.move_from_balloon(old_pfn, 1) ||
	    !allocator_.move_to_balloon(new_pfn, 1))
		counters_.bad_page_operations++;
}

void SimOs::balloon_list_mark_initialised(vb::PageRun run)
{
	if (!balloon_list_.mark_initialised(run))
		counters_.bad_page_operations++;
}

void SimOs::adjust_managed_pages(vb::PageRun run, bool add)
{
	managed_delta_ += add ? static_cast<int64_t>(run.count) : -static_cast<int64_t>(run.count);
}

int64_t SimOs::managed_pages() const
{
	return static_cast<int64_t>(allocator_.counts().managed) + managed_delta_.load();
}

uint64_t SimOs::phys_addr(const void* buffer)
{
	auto* byte = static_cast<const uint8_t*>(buffer);
	if (byte < ram_base_ || byte >= ram_base_ + memory_.size())
		throw std::logic_error("a driver buffer outside guest RAM cannot be named to the device");
	return static_cast<uint64_t>(byte - ram_base_);
}

bool SimOs::queue_add(vb::QueueKind kind, const vb::Segment* out, unsigned n_out, const vb::Segment* in,
		      unsigned n_in, void* token)
{
	DriverRing* ring_for_kind = ring(kind);
	// A device that vanished or asked for a reset would never return the buffer.
	if (!ring_for_kind || !device_serves())
		return false;
	std::vector<ChainBuffer> out_segments = to_chain_buffers(out, n_out);
	std::vector<ChainBuffer> in_segments = to_chain_buffers(in, n_in);
	return ring_for_kind->add(out_segments.data(), n_out, in_segments.data(), n_in, token);
}

void SimOs::queue_kick(vb::QueueKind kind)
{
	DriverRing* ring_for_kind = ring(kind);
	if (ring_for_kind && ring_for_kind->kick_prepare())
		transport_.notify(static_cast<unsigned>(transport_index_[static_cast<size_t>(kind)]));
}

void* SimOs::queue_get_used(vb::QueueKind kind, uint32_t* len)
{
	DriverRing* ring_for_kind = ring(kind);
	return ring_for_kind ? ring_for_kind->get_used(len) : nullptr;
}

int SimOs::call_fd(vb::QueueKind kind) const
{
	int index = transport_index_[static_cast<size_t>(kind)];
	return index < 0 ? -1 : transport_.call_fd(static_cast<unsigned>(index));
}

void* SimOs::queue_wait_used(vb::QueueKind kind, uint32_t* len)
{
	DriverRing* ring_for_kind = ring(kind);
	if (!ring_for_kind)
		return nullptr;
	bool timed_out = false;
	for (;;) {
		if (void* token = ring_for_kind->get_used(len)) {
			if (timed_out)
				counters_.interrupts_missed++;
			return token;
		}
		if (ring_for_kind->broken() || aborted_ || !device_serves())
			return nullptr;
		if (timed_out) {
			// Nothing came back in a whole interval: the kick may have been lost.
			// Kicking again is harmless, so do it rather than wait forever (past the
			// ring's suppression: nothing new was added since the last kick).
			counters_.kicks_repeated++;
			transport_.notify(static_cast<unsigned>(transport_index_[static_cast<size_t>(kind)]));
		}
		// Re-check after enabling interrupts: an entry that raced in would otherwise
		// never be announced.
		if (!ring_for_kind->enable_interrupts())
			continue;
		struct pollfd fds[2] = {{call_fd(kind), POLLIN, 0}, {abort_.fd(), POLLIN, 0}};
		// Bounded, so a lost interrupt, a lost kick or a device that asked for a reset
		// is noticed (Linux would wait forever on the first two).
		const int ready = poll(fds, 2, kRecheckIntervalMs);
		if (ready < 0)
			continue;
		timed_out = ready == 0;
		if (fds[0].revents & POLLIN) {
			uint64_t drained;
			if (read(fds[0].fd, &drained, sizeof(drained)) < 0) {
				// Non-blocking fd already drained by a racing read: fine, re-check.
			}
		}
	}
}

bool SimOs::device_serves() const
{
	return !transport_.removed() && !(transport_.status() & VB_STATUS_NEEDS_RESET);
}

bool SimOs::queue_broken(vb::QueueKind kind)
{
	DriverRing* ring_for_kind = ring(kind);
	return !ring_for_kind || ring_for_kind->broken() || !device_serves();
}

uint32_t SimOs::queue_size(vb::QueueKind kind)
{
	DriverRing* ring_for_kind = ring(kind);
	return ring_for_kind ? ring_for_kind->size() : 0;
}

uint32_t SimOs::config_read32(uint32_t offset)
{
	return transport_.config_read32(offset);
}

void SimOs::config_write32(uint32_t offset, uint32_t value)
{
	transport_.config_write32(offset, value);
}

void SimOs::memory_stats(vb::MemoryStats* stats)
{
	BuddyAllocator::Counts counts = allocator_.counts();
	*stats = {};
	stats->present_mask = (1u << VB_S_SWAP_IN) | (1u << VB_S_SWAP_OUT) | (1u << VB_S_MAJFLT) |
			      (1u << VB_S_MINFLT) | (1u << VB_S_MEMFREE) | (1u << VB_S_MEMTOT) |
			      (1u << VB_S_AVAIL) | (1u << VB_S_CACHES) |
			      (1u << VB_S_WS_REFAULT_ANON) | (1u << VB_S_WS_REFAULT_FILE);
	// The simulated guest has no swap and no page cache: those, and refaults, are honestly
	// zero.
	stats->value[VB_S_MINFLT] = minor_faults_;
	stats->value[VB_S_MEMFREE] = counts.free * kPageBytes;
	stats->value[VB_S_MEMTOT] = static_cast<uint64_t>(managed_pages()) * kPageBytes;
	stats->value[VB_S_AVAIL] = counts.free * kPageBytes;
}

void SimOs::vlog(vb::LogLevel level, const char* fmt, va_list args)
{
	if (level <= vb::LogLevel::kWarning)
		counters_.warnings_logged++;
	if (verbose_ || level == vb::LogLevel::kError) {
		// The core's messages carry no prefix (the kernel's dev_err() puts the driver's
		// and the device's names in front): say whose they are among the simulator's.
		fputs("vballoon: ", stderr);
		vfprintf(stderr, fmt, args);
	}
}

void SimOs::check_reuse(uint64_t first_pfn, uint64_t count)
{
	if (!host_owns_)
		return;
	counters_.must_tell_host_violations += host_owns_(first_pfn, count);
}

static_assert(vb::BalloonOs<SimOs>);

} // namespace vbsim
