// SPDX-License-Identifier: GPL-2.0
//
// An OS for the core that runs the "device" inline: every buffer kicked is acknowledged in
// order, and every call is written to an event log, so tests can check the core's ordering
// rules exactly. Pages come from the simulator's buddy allocator.
#ifndef VBALLOON_TESTS_CORE_FAKE_OS_H
#define VBALLOON_TESTS_CORE_FAKE_OS_H

#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <deque>
#include <functional>
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "buddy_allocator.h"
#include "vballoon/core/balloon.h"

namespace vbtest {

struct Event {
	enum Kind { kAlloc, kFree, kInsert, kTake, kAdd, kKick, kAck, kConfigWrite, kAllocFail, kInitialise, kHintInsert, kHold } kind = kAlloc;
	vb::QueueKind queue = vb::QueueKind::kInflate;
	uint64_t first_pfn = 0; // page runs
	uint64_t count = 0;
	std::vector<uint32_t> wire_pfns; // kAdd on inflate/deflate
	unsigned descriptors = 0;	 // kAdd: driver-readable descriptors of the chain
	std::vector<vb::Segment> ranges; // kAdd on inflate/deflate with VB_F_X_CHUNKED: as sent
	const void* token = nullptr;

	static Event of(Kind kind, vb::QueueKind queue = vb::QueueKind::kInflate, uint64_t first_pfn = 0,
			uint64_t count = 0)
	{
		Event event;
		event.kind = kind;
		event.queue = queue;
		event.first_pfn = first_pfn;
		event.count = count;
		return event;
	}
};

class FakeOs {
public:
	FakeOs(uint64_t first_pfn, uint64_t pages) : allocator(first_pfn, pages) {}

	// --- vb::BalloonOs ---
	bool alloc_pages(unsigned order, vb::PageUse use, vb::Reclaim reclaim, uint64_t* pfn)
	{
		allocations_by_use[static_cast<int>(use)]++;
		allocations_by_reclaim[static_cast<int>(reclaim)]++;
		EXPECT_FALSE(lock_held) << "an allocation under the balloon lock";
		if (allocations_before_failure == 0)
			fail_allocations = true;
		else if (allocations_before_failure > 0)
			allocations_before_failure--;
		if (fail_allocations) {
			log_event(Event::of(Event::kAllocFail));
			return false;
		}
		auto block = allocator.allocate(order);
		if (!block) {
			log_event(Event::of(Event::kAllocFail));
			return false;
		}
		*pfn = *block;
		log_event(Event::of(Event::kAlloc, {}, *block, 1ull << order));
		if (after_alloc)
			after_alloc();
		return true;
	}
	void free_page_run(vb::PageRun run)
	{
		for (uint64_t i = 0; i < run.count; i++)
			dequeued.erase(run.first_pfn + i);
		if (run.flags & vb::kPageRunDeviceInitialised)
			freed_initialised += run.count;
		if (run.flags & vb::kPageRunWholeBlock) {
			// One naturally aligned block, as the allocator handed it out.
			EXPECT_TRUE(run.count && !(run.count & (run.count - 1)) && run.first_pfn % run.count == 0)
				<< "a run flagged whole is no block: " << run.first_pfn << "+" << run.count;
			freed_whole_block_pages += run.count;
		}
		EXPECT_TRUE(allocator.free_run(run.first_pfn, run.count)) << "bad free of " << run.first_pfn;
		log_event(Event::of(Event::kFree, {}, run.first_pfn, run.count));
	}
	void balloon_list_insert(vb::PageRun run)
	{
		EXPECT_TRUE(lock_held);
		for (uint64_t i = 0; i < run.count; i++)
			EXPECT_EQ(dequeued.count(run.first_pfn + i), 0u)
				<< "page " << run.first_pfn + i
				<< " was taken off the balloon list and put back on it (Linux: "
				   "BUG_ON(!trylock_page()) in balloon_page_enqueue_one(), compaction may hold it)";
		EXPECT_TRUE(allocator.move_to_balloon(run.first_pfn, run.count));
		for (uint64_t i = 0; i < run.count; i++)
			balloon_list.push_back(run.first_pfn + i);
		log_event(Event::of(Event::kInsert, {}, run.first_pfn, run.count));
	}
	size_t balloon_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		EXPECT_TRUE(lock_held);
		size_t run_count = 0;
		for (uint64_t taken = 0; taken < max_pages && !balloon_list.empty(); taken++) {
			uint64_t pfn = balloon_list.back();
			uint32_t flags = initialised.count(pfn) ? vb::kPageRunDeviceInitialised : 0;
			vb::PageRun* last = run_count ? &runs[run_count - 1] : nullptr;
			if (last && last->flags == flags && last->first_pfn == pfn + 1) {
				last->first_pfn = pfn;
				last->count++;
			} else if (last && last->flags == flags && last->first_pfn + last->count == pfn) {
				last->count++;
			} else if (run_count < max_runs) {
				runs[run_count++] = {pfn, 1, flags};
			} else {
				break;
			}
			balloon_list.pop_back();
			initialised.erase(pfn);
			dequeued.insert(pfn);
			EXPECT_TRUE(allocator.move_from_balloon(pfn, 1));
			log_event(Event::of(Event::kTake, {}, pfn, 1));
		}
		return run_count;
	}
	void balloon_hold(vb::PageRun run)
	{
		EXPECT_TRUE(lock_held);
		for (uint64_t i = 0; i < run.count; i++) {
			EXPECT_EQ(dequeued.erase(run.first_pfn + i), 1u)
				<< "held page " << run.first_pfn + i << " was never taken off the list";
			held.push_back(run.first_pfn + i);
		}
		EXPECT_TRUE(allocator.move_to_balloon(run.first_pfn, run.count));
		log_event(Event::of(Event::kHold, {}, run.first_pfn, run.count));
	}
	size_t balloon_held_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		EXPECT_TRUE(lock_held);
		size_t run_count = 0;
		for (uint64_t taken = 0; taken < max_pages && !held.empty(); taken++) {
			uint64_t pfn = held.back();
			vb::PageRun* last = run_count ? &runs[run_count - 1] : nullptr;
			if (last && last->first_pfn == pfn + 1) {
				last->first_pfn = pfn;
				last->count++;
			} else if (last && last->first_pfn + last->count == pfn) {
				last->count++;
			} else if (run_count < max_runs) {
				runs[run_count++] = {pfn, 1, 0};
			} else {
				break;
			}
			held.pop_back();
			dequeued.insert(pfn);
			EXPECT_TRUE(allocator.move_from_balloon(pfn, 1));
			log_event(Event::of(Event::kTake, {}, pfn, 1));
		}
		return run_count;
	}
	void balloon_list_mark_initialised(vb::PageRun run)
	{
		EXPECT_TRUE(lock_held);
		for (uint64_t i = 0; i < run.count; i++) {
			EXPECT_EQ(allocator.state(run.first_pfn + i), vbsim::BuddyAllocator::FrameState::kBalloon);
			initialised.insert(run.first_pfn + i);
		}
	}
	void balloon_list_replace(uint64_t old_pfn, uint64_t new_pfn)
	{
		for (auto& pfn : balloon_list) {
			if (pfn == old_pfn) {
				pfn = new_pfn;
				EXPECT_TRUE(allocator.move_from_balloon(old_pfn, 1));
				EXPECT_TRUE(allocator.move_to_balloon(new_pfn, 1));
				return;
			}
		}
		ADD_FAILURE() << "replace of a page not in the balloon: " << old_pfn;
	}
	void adjust_managed_pages(vb::PageRun run, bool add)
	{
		managed_pages += add ? static_cast<int64_t>(run.count) : -static_cast<int64_t>(run.count);
	}
	void initialise_pages(vb::PageRun run)
	{
		log_event(Event::of(Event::kInitialise, {}, run.first_pfn, run.count));
	}
	void hint_list_insert(vb::PageRun run)
	{
		EXPECT_FALSE(lock_held) << "hinting must not hold the balloon lock";
		EXPECT_EQ(allocator.state(run.first_pfn), vbsim::BuddyAllocator::FrameState::kUsed);
		hint_list.push_back(run);
		log_event(Event::of(Event::kHintInsert, {}, run.first_pfn, run.count));
		if (after_hint_insert)
			after_hint_insert();
	}
	size_t hint_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages)
	{
		size_t count = 0;
		uint64_t pages = 0;
		while (count < max_runs && pages < max_pages && !hint_list.empty()) {
			runs[count] = hint_list.back();
			hint_list.pop_back();
			pages += runs[count].count;
			count++;
		}
		return count;
	}
	uint64_t free_pages_kept() { return kept_free_pages; }
	void pressure_sample(vb::PressureSample* sample) { *sample = pressure; }
	uint64_t phys_addr(const void* buffer) { return reinterpret_cast<uintptr_t>(buffer); }
	bool queue_add(vb::QueueKind queue, const vb::Segment* out, unsigned n_out, const vb::Segment* in,
		       unsigned n_in, void* token)
	{
		auto& q = queues[static_cast<int>(queue)];
		EXPECT_LE(n_out + n_in, queue_size(queue)) << "a chain longer than its ring";
		if (device_gone || refuse[static_cast<int>(queue)] ||
		    q.pending.size() + q.in_device.size() >= queue_size(queue))
			return false;
		// free_page_vq's ring has no indirect tables here: a chain takes a descriptor
		// per segment.
		if (queue == vb::QueueKind::kFreePage &&
		    (free_page_descriptors_in_use + n_out + n_in > queue_size(queue) ||
		     free_page_adds_before_refusal == 0))
			return false;
		if (queue == vb::QueueKind::kInflate && inflate_adds_before_refusal >= 0 &&
		    inflate_adds_before_refusal-- == 0) {
			refuse[static_cast<int>(queue)] = true;
			return false;
		}
		Event event = Event::of(Event::kAdd, queue);
		event.token = token;
		event.descriptors = n_out;
		if (queue == vb::QueueKind::kInflate || queue == vb::QueueKind::kDeflate) {
			if (chunked) {
				event.ranges.assign(out, out + n_out);
				for (unsigned i = 0; i < n_out; i++) {
					EXPECT_EQ(out[i].phys_addr % 4096, 0u);
					EXPECT_EQ(out[i].len % 4096, 0u);
					for (uint64_t pfn = out[i].phys_addr / 4096;
					     pfn < (out[i].phys_addr + out[i].len) / 4096; pfn++)
						event.wire_pfns.push_back(static_cast<uint32_t>(pfn));
				}
			} else {
				EXPECT_EQ(n_out, 1u);
				EXPECT_EQ(out[0].len % 4, 0u);
				EXPECT_LE(out[0].len, VB_PFNS_PER_DESCRIPTOR_MAX * 4u);
				auto* pfns = reinterpret_cast<const uint32_t*>(out[0].phys_addr);
				event.wire_pfns.assign(pfns, pfns + out[0].len / 4);
			}
			EXPECT_LE(n_in, 1u);
			if (n_in == 1) {
				EXPECT_EQ(queue, vb::QueueKind::kInflate);
				bitmaps[token] = in[0];
				bitmap_requests++;
			}
		} else if (queue == vb::QueueKind::kFreePage) {
			EXPECT_TRUE((n_out == 1 && n_in == 0) || (n_out == 0 && n_in >= 1))
				<< "an id (out) or hinted blocks (in), never both";
			EXPECT_FALSE(lock_held) << "the core must not use free_page_vq under the balloon lock";
			FreePageBuffer buffer;
			if (n_out == 1) {
				buffer.is_id = true;
				buffer.len = out[0].len;
				buffer.cmd_id = *reinterpret_cast<const uint32_t*>(out[0].phys_addr);
			} else {
				buffer.segments.assign(in, in + n_in);
			}
			free_page_buffers.push_back(buffer);
			if (free_page_adds_before_refusal > 0)
				free_page_adds_before_refusal--;
			free_page_descriptors_in_use += n_out + n_in;
			free_page_descriptors.push_back(n_out + n_in);
			max_free_page_in_flight = std::max<size_t>(max_free_page_in_flight,
								   free_page_descriptors_in_use);
			if (n_in > 1 || (n_in == 1 && in[0].len > hint_block_bytes))
				free_page_chains_in_flight++;
			free_page_chain_blocks.push_back(
				n_in > 1 || (n_in == 1 && in[0].len > hint_block_bytes));
			max_free_page_chains_in_flight = std::max(max_free_page_chains_in_flight,
								  free_page_chains_in_flight);
		} else if (queue == vb::QueueKind::kReporting) {
			EXPECT_EQ(n_out, 0u);
			EXPECT_FALSE(lock_held) << "the core must not use reporting_vq under the balloon lock";
			std::vector<vb::Segment> report(in, in + n_in);
			reports.push_back(report);
		} else if (queue == vb::QueueKind::kStats) {
			EXPECT_EQ(n_out, 1u);
			EXPECT_EQ(n_in, 0u);
			auto* entries = reinterpret_cast<const uint8_t*>(out[0].phys_addr);
			last_stats.assign(entries, entries + out[0].len);
		}
		q.pending.push_back(token);
		log_event(event);
		return true;
	}
	void queue_kick(vb::QueueKind queue)
	{
		auto& q = queues[static_cast<int>(queue)];
		log_event(Event::of(Event::kKick, queue));
		// The inline device takes everything kicked; inflate/deflate are acked at once,
		// the stats buffer is held until the test asks for stats.
		for (void* token : q.pending)
			q.in_device.push_back(token);
		q.pending.clear();
	}
	void* queue_get_used(vb::QueueKind queue, uint32_t* len)
	{
		auto& q = queues[static_cast<int>(queue)];
		// A device working beside the guest has finished the oldest request by now.
		if (device_works_alongside && q.used.empty() && !q.in_device.empty() && !device_gone &&
		    (queue == vb::QueueKind::kInflate || queue == vb::QueueKind::kDeflate))
			return queue_wait_used(queue, len);
		if (q.used.empty())
			return nullptr;
		void* token = q.used.front();
		q.used.pop_front();
		*len = queue == vb::QueueKind::kReporting ? report_used_len : 0;
		if (queue == vb::QueueKind::kFreePage) {
			// Returned in the order added: the oldest buffer's descriptors are free again.
			free_page_descriptors_in_use -= free_page_descriptors.front();
			free_page_descriptors.pop_front();
			free_page_chains_in_flight -= free_page_chain_blocks.front() ? 1 : 0;
			free_page_chain_blocks.pop_front();
		}
		return token;
	}
	void* queue_wait_used(vb::QueueKind queue, uint32_t* len)
	{
		auto& q = queues[static_cast<int>(queue)];
		if (acks_before_gone == 0)
			device_gone = true;
		if (device_gone)
			return nullptr;
		if (acks_before_gone > 0)
			acks_before_gone--;
		if (q.used.empty() && !q.in_device.empty() && queue != vb::QueueKind::kStats) {
			q.used.push_back(q.in_device.front());
			q.in_device.pop_front();
			Event ack = Event::of(Event::kAck, queue);
			ack.token = q.used.back();
			log_event(ack);
			auto bitmap = bitmaps.find(ack.token);
			if (bitmap != bitmaps.end()) {
				auto* bits = reinterpret_cast<uint8_t*>(bitmap->second.phys_addr);
				for (uint32_t i = 0; i < bitmap->second.len; i++)
					bits[i] = device_initialises ? 0xff : 0;
				*len = bitmap->second.len;
				bitmaps.erase(bitmap);
				void* token = q.used.front();
				q.used.pop_front();
				return token;
			}
		}
		if (q.used.empty()) {
			ADD_FAILURE() << "the core waits on a queue with nothing in the device";
			return nullptr;
		}
		return queue_get_used(queue, len);
	}
	bool queue_broken(vb::QueueKind) { return device_gone; }
	uint32_t queue_size(vb::QueueKind queue)
	{
		uint32_t size = queue_sizes[static_cast<int>(queue)];
		return size ? size : queue_capacity;
	}
	uint32_t config_read32(uint32_t offset) { return config[offset / 4]; }
	void config_write32(uint32_t offset, uint32_t value)
	{
		config[offset / 4] = value;
		if (offset == VB_CONFIG_ACTUAL_OFFSET && !lock_held)
			actual_writes_without_lock++;
		log_event(Event::of(Event::kConfigWrite, {}, offset, value));
	}
	void memory_stats(vb::MemoryStats* out) { *out = stats; }
	void lock()
	{
		EXPECT_FALSE(lock_held);
		lock_held = true;
	}
	void unlock()
	{
		EXPECT_TRUE(lock_held);
		lock_held = false;
	}
	bool try_lock()
	{
		if (lock_held)
			return false;
		lock_held = true;
		return true;
	}
	void vlog(vb::LogLevel, const char* fmt, va_list args)
	{
		char line[256];
		vsnprintf(line, sizeof(line), fmt, args);
		log_lines.push_back(line);
	}

	// --- test controls ---
	// The device hands the held stats buffer back, asking for fresh values.
	bool request_stats()
	{
		auto& q = queues[static_cast<int>(vb::QueueKind::kStats)];
		if (q.in_device.empty())
			return false;
		q.used.push_back(q.in_device.front());
		q.in_device.pop_front();
		return true;
	}
	// A device reset: free_page_vq holds nothing any more.
	void reset_free_page_queue()
	{
		queues[static_cast<int>(vb::QueueKind::kFreePage)] = {};
		free_page_descriptors_in_use = 0;
		free_page_descriptors.clear();
		free_page_chains_in_flight = 0;
		free_page_chain_blocks.clear();
	}
	void log_event(Event event) { events.push_back(std::move(event)); }
	std::vector<Event> events_of(Event::Kind kind) const
	{
		std::vector<Event> out;
		for (const Event& e : events)
			if (e.kind == kind)
				out.push_back(e);
		return out;
	}

	struct Queue {
		std::deque<void*> pending;   // added, not yet kicked
		std::deque<void*> in_device; // kicked, not yet returned
		std::deque<void*> used;
	};

	vbsim::BuddyAllocator allocator;
	std::vector<uint64_t> balloon_list;
	// Ballooned pages off the list: deflates the host did not acknowledge (balloon_hold).
	std::vector<uint64_t> held;
	// Taken off the balloon list (or the held pages) and not yet freed or held again.
	std::set<uint64_t> dequeued;
	std::vector<vb::PageRun> hint_list;
	// What travelled on free_page_vq, in order: id buffers (out) and chains of hinted
	// blocks (in segments).
	struct FreePageBuffer {
		bool is_id = false;
		uint32_t cmd_id = 0;
		uint32_t len = 0;		   // an id buffer's
		std::vector<vb::Segment> segments; // a chain's
		uint64_t bytes() const
		{
			uint64_t sum = 0;
			for (const vb::Segment& segment : segments)
				sum += segment.len;
			return sum;
		}
	};
	std::vector<FreePageBuffer> free_page_buffers;
	size_t max_free_page_in_flight = 0; // descriptors
	// Buffers carrying more than one block (more than one segment, or one longer than a
	// block of hint_block_bytes): the chains, on the ring now and at most at once.
	size_t free_page_chains_in_flight = 0;
	size_t max_free_page_chains_in_flight = 0;
	uint64_t hint_block_bytes = 4ull << 20;
	// free_page_vq buffers the queue still takes before it refuses every later one (-1: no
	// limit).
	int free_page_adds_before_refusal = -1;
	uint32_t free_page_descriptors_in_use = 0;
	std::deque<uint32_t> free_page_descriptors; // per buffer not yet returned, oldest first
	std::deque<bool> free_page_chain_blocks;    // per buffer not yet returned: a chain
	std::function<void()> after_hint_insert; // a test's device acting mid-round
	std::vector<std::vector<vb::Segment>> reports; // reporting_vq chains
	std::set<uint64_t> initialised;
	std::map<const void*, vb::Segment> bitmaps;
	bool chunked = false;
	bool device_initialises = true;
	uint32_t report_used_len = 0; // what reporting_vq's device says it wrote (bit 6)
	uint64_t freed_initialised = 0;
	uint64_t freed_whole_block_pages = 0; // freed with kPageRunWholeBlock
	uint64_t bitmap_requests = 0;
	Queue queues[VB_QUEUE_KIND_COUNT];
	uint32_t queue_capacity = 128;     // buffers a queue holds (and its ring size)...
	uint32_t queue_sizes[VB_QUEUE_KIND_COUNT] = {}; // ...unless set here per queue
	bool refuse[VB_QUEUE_KIND_COUNT] = {};          // the queue refuses every buffer
	// Acknowledgements the device still gives before it goes away (-1: it stays); once
	// gone, waits return nullptr and every queue refuses.
	int acks_before_gone = -1;
	bool device_gone = false;
	uint64_t actual_writes_without_lock = 0;
	uint32_t config[4] = {};
	vb::MemoryStats stats{};
	vb::PressureSample pressure{}; // what pressure_sample() says
	uint64_t allocations_by_reclaim[2] = {};
	uint64_t kept_free_pages = 0; // what free_pages_kept() says: the allocator's watermarks
	std::vector<uint8_t> last_stats;
	std::vector<Event> events;
	std::vector<std::string> log_lines;
	int64_t managed_pages = 0;
	bool lock_held = false;
	bool fail_allocations = false;
	// Allocations that still succeed before every later one fails (-1: no limit).
	int allocations_before_failure = -1;
	// Inflate buffers the queue still takes before it refuses every later one (-1: no limit).
	int inflate_adds_before_refusal = -1;
	// Inflate/deflate requests are acknowledged as soon as the core looks (queue_get_used),
	// not only when it waits: a host that discards while the guest allocates.
	bool device_works_alongside = false;
	std::function<void()> after_alloc; // a test acting between two allocations
	uint64_t allocations_by_use[2] = {}; // by vb::PageUse
};

static_assert(vb::BalloonOs<FakeOs>);

} // namespace vbtest

#endif
