// SPDX-License-Identifier: GPL-2.0
#include "buddy_allocator.h"

#include <algorithm>
#include <functional>
#include <random>
#include <sstream>
#include <utility>
#include <vector>

namespace vbsim {

namespace {

// The largest order whose naturally aligned block starts at `pfn` and ends by `end`.
unsigned largest_fitting_order(uint64_t pfn, uint64_t end, unsigned max_order)
{
	unsigned order = 0;

	while (order < max_order && (pfn & ((2ull << order) - 1)) == 0 && pfn + (2ull << order) <= end)
		order++;
	return order;
}

} // namespace

BuddyAllocator::BuddyAllocator(uint64_t first_pfn, uint64_t frame_count)
	: first_pfn_(first_pfn), frame_count_(frame_count), frames_(frame_count),
      states_(frame_count, FrameState::kUsed)
{
	std::fill(std::begin(free_heads_), std::end(free_heads_), kNone);
	counts_.managed = frame_count;
	counts_.used = frame_count;
	std::lock_guard lock(mutex_);
	// Linux (5.10 on, Debian 12's 6.1) frees boot memory in address order to the tail of
	// the free lists (memblock_free_all, __free_pages_core's FPI_TO_TAIL), so a booted
	// guest takes its memory from the bottom of RAM upward and what it never touches lies
	// at the top. Pushing the blocks to the list heads from the top down gives that order.
	std::vector<std::pair<uint64_t, unsigned>> blocks;
	uint64_t end = first_pfn + frame_count;
	for (uint64_t pfn = first_pfn; pfn < end;) {
		unsigned order = largest_fitting_order(pfn, end, kMaxOrder);
		blocks.emplace_back(pfn, order);
		pfn += 1ull << order;
	}
	for (auto block = blocks.rbegin(); block != blocks.rend(); ++block)
		free_block_locked(static_cast<uint32_t>(block->first - first_pfn), block->second);
}

void BuddyAllocator::push_free(uint32_t index, unsigned order)
{
	Frame& head = frames_[index];
	head.block_head = true;
	head.order = static_cast<uint8_t>(order);
	head.prev = kNone;
	head.next = free_heads_[order];
	if (head.next != kNone)
		frames_[head.next].prev = index;
	free_heads_[order] = index;
	free_block_count_[order]++;
}

void BuddyAllocator::shuffle_free_lists(uint64_t seed)
{
	std::lock_guard lock(mutex_);
	std::mt19937_64 random(seed);
	for (unsigned order = 0; order <= kMaxOrder; order++) {
		std::vector<uint32_t> heads;
		for (uint32_t index = free_heads_[order]; index != kNone; index = frames_[index].next)
			heads.push_back(index);
		std::shuffle(heads.begin(), heads.end(), random);
		// Relinked in place: the blocks stay free and keep their reported marks.
		uint32_t prev = kNone;
		free_heads_[order] = heads.empty() ? kNone : heads.front();
		for (size_t i = 0; i < heads.size(); i++) {
			frames_[heads[i]].prev = prev;
			frames_[heads[i]].next = i + 1 < heads.size() ? heads[i + 1] : kNone;
			prev = heads[i];
		}
	}
}

void BuddyAllocator::order_free_lists_top_first()
{
	std::lock_guard lock(mutex_);
	for (unsigned order = 0; order <= kMaxOrder; order++) {
		std::vector<uint32_t> heads;
		for (uint32_t index = free_heads_[order]; index != kNone; index = frames_[index].next)
			heads.push_back(index);
		std::sort(heads.begin(), heads.end(), std::greater<uint32_t>());
		uint32_t prev = kNone;
		free_heads_[order] = heads.empty() ? kNone : heads.front();
		for (size_t i = 0; i < heads.size(); i++) {
			frames_[heads[i]].prev = prev;
			frames_[heads[i]].next = i + 1 < heads.size() ? heads[i + 1] : kNone;
			prev = heads[i];
		}
	}
}

void BuddyAllocator::unlink_free(uint32_t index, unsigned order)
{
	Frame& head = frames_[index];
	if (head.prev != kNone)
		frames_[head.prev].next = head.next;
	else
		free_heads_[order] = head.next;
	if (head.next != kNone)
		frames_[head.next].prev = head.prev;
	head.next = head.prev = kNone;
	head.block_head = false;
	free_block_count_[order]--;
	// A block leaving the free lists (allocated, split, merged) is no longer reported.
	if (head.reported) {
		head.reported = false;
		reported_pages_ -= 1ull << order;
		reported_blocks_[order]--;
	}
}

unsigned BuddyAllocator::free_block_locked(uint32_t index, unsigned order)
{
	uint64_t pfn = first_pfn_ + index;
	uint64_t size = 1ull << order;

	std::fill_n(states_.begin() + index, size, FrameState::kFree);
	counts_.used -= size;
	counts_.free += size;

	// Merge with the buddy for as long as it is a free block of the same order.
	while (order < kMaxOrder) {
		uint64_t buddy_pfn = pfn ^ (1ull << order);
		if (buddy_pfn < first_pfn_ || buddy_pfn + (1ull << order) > first_pfn_ + frame_count_)
			break;
		uint32_t buddy = static_cast<uint32_t>(buddy_pfn - first_pfn_);
		if (!frames_[buddy].block_head || frames_[buddy].order != order)
			break;
		unlink_free(buddy, order);
		pfn = std::min(pfn, buddy_pfn);
		order++;
	}
	push_free(static_cast<uint32_t>(pfn - first_pfn_), order);
	return order;
}

void BuddyAllocator::set_report_notifier(unsigned order, std::function<void()> notify)
{
	std::lock_guard lock(mutex_);
	report_order_ = order;
	report_notify_ = std::move(notify);
}

size_t BuddyAllocator::isolate_unreported(unsigned order, uint64_t* first_pfns, size_t max_blocks)
{
	if (order > kMaxOrder)
		return 0;
	std::lock_guard lock(mutex_);
	size_t taken = 0;
	uint32_t index = free_heads_[order];
	while (index != kNone && taken < max_blocks) {
		uint32_t next = frames_[index].next;
		if (!frames_[index].reported) {
			unlink_free(index, order);
			uint64_t size = 1ull << order;
			std::fill_n(states_.begin() + index, size, FrameState::kUsed);
			counts_.free -= size;
			counts_.used += size;
			isolated_pages_ += size;
			first_pfns[taken++] = first_pfn_ + index;
		}
		index = next;
	}
	return taken;
}

bool BuddyAllocator::put_back_isolated(uint64_t first_pfn, unsigned order, bool reported)
{
	std::lock_guard lock(mutex_);
	if (order > kMaxOrder || (first_pfn & ((1ull << order) - 1)) ||
	    !run_in_state(first_pfn, 1ull << order, FrameState::kUsed))
		return false;
	if (isolated_pages_ < (1ull << order))
		return false;
	isolated_pages_ -= 1ull << order;
	uint32_t index = static_cast<uint32_t>(first_pfn - first_pfn_);
	unsigned merged_order = free_block_locked(index, order);
	if (reported && merged_order == order && frames_[index].block_head) {
		frames_[index].reported = true;
		reported_pages_ += 1ull << order;
		reported_blocks_[order]++;
	}
	return true;
}

void BuddyAllocator::rotate_unreported_to_front(unsigned order)
{
	if (order > kMaxOrder)
		return;
	std::lock_guard lock(mutex_);
	const uint32_t head = free_heads_[order];
	uint32_t first_unreported = head;
	while (first_unreported != kNone && frames_[first_unreported].reported)
		first_unreported = frames_[first_unreported].next;
	if (first_unreported == kNone || first_unreported == head)
		return;
	uint32_t tail = first_unreported;
	while (frames_[tail].next != kNone)
		tail = frames_[tail].next;
	// head .. before | first_unreported .. tail  becomes  first_unreported .. tail | head .. before
	const uint32_t before = frames_[first_unreported].prev;
	frames_[before].next = kNone;
	frames_[first_unreported].prev = kNone;
	frames_[tail].next = head;
	frames_[head].prev = tail;
	free_heads_[order] = first_unreported;
}

uint64_t BuddyAllocator::reported_pages() const
{
	std::lock_guard lock(mutex_);
	return reported_pages_;
}

uint64_t BuddyAllocator::isolated_pages() const
{
	std::lock_guard lock(mutex_);
	return isolated_pages_;
}

uint64_t BuddyAllocator::unreported_free_blocks(unsigned order) const
{
	std::lock_guard lock(mutex_);
	return order <= kMaxOrder ? free_block_count_[order] - reported_blocks_[order] : 0;
}

bool BuddyAllocator::is_reported(uint64_t pfn) const
{
	std::lock_guard lock(mutex_);
	if (pfn < first_pfn_ || pfn >= first_pfn_ + frame_count_)
		return false;
	for (unsigned order = 0; order <= kMaxOrder; order++) {
		uint64_t head = pfn & ~((1ull << order) - 1);
		if (head < first_pfn_)
			break;
		const Frame& frame = frames_[head - first_pfn_];
		if (frame.block_head && frame.order == order)
			return frame.reported;
	}
	return false;
}

std::optional<uint64_t> BuddyAllocator::allocate(unsigned order)
{
	if (order > kMaxOrder)
		return std::nullopt;
	std::lock_guard lock(mutex_);
	unsigned found = order;
	while (found <= kMaxOrder && free_heads_[found] == kNone)
		found++;
	if (found > kMaxOrder)
		return std::nullopt;

	uint32_t index = free_heads_[found];
	unlink_free(index, found);
	// Split: the upper halves go back to the free lists.
	while (found > order) {
		found--;
		push_free(index + (1u << found), found);
	}
	uint64_t size = 1ull << order;
	std::fill_n(states_.begin() + index, size, FrameState::kUsed);
	counts_.free -= size;
	counts_.used += size;
	return first_pfn_ + index;
}

bool BuddyAllocator::run_in_state(uint64_t first_pfn, uint64_t count, FrameState expected) const
{
	if (count == 0 || first_pfn < first_pfn_ || first_pfn + count > first_pfn_ + frame_count_ ||
	    first_pfn + count < first_pfn)
		return false;
	// In stretches without an early exit, which the compiler vectorises.
	constexpr uint64_t kStretch = 64;
	const auto* state = reinterpret_cast<const uint8_t*>(states_.data() + (first_pfn - first_pfn_));
	const auto want = static_cast<uint8_t>(expected);
	uint64_t i = 0;
	for (; i + kStretch <= count; i += kStretch) {
		uint8_t differs = 0;
		for (uint64_t j = 0; j < kStretch; j++)
			differs |= static_cast<uint8_t>(state[i + j] ^ want);
		if (differs)
			return false;
	}
	for (; i < count; i++) {
		if (state[i] != want)
			return false;
	}
	return true;
}

void BuddyAllocator::set_state(uint64_t first_pfn, uint64_t count, FrameState state)
{
	std::fill_n(states_.begin() + (first_pfn - first_pfn_), count, state);
}

bool BuddyAllocator::free_run(uint64_t first_pfn, uint64_t count)
{
	unsigned largest_formed = 0;
	bool reportable;
	{
		std::lock_guard lock(mutex_);
		if (!run_in_state(first_pfn, count, FrameState::kUsed))
			return false;
		uint64_t end = first_pfn + count;
		for (uint64_t pfn = first_pfn; pfn < end;) {
			unsigned order = largest_fitting_order(pfn, end, kMaxOrder);
			largest_formed = std::max(
				largest_formed, free_block_locked(static_cast<uint32_t>(pfn - first_pfn_), order));
			pfn += 1ull << order;
		}
		reportable = largest_formed >= report_order_ && report_notify_;
	}
	// Outside the lock: the reporting path may look at the free lists straight away. The
	// notifier is set before the guest's threads start and cleared after they stop.
	if (reportable)
		report_notify_();
	return true;
}

bool BuddyAllocator::move_to_balloon(uint64_t first_pfn, uint64_t count)
{
	std::lock_guard lock(mutex_);
	if (!run_in_state(first_pfn, count, FrameState::kUsed))
		return false;
	set_state(first_pfn, count, FrameState::kBalloon);
	counts_.used -= count;
	counts_.balloon += count;
	return true;
}

bool BuddyAllocator::move_from_balloon(uint64_t first_pfn, uint64_t count)
{
	std::lock_guard lock(mutex_);
	if (!run_in_state(first_pfn, count, FrameState::kBalloon))
		return false;
	set_state(first_pfn, count, FrameState::kUsed);
	counts_.balloon -= count;
	counts_.used += count;
	return true;
}

BuddyAllocator::FrameState BuddyAllocator::state(uint64_t pfn) const
{
	std::lock_guard lock(mutex_);
	return states_.at(pfn - first_pfn_);
}

BuddyAllocator::Counts BuddyAllocator::counts() const
{
	std::lock_guard lock(mutex_);
	return counts_;
}

uint64_t BuddyAllocator::free_blocks(unsigned order) const
{
	std::lock_guard lock(mutex_);
	return order <= kMaxOrder ? free_block_count_[order] : 0;
}

std::string BuddyAllocator::check_consistency() const
{
	std::lock_guard lock(mutex_);
	std::ostringstream problems;
	std::vector<bool> covered(frame_count_, false);
	uint64_t free_frames = 0;

	for (unsigned order = 0; order <= kMaxOrder; order++) {
		uint64_t blocks = 0;
		uint32_t prev = kNone;
		for (uint32_t index = free_heads_[order]; index != kNone; index = frames_[index].next) {
			const Frame& head = frames_[index];
			uint64_t pfn = first_pfn_ + index;
			if (!head.block_head || head.order != order || head.prev != prev)
				problems << "bad free-list link at pfn " << pfn << " order " << order << "\n";
			if (pfn & ((1ull << order) - 1))
				problems << "misaligned free block at pfn " << pfn << " order " << order << "\n";
			for (uint64_t i = 0; i < (1ull << order); i++) {
				if (index + i >= frame_count_ || covered[index + i] ||
				    states_[index + i] != FrameState::kFree) {
					problems << "free block at pfn " << pfn << " overlaps or is not free\n";
					break;
				}
				covered[index + i] = true;
			}
			free_frames += 1ull << order;
			prev = index;
			if (++blocks > frame_count_) {
				problems << "free list of order " << order << " loops\n";
				break;
			}
		}
		if (blocks != free_block_count_[order])
			problems << "order " << order << " counts " << free_block_count_[order]
				 << " blocks, lists hold " << blocks << "\n";
	}
	uint64_t used = 0, balloon = 0, free_state = 0;
	for (FrameState state : states_) {
		used += state == FrameState::kUsed;
		balloon += state == FrameState::kBalloon;
		free_state += state == FrameState::kFree;
	}
	if (free_state != free_frames || free_frames != counts_.free)
		problems << "free frames: " << free_state << " by state, " << free_frames << " in lists, "
			 << counts_.free << " counted\n";
	if (used != counts_.used || balloon != counts_.balloon)
		problems << "used/balloon counted " << counts_.used << "/" << counts_.balloon << ", found "
			 << used << "/" << balloon << "\n";
	if (counts_.free + counts_.used + counts_.balloon != counts_.managed)
		problems << "free + used + balloon != managed\n";
	return problems.str();
}

} // namespace vbsim
