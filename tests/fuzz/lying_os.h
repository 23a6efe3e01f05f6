// SPDX-License-Identifier: GPL-2.0
//
// An OS for the driver core whose device lies, driven by the fuzzer's bytes.
//
// Pages come from vbsim::BuddyAllocator and the balloon list is vbsim::BalloonPageList, as
// in the simulated guest. The "device" lives inline in the queue calls: it returns buffers
// in any order, with any used length, fills init-on-inflate bitmaps with anything, hands
// back tokens it was never given, refuses buffers while others are in flight, and can go
// away (queue_wait_used() returns nullptr from then on, the queues refuse everything and,
// as after a reset, the host holds no page any more). Config reads return whatever the
// fuzzer set, possibly a different value on every read.
//
// Next to the allocator's own states the OS keeps a model of every page: who holds it
// (guest, the core between allocation and the list, the balloon list, the core on its way
// out, the harness) and what the host knows of it (nothing, inflate in flight, host-owned,
// deflate in flight). Each call from the core is checked against that model, so the core
// breaking a rule (freeing a page before its deflate was acknowledged, a page in two
// messages, a PFN array over 256 entries, a page marked device-initialised that the device
// never vouched for, waiting for a buffer nobody kicked) aborts with a message.
//
// Nothing here can hang: every wait returns at once, and when the fuzzer's bytes run out
// the device turns honest and acknowledges in order.
#ifndef VBALLOON_TESTS_FUZZ_LYING_OS_H
#define VBALLOON_TESTS_FUZZ_LYING_OS_H

#include <array>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <vector>

#include "balloon_page_list.h"
#include "buddy_allocator.h"
#include "fuzz_input.h"
#include "vballoon/core/os_interface.h"

namespace vbfuzz
{

enum class Holder : uint8_t {
	kGuest,	  // free in the allocator
	kCore,	  // allocated by the core, not on the balloon list yet
	kBalloon, // on the balloon list
	kLeaving, // taken off the list (deflate) or replaced (migration): the core frees it
	kHarness, // the harness's own (memory pressure, migration targets, migrated-out pages)
};

enum class HostView : uint8_t {
	kNone,	      // the host does not hold the page
	kInflateSent, // in an inflate message not acknowledged yet
	kHostOwned,   // inflate acknowledged
	kDeflateSent, // in a deflate message not acknowledged yet
};

struct PageModel {
	Holder holder = Holder::kGuest;
	HostView host = HostView::kNone;
	bool initialised = false; // marked device-initialised while on the list
	bool vouched = false;	  // the device's last ack set its bit: the core must mark it
};

struct QueueBuffer {
	void* token = nullptr;
	vb::QueueKind queue = vb::QueueKind::kInflate;
	bool kicked = false;
	unsigned descriptors = 0;
	std::vector<uint64_t> pages; // guest pages the message names
	// For the init-on-inflate bitmap: each unit (PFN or chunk) and the pages it covers.
	std::vector<std::pair<uint64_t, uint64_t>> units; // first page, page count (pages
							  // shared across a unit's PFNs)
	std::vector<uint32_t> unit_first_pfn_index; // PFN mode: index of the unit's page
	bool has_bitmap = false;
	vb::Segment bitmap{};
};

struct LyingOsConfig {
	uint64_t first_pfn = 0;
	uint64_t pages = 0;
	vb::GuestTraits traits;
	uint64_t features = 0;
	std::array<uint32_t, VB_QUEUE_KIND_COUNT> queue_sizes{};
	bool indirect = false; // a multi-descriptor chain needs one ring slot
	uint32_t stats_present_mask = 0;
};

class LyingOs
{
public:
	LyingOs(FuzzInput& tape, const LyingOsConfig& config)
	    : allocator(config.first_pfn, config.pages), tape_(tape), config_(config),
	      pages_(config.pages),
	      wire_pages_per_page_(1u << (config.traits.page_shift - VB_PFN_SHIFT))
	{
	}

	// The core object: buffers handed to the device must lie inside it.
	void set_core(const void* begin, size_t bytes)
	{
		core_begin_ = reinterpret_cast<uintptr_t>(begin);
		core_end_ = core_begin_ + bytes;
	}

	// ---- vb::BalloonOs ------------------------------------------------------------------
	bool alloc_pages(unsigned order, vb::PageUse, vb::Reclaim, uint64_t* pfn)
	{
		FUZZ_CHECK(order <= config_.traits.max_alloc_order,
			   "order %u above the OS's largest (%u)", order,
			   config_.traits.max_alloc_order);
		FUZZ_CHECK(!lock_held_, "allocation with the balloon lock held");
		uint64_t call = alloc_calls_++;
		// Another CPU (or this allocation's own direct compaction) reaches the balloon
		// while the core allocates, without its lock: the OOM notifier, a migration.
		// A few per operation: each one deflates or migrates, and an inflate step makes
		// hundreds of allocations.
		if ((reentry_mask_ & (uint64_t{1} << (call % 64))) && reenter && !reentered_ &&
		    reentries_this_op_ < kReentriesPerOp) {
			reentries_this_op_++;
			reentered_ = true;
			reenter(call);
			reentered_ = false;
		}
		if (alloc_fail_mask_ & (uint64_t{1} << (call % 64)))
			return false;
		auto block = allocator.allocate(order);
		if (!block)
			return false;
		for (uint64_t i = 0; i < (uint64_t{1} << order); i++) {
			PageModel& page = model(*block + i, "allocated");
			FUZZ_CHECK(page.holder == Holder::kGuest,
				   "the allocator handed out a held page");
			page = {};
			page.holder = Holder::kCore;
		}
		*pfn = *block;
		return true;
	}

	void free_page_run(vb::PageRun run)
	{
		check_run(run, "freed");
		for (uint64_t i = 0; i < run.count; i++) {
			uint64_t pfn = run.first_pfn + i;
			PageModel& page = model(pfn, "freed");
			FUZZ_CHECK(page.holder == Holder::kCore || page.holder == Holder::kLeaving,
				   "the core frees page %#llx it does not hold (holder %d)",
				   (unsigned long long)pfn, static_cast<int>(page.holder));
			FUZZ_CHECK(page.host == HostView::kNone,
				   "page %#llx freed while the host still holds it (host view %d): "
				   "its deflate was not acknowledged",
				   (unsigned long long)pfn, static_cast<int>(page.host));
			if (run.flags & vb::kPageRunDeviceInitialised)
				FUZZ_CHECK(
					page.initialised,
					"page %#llx freed as device-initialised, but never marked",
					(unsigned long long)pfn);
			page = {};
		}
		FUZZ_CHECK(allocator.free_run(run.first_pfn, run.count),
			   "allocator refused to free %#llx+%llu",
			   (unsigned long long)run.first_pfn, (unsigned long long)run.count);
	}

	void balloon_list_insert(vb::PageRun run)
	{
		FUZZ_CHECK(lock_held_, "balloon list insert without the lock");
		check_run(run, "inserted");
		const bool flagged = run.flags & vb::kPageRunDeviceInitialised;
		FUZZ_CHECK((run.flags & ~vb::kPageRunDeviceInitialised) == 0,
			   "pages enter the balloon with flags %#x", run.flags);
		for (uint64_t i = 0; i < run.count; i++) {
			PageModel& page = model(run.first_pfn + i, "inserted");
			// Only new pages the host acknowledged (or lost with the device): a page a
			// deflate took off the list goes to balloon_hold(), never back here (in
			// Linux compaction may hold its lock, and the enqueue would BUG()).
			FUZZ_CHECK(page.holder == Holder::kCore && !flagged,
				   "page %#llx inserted into the balloon with flags %#x, holder %d, "
				   "initialised %d",
				   (unsigned long long)(run.first_pfn + i), run.flags,
				   static_cast<int>(page.holder), page.initialised);
			page.holder = Holder::kBalloon;
		}
		FUZZ_CHECK(allocator.move_to_balloon(run.first_pfn, run.count),
			   "move_to_balloon refused");
		list.insert(run);
	}

	// Pages a deflate took whose deflate the host did not acknowledge: ballooned, off the
	// list, keeping their device-initialised flag.
	void balloon_hold(vb::PageRun run)
	{
		FUZZ_CHECK(lock_held_, "balloon hold without the lock");
		check_run(run, "held");
		const bool flagged = run.flags & vb::kPageRunDeviceInitialised;
		FUZZ_CHECK((run.flags & ~vb::kPageRunDeviceInitialised) == 0,
			   "pages held with flags %#x", run.flags);
		for (uint64_t i = 0; i < run.count; i++) {
			PageModel& page = model(run.first_pfn + i, "held");
			FUZZ_CHECK(page.holder == Holder::kLeaving && page.initialised == flagged,
				   "page %#llx held with flags %#x, holder %d, initialised %d",
				   (unsigned long long)(run.first_pfn + i), run.flags,
				   static_cast<int>(page.holder), page.initialised);
			page.holder = Holder::kBalloon;
		}
		FUZZ_CHECK(allocator.move_to_balloon(run.first_pfn, run.count),
			   "move_to_balloon refused");
		held.insert(run);
	}

	size_t balloon_held_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		FUZZ_CHECK(lock_held_, "held take without the lock");
		size_t count = held.take(runs, max_runs, max_pages);
		uint64_t taken = 0;
		for (size_t r = 0; r < count; r++) {
			check_run(runs[r], "taken from the held pages");
			for (uint64_t i = 0; i < runs[r].count; i++) {
				PageModel& page = model(runs[r].first_pfn + i, "taken from held");
				FUZZ_CHECK(page.holder == Holder::kBalloon, "held page %#llx not ballooned",
					   (unsigned long long)(runs[r].first_pfn + i));
				page.holder = Holder::kLeaving;
			}
			FUZZ_CHECK(allocator.move_from_balloon(runs[r].first_pfn, runs[r].count),
				   "move_from_balloon refused");
			taken += runs[r].count;
		}
		FUZZ_CHECK(taken <= max_pages && count <= max_runs, "held take: %llu pages in %zu runs",
			   (unsigned long long)taken, count);
		return count;
	}
	uint64_t ballooned_pages() const { return list.pages() + held.pages(); }

	size_t balloon_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		FUZZ_CHECK(lock_held_, "balloon list take without the lock");
		FUZZ_CHECK(max_runs > 0, "take with no room for runs");
		size_t count = list.take(runs, max_runs, max_pages);
		uint64_t taken = 0;
		for (size_t r = 0; r < count; r++) {
			const vb::PageRun& run = runs[r];
			check_run(run, "taken");
			bool flagged = run.flags & vb::kPageRunDeviceInitialised;
			for (uint64_t i = 0; i < run.count; i++) {
				PageModel& page = model(run.first_pfn + i, "taken");
				FUZZ_CHECK(page.holder == Holder::kBalloon,
					   "the list gave out page %#llx it does not hold",
					   (unsigned long long)(run.first_pfn + i));
				FUZZ_CHECK(page.initialised == flagged,
					   "page %#llx: list flag %d, model says %d",
					   (unsigned long long)(run.first_pfn + i), flagged,
					   page.initialised);
				page.holder = Holder::kLeaving;
			}
			FUZZ_CHECK(allocator.move_from_balloon(run.first_pfn, run.count),
				   "move_from_balloon refused");
			taken += run.count;
		}
		FUZZ_CHECK(taken <= max_pages && count <= max_runs, "took %llu pages in %zu runs",
			   (unsigned long long)taken, count);
		return count;
	}

	void balloon_list_replace(uint64_t old_pfn, uint64_t new_pfn)
	{
		FUZZ_CHECK(lock_held_, "balloon list replace without the lock");
		PageModel& old_page = model(old_pfn, "replaced (old)");
		PageModel& new_page = model(new_pfn, "replaced (new)");
		FUZZ_CHECK(old_page.holder == Holder::kBalloon &&
				   new_page.holder == Holder::kHarness,
			   "replace %#llx (holder %d) by %#llx (holder %d)",
			   (unsigned long long)old_pfn, static_cast<int>(old_page.holder),
			   (unsigned long long)new_pfn, static_cast<int>(new_page.holder));
		FUZZ_CHECK(list.replace(old_pfn, new_pfn), "replace of a page not on the list");
		FUZZ_CHECK(allocator.move_from_balloon(old_pfn, 1) &&
				   allocator.move_to_balloon(new_pfn, 1),
			   "allocator refused the replacement");
		old_page.holder = Holder::kLeaving;
		old_page.initialised = false;
		new_page.holder = Holder::kBalloon;
		new_page.initialised = false;
		// The core does not record the device's promise for a migration target: the
		// page was not on the list when its inflate was acknowledged.
		new_page.vouched = false;
	}

	void balloon_list_mark_initialised(vb::PageRun run)
	{
		FUZZ_CHECK(lock_held_, "mark_initialised without the lock");
		FUZZ_CHECK(init_bitmap(), "marked without an init-on-inflate bit (7 or 21)");
		check_run(run, "marked");
		for (uint64_t i = 0; i < run.count; i++) {
			PageModel& page = model(run.first_pfn + i, "marked");
			FUZZ_CHECK(page.holder == Holder::kBalloon && page.vouched,
				   "page %#llx marked device-initialised: holder %d, vouched %d",
				   (unsigned long long)(run.first_pfn + i),
				   static_cast<int>(page.holder), page.vouched);
			page.vouched = false;
			page.initialised = true;
		}
		FUZZ_CHECK(list.mark_initialised(run), "mark_initialised of pages not on the list");
	}

	void adjust_managed_pages(vb::PageRun run, bool add)
	{
		FUZZ_CHECK(!has_feature(VB_F_DEFLATE_ON_OOM),
			   "managed pages adjusted although deflate-on-OOM was negotiated");
		check_run(run, "adjusted");
		for (uint64_t i = 0; i < run.count; i++) {
			const PageModel& page = model(run.first_pfn + i, "adjusted");
			FUZZ_CHECK(add ? page.holder == Holder::kLeaving
				       : page.holder == Holder::kBalloon,
				   "managed %s for page %#llx held by %d", add ? "+" : "-",
				   (unsigned long long)(run.first_pfn + i),
				   static_cast<int>(page.holder));
		}
		managed_delta +=
			add ? static_cast<int64_t>(run.count) : -static_cast<int64_t>(run.count);
	}

	void initialise_pages(vb::PageRun run)
	{
		FUZZ_CHECK(config_.traits.initialise_before_inflate && !init_bitmap(),
			   "pages initialised on inflate although nobody asked for it");
		check_run(run, "initialised");
		for (uint64_t i = 0; i < run.count; i++)
			FUZZ_CHECK(model(run.first_pfn + i, "initialised").holder == Holder::kCore,
				   "initialising page %#llx the core does not hold",
				   (unsigned long long)(run.first_pfn + i));
	}

	// This harness never lets the driver take FREE_PAGE_HINT (its traits leave
	// runs_free_page_hinting off), so the core must never reach the hint list.
	void hint_list_insert(vb::PageRun run)
	{
		FUZZ_CHECK(has_feature(VB_F_FREE_PAGE_HINT), "hint list insert of %#llx without FREE_PAGE_HINT",
			   (unsigned long long)run.first_pfn);
	}
	size_t hint_list_take(vb::PageRun*, size_t, uint64_t)
	{
		FUZZ_CHECK(has_feature(VB_F_FREE_PAGE_HINT), "hint list take without FREE_PAGE_HINT");
		return 0;
	}
	uint64_t free_pages_kept() { return kept_free_pages; }
	// What the harness chose (fuzz_core_lying_device.cpp, op "pressure-sample"): any
	// values, clocks that go backwards and counters that wrap included.
	void pressure_sample(vb::PressureSample* sample) { *sample = pressure; }
	vb::PressureSample pressure{};
	uint64_t kept_free_pages = 0;

	uint64_t phys_addr(const void* buffer)
	{
		uintptr_t address = reinterpret_cast<uintptr_t>(buffer);
		FUZZ_CHECK(address >= core_begin_ && address < core_end_,
			   "phys_addr of %p, outside the core object", buffer);
		return address;
	}

	bool queue_add(vb::QueueKind queue, const vb::Segment* out, unsigned n_out,
		       const vb::Segment* in, unsigned n_in, void* token)
	{
		FUZZ_CHECK(token != nullptr, "a buffer without a token");
		FUZZ_CHECK(n_out + n_in > 0, "an empty chain");
		auto& q = queues_[index(queue)];
		for (const QueueBuffer& buffer : q)
			FUZZ_CHECK(buffer.token != token, "token %p added twice to queue %d", token,
				   index(queue));
		remember_token(token, queue == vb::QueueKind::kStats);
		QueueBuffer buffer;
		buffer.token = token;
		buffer.queue = queue;
		buffer.descriptors = config_.indirect && n_out + n_in > 1 ? 1 : n_out + n_in;
		if (queue == vb::QueueKind::kStats)
			check_stats(out, n_out, n_in, token);
		else
			describe_message(queue, out, n_out, in, n_in, buffer);

		// The device's side: gone, full, or refusing while it still holds others.
		unsigned used = 0;
		for (const QueueBuffer& held : q)
			used += held.descriptors;
		FUZZ_CHECK(n_out + n_in <= config_.queue_sizes[index(queue)],
			   "a chain of %u descriptors on queue %d of %u", n_out + n_in, index(queue),
			   config_.queue_sizes[index(queue)]);
		const bool refused =
			gone_ || used + buffer.descriptors > config_.queue_sizes[index(queue)] ||
			(!q.empty() && refusals_ && !honest_ && (tape_.u8() & 3) == 0);
		FUZZ_TRACE("  add q%d token %p: %zu pages, %u descriptors (%u of %u in use)%s\n",
			   index(queue), token, buffer.pages.size(), buffer.descriptors, used,
			   config_.queue_sizes[index(queue)], refused ? " REFUSED" : "");
		if (refused)
			return false;

		if (queue != vb::QueueKind::kStats) {
			FUZZ_CHECK(q.size() < 4, "more than four messages in flight on queue %d",
				   index(queue));
			for (uint64_t pfn : buffer.pages) {
				PageModel& page = model(pfn, "sent");
				if (queue == vb::QueueKind::kInflate) {
					// A page the core allocated, or compaction's
					// target for a migration.
					FUZZ_CHECK((page.holder == Holder::kCore ||
						    page.holder == Holder::kHarness) &&
							   page.host == HostView::kNone,
						   "inflate of page %#llx: holder %d, host view %d",
						   (unsigned long long)pfn,
						   static_cast<int>(page.holder),
						   static_cast<int>(page.host));
					page.host = HostView::kInflateSent;
				} else {
					// Taken off the list, or a migration's old page
					// (still on it until the move is acknowledged).
					FUZZ_CHECK((page.holder == Holder::kLeaving ||
						    page.holder == Holder::kBalloon) &&
							   (page.host == HostView::kHostOwned ||
							    page.host == HostView::kNone),
						   "deflate of page %#llx: holder %d, host view %d",
						   (unsigned long long)pfn,
						   static_cast<int>(page.holder),
						   static_cast<int>(page.host));
					page.host = HostView::kDeflateSent;
				}
			}
		}
		q.push_back(std::move(buffer));
		return true;
	}

	void queue_kick(vb::QueueKind queue)
	{
		for (QueueBuffer& buffer : queues_[index(queue)])
			buffer.kicked = true;
	}

	void* queue_get_used(vb::QueueKind queue, uint32_t* len)
	{
		// The statsq is polled from its callback; the pipelined inflate collects what the
		// host returned between batches, under the lock.
		FUZZ_CHECK(queue == vb::QueueKind::kStats || (queue == vb::QueueKind::kInflate && lock_held_),
			   "polling queue %d%s", index(queue), lock_held_ ? "" : " without the balloon lock");
		*len = 0;
		if (gone_)
			return nullptr;
		auto& q = queues_[index(queue)];
		if (queue == vb::QueueKind::kInflate)
			return poll_inflate(q, len);
		uint8_t how = honest_ ? 0xff : tape_.u8();
		if (how < 0x10 && !tape_.empty())
			return foreign_token(queue);
		if (q.empty() || !q.front().kicked)
			return nullptr;
		void* token = q.front().token;
		q.erase(q.begin());
		*len = tape_.u32();
		return token;
	}

	// The pipelined inflate looking, between batches, for what the host has returned: the
	// host may not have got to anything yet, may return a buffer it was never given, or
	// returns the oldest kicked one (acknowledged, or lied about, as when waited for).
	void* poll_inflate(std::vector<QueueBuffer>& q, uint32_t* len)
	{
		const bool lies = !honest_ && !tape_.empty() && lies_this_op_ < kLiesPerOp;
		const uint8_t how = honest_ || tape_.empty() ? 0xff : tape_.u8();
		if (lies && how < 0x08) {
			lies_this_op_++;
			*len = tape_.u32();
			void* token = foreign_token(vb::QueueKind::kInflate);
			FUZZ_TRACE("  poll q0: foreign token %p, len %u\n", token, *len);
			return token;
		}
		if (how < 0x60 || q.empty() || !q.front().kicked)
			return nullptr; // not done yet
		QueueBuffer buffer = std::move(q.front());
		q.erase(q.begin());
		acknowledge(buffer, lies, len);
		FUZZ_TRACE("  poll q0: ack token %p, len %u\n", buffer.token, *len);
		return buffer.token;
	}

	void* queue_wait_used(vb::QueueKind queue, uint32_t* len)
	{
		FUZZ_CHECK(queue != vb::QueueKind::kStats, "waiting on the statsq");
		// Only the pipelined inflate lets the lock go while it waits (page_balloon_inflate.h):
		// inflateq has no other user meanwhile, since migration is refused then.
		FUZZ_CHECK(lock_held_ || queue == vb::QueueKind::kInflate,
			   "waiting for an ack on queue %d without the balloon lock", index(queue));
		*len = 0;
		if (gone_)
			return nullptr;
		auto& q = queues_[index(queue)];
		FUZZ_CHECK(!q.empty(),
			   "the core waits on queue %d with nothing in flight: a real "
			   "driver would sleep forever",
			   index(queue));
		for (const QueueBuffer& buffer : q)
			FUZZ_CHECK(buffer.kicked,
				   "the core waits on queue %d for a buffer it never kicked",
				   index(queue));
		const bool lies = !honest_ && !tape_.empty() && lies_this_op_ < kLiesPerOp;
		uint8_t how = lies ? tape_.u8() : 0;
		if (lies && how >= 0xf8) {
			// The device goes away: reset, surprise removal.
			FUZZ_TRACE("  wait q%d: the device is gone\n", index(queue));
			go_away();
			return nullptr;
		}
		if (lies && how >= 0xe8) {
			lies_this_op_++;
			*len = tape_.u32();
			void* token = foreign_token(queue);
			FUZZ_TRACE("  wait q%d: foreign token %p, len %u\n", index(queue), token,
				   *len);
			return token;
		}
		size_t pick = lies ? tape_.u8() % q.size() : 0;
		QueueBuffer buffer = std::move(q[pick]);
		q.erase(q.begin() + static_cast<ptrdiff_t>(pick));
		acknowledge(buffer, lies, len);
		FUZZ_TRACE("  wait q%d: ack token %p (%zu of %zu), len %u\n", index(queue),
			   buffer.token, pick, q.size() + 1, *len);
		return buffer.token;
	}

	bool queue_broken(vb::QueueKind) { return gone_; }
	uint32_t queue_size(vb::QueueKind queue) { return config_.queue_sizes[index(queue)]; }

	uint32_t config_read32(uint32_t offset)
	{
		FUZZ_CHECK(offset == VB_CONFIG_NUM_PAGES_OFFSET, "config read at %u", offset);
		if (volatile_config_ && !honest_ && !tape_.empty()) {
			switch (tape_.u8() & 3) {
			case 0:
				return 0;
			case 1:
				return UINT32_MAX;
			case 2:
				return num_pages ^ tape_.u8();
			default:
				break;
			}
		}
		return num_pages;
	}

	void config_write32(uint32_t offset, uint32_t value)
	{
		if (offset == VB_CONFIG_ACTUAL_OFFSET) {
			// Under the lock, from the count it protects: no path can write an older
			// count after a newer one.
			FUZZ_CHECK(lock_held_, "actual written without the balloon lock");
			FUZZ_CHECK(!core_wire_pages ||
					   value == static_cast<uint32_t>(core_wire_pages()),
				   "actual %u, the core holds %llu", value,
				   (unsigned long long)core_wire_pages());
			actual = value;
			return;
		}
		FUZZ_CHECK(offset == VB_CONFIG_POISON_VAL_OFFSET && has_feature(VB_F_PAGE_POISON) &&
				   !started && value == config_.traits.free_page_pattern,
			   "config write %#x at %u", value, offset);
	}

	void memory_stats(vb::MemoryStats* stats)
	{
		*stats = {};
		stats->present_mask = config_.stats_present_mask;
		const uint64_t seed = honest_ ? 1000003 : tape_.u32() * 0x9e3779b97f4a7c15ull;
		for (unsigned tag = 0; tag < VB_S_NR; tag++)
			stats->value[tag] = seed * (tag + 1) ^ tag;
		last_stats = *stats;
	}

	void lock()
	{
		FUZZ_CHECK(!lock_held_, "the balloon lock taken twice");
		lock_held_ = true;
	}
	void unlock()
	{
		FUZZ_CHECK(lock_held_, "the balloon lock released but not held");
		lock_held_ = false;
	}
	bool try_lock()
	{
		if (lock_held_ || contended)
			return false;
		lock_held_ = true;
		return true;
	}

	void vlog(vb::LogLevel, const char* fmt, va_list args)
	{
		char line[256];
		vsnprintf(line, sizeof(line), fmt, args);
	}

	// ---- Harness controls and checks ----------------------------------------------------
	PageModel& model(uint64_t pfn, const char* what)
	{
		FUZZ_CHECK(pfn >= config_.first_pfn && pfn - config_.first_pfn < config_.pages,
			   "page %#llx %s is not guest memory [%#llx, %#llx)",
			   (unsigned long long)pfn, what, (unsigned long long)config_.first_pfn,
			   (unsigned long long)(config_.first_pfn + config_.pages));
		return pages_[pfn - config_.first_pfn];
	}

	bool has_feature(unsigned bit) const { return config_.features & VB_FEATURE(bit); }
	// DEVICE_INIT_ON_INFLATE (7) and VB_F_X_INIT_ON_INFLATE (21) share the bitmap.
	bool init_bitmap() const
	{
		return has_feature(VB_F_X_INIT_ON_INFLATE) ||
		       has_feature(VB_F_DEVICE_INIT_ON_INFLATE);
	}
	bool gone() const { return gone_; }
	bool lock_held() const { return lock_held_; }
	size_t in_flight(vb::QueueKind queue) const { return queues_[index(queue)].size(); }

	// Called between operations: nothing the core sent may still be unacknowledged (every
	// step waits for its acks), and every page the device vouched for was marked.
	// Not instrumented: it walks every page after every operation, and its comparisons
	// would only teach the fuzzer about the harness.
	__attribute__((no_sanitize("coverage"))) void check_quiescent()
	{
		FUZZ_CHECK(!lock_held_, "the balloon lock held between operations");
		FUZZ_CHECK(
			queues_[index(vb::QueueKind::kInflate)].empty() &&
				queues_[index(vb::QueueKind::kDeflate)].empty(),
			"an operation returned with %zu inflate / %zu deflate messages in flight",
			queues_[index(vb::QueueKind::kInflate)].size(),
			queues_[index(vb::QueueKind::kDeflate)].size());
		uint64_t guest_pages = 0, balloon_pages = 0;
		for (uint64_t i = 0; i < config_.pages; i++) {
			const PageModel& page = pages_[i];
			FUZZ_CHECK(!page.vouched,
				   "page %#llx vouched for by the device, never marked",
				   (unsigned long long)(config_.first_pfn + i));
			FUZZ_CHECK(page.holder != Holder::kCore && page.holder != Holder::kLeaving,
				   "page %#llx left behind by the core (holder %d)",
				   (unsigned long long)(config_.first_pfn + i),
				   static_cast<int>(page.holder));
			FUZZ_CHECK(page.host == HostView::kNone ||
					   page.host == HostView::kHostOwned,
				   "page %#llx still in a message",
				   (unsigned long long)(config_.first_pfn + i));
			// While the device is there, a ballooned page is one the host was told of.
			FUZZ_CHECK(gone_ || page.holder != Holder::kBalloon ||
					   page.host == HostView::kHostOwned,
				   "page %#llx is in the balloon (and in `actual`), but the host "
				   "was never told",
				   (unsigned long long)(config_.first_pfn + i));
			guest_pages += page.holder == Holder::kGuest;
			balloon_pages += page.holder == Holder::kBalloon;
		}
		// Every move between the allocator's states was checked as it happened; the totals
		// tie the model to the allocator once more.
		const vbsim::BuddyAllocator::Counts counts = allocator.counts();
		FUZZ_CHECK(counts.free == guest_pages && counts.balloon == balloon_pages,
			   "allocator: %llu free, %llu balloon; model: %llu guest, %llu balloon",
			   (unsigned long long)counts.free, (unsigned long long)counts.balloon,
			   (unsigned long long)guest_pages, (unsigned long long)balloon_pages);
	}

	// The harness's own pages (memory pressure, migration).
	bool harness_alloc(unsigned order, uint64_t* pfn)
	{
		auto block = allocator.allocate(order);
		if (!block)
			return false;
		for (uint64_t i = 0; i < (uint64_t{1} << order); i++)
			model(*block + i, "taken by the harness") = {Holder::kHarness};
		*pfn = *block;
		return true;
	}
	void harness_free(uint64_t pfn)
	{
		PageModel& page = model(pfn, "freed by the harness");
		FUZZ_CHECK(page.holder == Holder::kHarness,
			   "harness frees a page it does not hold");
		FUZZ_CHECK(page.host == HostView::kNone,
			   "page %#llx migrated out of the balloon, but the host still holds it "
			   "(host view %d)",
			   (unsigned long long)pfn, static_cast<int>(page.host));
		page = {};
		FUZZ_CHECK(allocator.free_run(pfn, 1), "allocator refused the harness's free");
	}
	// After migrate_page(): the old page is the OS's again.
	void take_back_migrated(uint64_t pfn)
	{
		PageModel& page = model(pfn, "migrated out");
		FUZZ_CHECK(page.holder == Holder::kLeaving, "migrated-out page %#llx held by %d",
			   (unsigned long long)pfn, static_cast<int>(page.holder));
		page.holder = Holder::kHarness;
	}

	void set_alloc_fail_mask(uint64_t mask) { alloc_fail_mask_ = mask; }
	void set_reentry_mask(uint64_t mask) { reentry_mask_ = mask; }
	void set_refusals(bool on) { refusals_ = on; }
	void set_volatile_config(bool on) { volatile_config_ = on; }
	// From here on the device tells the truth and acknowledges in order.
	void set_honest() { honest_ = true; }
	void begin_op()
	{
		lies_this_op_ = 0;
		reentries_this_op_ = 0;
	}

	vbsim::BuddyAllocator allocator;
	vbsim::BalloonPageList list;
	vbsim::BalloonPageList held; // balloon_hold(): off the list, still ballooned
	int64_t managed_delta = 0;
	uint32_t num_pages = 0;
	uint32_t actual = 0;
	bool started = false;
	bool contended = false;
	vb::MemoryStats last_stats{};
	// What the core holds, for checking the `actual` it writes (set by the harness).
	std::function<uint64_t()> core_wire_pages;
	// Called from inside alloc_pages() where reentry_mask says so.
	std::function<void(uint64_t call)> reenter;

	// A reset of the device (or its surprise removal): the host holds nothing any more.
	void go_away()
	{
		gone_ = true;
		for (auto& q : queues_)
			q.clear();
		for (PageModel& page : pages_)
			page.host = HostView::kNone;
	}

	// The OS resets the device (before release_after_reset()): its config is zero again.
	void reset_device()
	{
		go_away();
		actual = 0;
	}

private:
	static constexpr unsigned kLiesPerOp = 64;
	static constexpr unsigned kReentriesPerOp = 8;

	static int index(vb::QueueKind queue) { return static_cast<int>(queue); }

	void check_run(const vb::PageRun& run, const char* what)
	{
		FUZZ_CHECK(run.count > 0 && run.count <= config_.pages, "%s run %#llx+%llu", what,
			   (unsigned long long)run.first_pfn, (unsigned long long)run.count);
		model(run.first_pfn, what);
		model(run.first_pfn + run.count - 1, what);
	}

	bool inside_core(uint64_t address, uint64_t len) const
	{
		return address >= core_begin_ && address <= core_end_ && len <= core_end_ - address;
	}

	void check_stats(const vb::Segment* out, unsigned n_out, unsigned n_in, void* token)
	{
		FUZZ_CHECK(has_feature(VB_F_STATS_VQ), "a stats buffer without STATS_VQ");
		FUZZ_CHECK(n_out == 1 && n_in == 0, "stats chain of %u + %u", n_out, n_in);
		FUZZ_CHECK(inside_core(out[0].phys_addr, out[0].len) &&
				   reinterpret_cast<void*>(out[0].phys_addr) == token,
			   "stats buffer %#llx+%u, token %p", (unsigned long long)out[0].phys_addr,
			   out[0].len, token);
		FUZZ_CHECK(out[0].len % VB_STAT_ENTRY_BYTES == 0, "stats length %u", out[0].len);
		const auto* bytes = reinterpret_cast<const uint8_t*>(out[0].phys_addr);
		unsigned entries = out[0].len / VB_STAT_ENTRY_BYTES;
		uint32_t tags = 0;
		int last_tag = -1;
		for (unsigned i = 0; i < entries; i++) {
			uint16_t tag;
			uint64_t value;
			std::memcpy(&tag, bytes + i * VB_STAT_ENTRY_BYTES, 2);
			std::memcpy(&value, bytes + i * VB_STAT_ENTRY_BYTES + 2, 8);
			FUZZ_CHECK(tag < VB_S_NR && static_cast<int>(tag) > last_tag,
				   "stats tags out of order: %u after %d", tag, last_tag);
			FUZZ_CHECK(tag < VB_S_FIRST_PRESSURE_TAG || has_feature(VB_F_X_PRESSURE),
				   "stats tag %u without VB_F_X_PRESSURE", tag);
			last_tag = tag;
			tags |= 1u << tag;
			// 27-29 are the governor's, not the OS's: present with the bit whatever the
			// OS said, their values the core's own.
			if (tag >= VB_S_X_HELD_BACK) {
				FUZZ_CHECK(has_feature(VB_F_X_PRESSURE), "governor tag %u unasked",
					   tag);
				continue;
			}
			uint64_t expected =
				(last_stats.present_mask & (1u << tag)) ? last_stats.value[tag] : 0;
			FUZZ_CHECK(value == expected, "stats tag %u: %llu, the OS said %llu", tag,
				   (unsigned long long)value, (unsigned long long)expected);
		}
		if (!stats_tags_known_) {
			stats_tags_ = tags;
			stats_tags_known_ = true;
		}
		FUZZ_CHECK(tags == stats_tags_, "stats tag set changed from %#x to %#x",
			   stats_tags_, tags);
	}

	// Decodes an inflate/deflate message into the pages it names, checking its shape.
	void describe_message(vb::QueueKind queue, const vb::Segment* out, unsigned n_out,
			      const vb::Segment* in, unsigned n_in, QueueBuffer& buffer)
	{
		const unsigned shift = config_.traits.page_shift;
		const bool wants_bitmap = queue == vb::QueueKind::kInflate && init_bitmap();
		FUZZ_CHECK(n_in == (wants_bitmap ? 1u : 0u),
			   "queue %d: %u device-writable segments", index(queue), n_in);
		uint32_t units;
		if (has_feature(VB_F_X_CHUNKED)) {
			units = n_out;
			FUZZ_CHECK(n_out >= 1 && n_out <= 32 &&
					   n_out + n_in <= config_.queue_sizes[index(queue)],
				   "chunked message of %u chunks on a ring of %u", n_out,
				   config_.queue_sizes[index(queue)]);
			for (unsigned i = 0; i < n_out; i++) {
				const vb::Segment& chunk = out[i];
				uint64_t page_bytes = uint64_t{1} << shift;
				FUZZ_CHECK(chunk.len > 0 && chunk.len % page_bytes == 0 &&
						   chunk.phys_addr % page_bytes == 0 &&
						   chunk.len <= (uint64_t{1} << 30),
					   "chunk %#llx+%u on %llu-byte pages",
					   (unsigned long long)chunk.phys_addr, chunk.len,
					   (unsigned long long)page_bytes);
				uint64_t first = chunk.phys_addr >> shift;
				uint64_t count = chunk.len >> shift;
				buffer.units.push_back({first, count});
				for (uint64_t p = first; p < first + count; p++)
					buffer.pages.push_back(p);
			}
		} else {
			FUZZ_CHECK(n_out == 1, "PFN message of %u segments", n_out);
			FUZZ_CHECK(inside_core(out[0].phys_addr, out[0].len),
				   "PFN array %#llx+%u outside the core",
				   (unsigned long long)out[0].phys_addr, out[0].len);
			FUZZ_CHECK(out[0].len > 0 && out[0].len % 4 == 0 &&
					   out[0].len <=
						   VB_PFNS_PER_DESCRIPTOR_MAX * VB_PFN_ENTRY_BYTES,
				   "PFN array of %u bytes (at most 256 PFNs, whole entries)",
				   out[0].len);
			units = out[0].len / 4;
			FUZZ_CHECK(units % wire_pages_per_page_ == 0,
				   "%u PFNs split a %u-PFN guest page", units,
				   wire_pages_per_page_);
			const auto* wire = reinterpret_cast<const uint32_t*>(out[0].phys_addr);
			buffer.pages.reserve(units / wire_pages_per_page_);
			buffer.units.reserve(units);
			for (uint32_t i = 0; i < units; i += wire_pages_per_page_) {
				FUZZ_CHECK(wire[i] % wire_pages_per_page_ == 0,
					   "wire PFN %#x is not a page start", wire[i]);
				for (uint32_t j = 1; j < wire_pages_per_page_; j++)
					FUZZ_CHECK(wire[i + j] == wire[i] + j,
						   "wire PFNs of one guest page not consecutive");
				uint64_t page = wire[i] / wire_pages_per_page_;
				buffer.pages.push_back(page);
				for (uint32_t j = 0; j < wire_pages_per_page_; j++)
					buffer.units.push_back({page, 1});
			}
		}
		message_stamp_++;
		for (uint64_t page : buffer.pages) {
			model(page, queue == vb::QueueKind::kInflate ? "in an inflate message"
								     : "in a deflate message");
			uint64_t& stamp = stamps_[page - config_.first_pfn];
			FUZZ_CHECK(stamp != message_stamp_, "page %#llx twice in one message",
				   (unsigned long long)page);
			stamp = message_stamp_;
		}
		if (wants_bitmap) {
			FUZZ_CHECK(inside_core(in[0].phys_addr, in[0].len) &&
					   in[0].len == (units + 7) / 8,
				   "bitmap %#llx+%u for %u units",
				   (unsigned long long)in[0].phys_addr, in[0].len, units);
			buffer.has_bitmap = true;
			buffer.bitmap = in[0];
		}
	}

	// The device acknowledges `buffer`: writes its bitmap (honestly or not), picks a used
	// length, and the host's view of the pages moves on.
	void acknowledge(const QueueBuffer& buffer, bool lies, uint32_t* len)
	{
		if (buffer.has_bitmap) {
			auto* bits = reinterpret_cast<uint8_t*>(buffer.bitmap.phys_addr);
			uint8_t fill = lies ? tape_.u8() : 0;
			for (uint32_t i = 0; i < buffer.bitmap.len; i++)
				bits[i] = fill == 0x5c ? tape_.u8() : fill;
		}
		*len = buffer.has_bitmap ? buffer.bitmap.len : 0;
		if (lies) {
			switch (tape_.u8() & 7) {
			case 0:
				*len = 0;
				break;
			case 1:
				*len = UINT32_MAX;
				break;
			case 2:
				*len = tape_.u32();
				break;
			case 3:
				*len = *len ? *len - 1 : 0;
				break;
			default:
				break;
			}
		}
		for (uint64_t pfn : buffer.pages) {
			PageModel& page = model(pfn, "acknowledged");
			if (buffer.queue == vb::QueueKind::kInflate) {
				FUZZ_CHECK(page.host == HostView::kInflateSent,
					   "inflate ack, host view %d",
					   static_cast<int>(page.host));
				page.host = HostView::kHostOwned;
			} else {
				FUZZ_CHECK(page.host == HostView::kDeflateSent,
					   "deflate ack, host view %d",
					   static_cast<int>(page.host));
				page.host = HostView::kNone;
			}
		}
		if (!buffer.has_bitmap)
			return;
		// A used length beyond the bitmap is a device writing where it was not asked to:
		// the core trusts nothing of that message (BAL-DRV-DI-03, for bit 21 as for 7).
		if (*len > buffer.bitmap.len)
			return;
		// Which pages the device vouched for, as the core must read the bitmap: a unit
		// counts when its bit is set and lies within the bytes the device says it wrote;
		// a guest page only when all its units count.
		const auto* bits = reinterpret_cast<const uint8_t*>(buffer.bitmap.phys_addr);
		auto bit = [&](size_t i) {
			return i / 8 < *len && i / 8 < buffer.bitmap.len &&
			       ((bits[i / 8] >> (i % 8)) & 1);
		};
		std::map<uint64_t, bool> vouched;
		for (size_t i = 0; i < buffer.units.size(); i++) {
			const auto& [first, count] = buffer.units[i];
			for (uint64_t p = first; p < first + count; p++) {
				auto [it, inserted] = vouched.emplace(p, true);
				it->second = it->second && bit(i);
			}
		}
		for (const auto& [pfn, yes] : vouched)
			if (yes)
				model(pfn, "vouched").vouched = true;
	}

	void* foreign_token(vb::QueueKind queue)
	{
		// Tokens the core handed out before (stale ones), never a live one of this queue,
		// or pointers that were never a token.
		std::vector<void*> candidates = {reinterpret_cast<void*>(core_begin_ + 1),
						 reinterpret_cast<void*>(uintptr_t{0x1000}), this};
		for (void* stale : stale_tokens_) {
			bool live = false;
			for (const QueueBuffer& buffer : queues_[index(queue)])
				live |= buffer.token == stale;
			if (!live && !(queue == vb::QueueKind::kStats && stale == stats_token_))
				candidates.push_back(stale);
		}
		return candidates[tape_.u8() % candidates.size()];
	}


	// Every token the core ever added (for stale-token lies).
	void remember_token(void* token, bool stats)
	{
		if (stats)
			stats_token_ = token;
		for (void* known : stale_tokens_)
			if (known == token)
				return;
		stale_tokens_.push_back(token);
	}

private:
	FuzzInput& tape_;
	const LyingOsConfig config_;
	std::vector<PageModel> pages_;
	std::vector<uint64_t> stamps_ = std::vector<uint64_t>(config_.pages, 0);
	uint64_t message_stamp_ = 0;
	const uint32_t wire_pages_per_page_;
	std::array<std::vector<QueueBuffer>, VB_QUEUE_KIND_COUNT> queues_;
	std::vector<void*> stale_tokens_;
	void* stats_token_ = nullptr;
	uintptr_t core_begin_ = 0, core_end_ = 0;
	uint64_t alloc_calls_ = 0;
	uint64_t alloc_fail_mask_ = 0;
	uint64_t reentry_mask_ = 0;
	bool reentered_ = false;
	unsigned reentries_this_op_ = 0;
	bool refusals_ = false;
	bool volatile_config_ = false;
	bool honest_ = false;
	bool gone_ = false;
	bool lock_held_ = false;
	unsigned lies_this_op_ = 0;
	uint32_t stats_tags_ = 0;
	bool stats_tags_known_ = false;
};

} // namespace vbfuzz

#endif
