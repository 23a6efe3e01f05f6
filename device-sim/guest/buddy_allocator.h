// SPDX-License-Identifier: GPL-2.0
//
// The simulated guest's page allocator: a binary buddy system over a range of guest page
// frames, orders 0 to kMaxOrder, like Linux's. Its bookkeeping lives outside guest RAM
// (as struct page does), so allocating and freeing never writes to the pages themselves:
// a discarded page stays discarded until someone really touches it.
//
// Every frame is in exactly one of three states, and the counts always add up:
//   free + used + balloon == managed
#ifndef VBALLOON_SIM_GUEST_BUDDY_ALLOCATOR_H
#define VBALLOON_SIM_GUEST_BUDDY_ALLOCATOR_H

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace vbsim {

class BuddyAllocator {
public:
	static constexpr unsigned kMaxOrder = 10; // 4 MiB blocks, as MAX_ORDER 11 in Linux 6.1

	enum class FrameState : uint8_t { kFree, kUsed, kBalloon };

	struct Counts {
		uint64_t managed = 0;
		uint64_t free = 0;
		uint64_t used = 0;
		uint64_t balloon = 0;
	};

	// Manages frames [first_pfn, first_pfn + frame_count); all start free, ordered as a
	// booted Linux orders them: allocations take the lowest free frames first.
	BuddyAllocator(uint64_t first_pfn, uint64_t frame_count);

	// Puts every free list in a random order (Linux's page_alloc.shuffle=1, which shuffles
	// free memory at boot): allocations then come from anywhere in RAM instead of from one
	// end, and so does the free memory left behind.
	void shuffle_free_lists(uint64_t seed);
	// Orders every free list from the top of RAM down, as Linux before 5.10 left a booted
	// guest's (boot memory freed to the lists' head in address order): allocations then
	// come from the top and the untouched memory lies at the bottom.
	void order_free_lists_top_first();
	// A naturally aligned block of 2^order free frames, now used; nothing when none is free.
	std::optional<uint64_t> allocate(unsigned order);
	// Returns used frames to the free lists, merging buddies. Refuses (and changes
	// nothing) when any frame of the run is not in the used state: a double free or a
	// free of balloon pages is a driver bug the tests must see.
	bool free_run(uint64_t first_pfn, uint64_t count);
	// Moves used frames into (or out of) the balloon. Refuses on any frame in the wrong state.
	bool move_to_balloon(uint64_t first_pfn, uint64_t count);
	bool move_from_balloon(uint64_t first_pfn, uint64_t count);

	// ---- Free page reporting: mm/page_reporting.c's view of the free lists ------------
	// Calls `notify` (outside the allocator's lock) whenever a free block of at least
	// `order` forms: the reporting path's cue to schedule a pass.
	void set_report_notifier(unsigned order, std::function<void()> notify);
	// Takes up to `max_blocks` free blocks of exactly `order` that are not marked reported
	// off the free lists (a larger block is never split for it) and writes their first
	// PFNs. They are isolated (counted used) until put_back_isolated(). Returns the count.
	size_t isolate_unreported(unsigned order, uint64_t* first_pfns, size_t max_blocks);
	// Returns an isolated block to the head of its free list, marked reported when
	// `reported` and it did not merge with a free buddy (as Linux does). Never notifies.
	bool put_back_isolated(uint64_t first_pfn, unsigned order, bool reported);
	// Makes the first block of the `order` list not marked reported the list's head, the
	// reported blocks before it moving to the tail in their order (Linux's
	// list_rotate_to_front() in page_reporting_cycle(), before each report and at the end
	// of a pass): allocations then take unreported memory before reported memory.
	void rotate_unreported_to_front(unsigned order);
	// Free pages marked reported; whether the free block holding `pfn` is marked.
	uint64_t reported_pages() const;
	uint64_t isolated_pages() const; // taken by isolate_unreported(), not put back yet
	bool is_reported(uint64_t pfn) const;
	uint64_t unreported_free_blocks(unsigned order) const;

	FrameState state(uint64_t pfn) const;
	Counts counts() const;
	uint64_t free_blocks(unsigned order) const;
	// Checks every invariant (lists vs states, counts, buddy alignment); empty when sound.
	std::string check_consistency() const;

	uint64_t first_pfn() const { return first_pfn_; }
	uint64_t frame_count() const { return frame_count_; }

private:
	static constexpr uint32_t kNone = UINT32_MAX;

	struct Frame {
		uint32_t next = kNone; // free-list links, valid on the head frame of a free block
		uint32_t prev = kNone;
		uint8_t order = 0;     // order of the free block this frame heads
		bool block_head = false;
		bool reported = false; // on the head frame of a free block the host was told of
	};

	void push_free(uint32_t index, unsigned order);
	void unlink_free(uint32_t index, unsigned order);
	// Returns the order of the free block the frames ended up in (after merging).
	unsigned free_block_locked(uint32_t index, unsigned order);
	bool run_in_state(uint64_t first_pfn, uint64_t count, FrameState expected) const;
	void set_state(uint64_t first_pfn, uint64_t count, FrameState state);

	const uint64_t first_pfn_;
	const uint64_t frame_count_;
	mutable std::mutex mutex_;
	std::vector<Frame> frames_;
	// Apart from the frames, one byte each: a 2 MiB block's 512 states are one cache-line
	// sweep to check or set, not 512 strided writes (the balloon moves millions of frames).
	std::vector<FrameState> states_;
	uint32_t free_heads_[kMaxOrder + 1];
	uint64_t free_block_count_[kMaxOrder + 1] = {};
	Counts counts_;
	uint64_t reported_pages_ = 0;
	uint64_t isolated_pages_ = 0;
	uint64_t reported_blocks_[kMaxOrder + 1] = {};
	unsigned report_order_ = kMaxOrder + 1;
	std::function<void()> report_notify_;
};

} // namespace vbsim

#endif
