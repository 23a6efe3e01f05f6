// SPDX-License-Identifier: GPL-2.0
#include "balloon/host_page_ownership.h"

#include <algorithm>

namespace vbsim
{

namespace
{

constexpr uint64_t kBitsPerWord = 64;

uint64_t bit_of(uint64_t pfn)
{
	return uint64_t{1} << (pfn % kBitsPerWord);
}

} // namespace

HostPageOwnership::HostPageOwnership(uint64_t page_count)
    : page_count_(page_count), words_(std::make_unique<std::atomic<uint64_t>[]>(
				       (page_count + kBitsPerWord - 1) / kBitsPerWord))
{
}

bool HostPageOwnership::owns(uint64_t pfn) const
{
	return pfn < page_count_ &&
	       (words_[pfn / kBitsPerWord].load(std::memory_order_acquire) & bit_of(pfn)) != 0;
}

bool HostPageOwnership::take(uint64_t pfn)
{
	if (pfn >= page_count_)
		return false;
	const uint64_t before =
		words_[pfn / kBitsPerWord].fetch_or(bit_of(pfn), std::memory_order_acq_rel);
	if (before & bit_of(pfn))
		return false;
	owned_wire_pages_.fetch_add(1, std::memory_order_acq_rel);
	return true;
}

bool HostPageOwnership::give_back(uint64_t pfn)
{
	if (pfn >= page_count_)
		return false;
	const uint64_t before =
		words_[pfn / kBitsPerWord].fetch_and(~bit_of(pfn), std::memory_order_acq_rel);
	if (!(before & bit_of(pfn)))
		return false;
	owned_wire_pages_.fetch_sub(1, std::memory_order_acq_rel);
	return true;
}

// The bits of [first, first + count) that fall in word `word`, as a mask.
static uint64_t run_mask(uint64_t word, uint64_t first, uint64_t end)
{
	const uint64_t word_first = word * kBitsPerWord;
	const uint64_t lo = first > word_first ? first - word_first : 0;
	const uint64_t hi = end - word_first < kBitsPerWord ? end - word_first : kBitsPerWord;
	const uint64_t upto_hi = hi == kBitsPerWord ? ~uint64_t{0} : (uint64_t{1} << hi) - 1;
	return upto_hi & ~((uint64_t{1} << lo) - 1);
}

uint64_t HostPageOwnership::take_run(uint64_t first_pfn, uint64_t count)
{
	if (first_pfn >= page_count_)
		return 0;
	const uint64_t end = first_pfn + std::min(count, page_count_ - first_pfn);
	uint64_t taken = 0;
	// One atomic per 64 pages: a 2 MiB chunk is 8 of them instead of 512.
	for (uint64_t word = first_pfn / kBitsPerWord; word * kBitsPerWord < end; ++word) {
		const uint64_t mask = run_mask(word, first_pfn, end);
		const uint64_t before = words_[word].fetch_or(mask, std::memory_order_acq_rel);
		taken += static_cast<uint64_t>(__builtin_popcountll(mask & ~before));
	}
	owned_wire_pages_.fetch_add(taken, std::memory_order_acq_rel);
	return taken;
}

uint64_t HostPageOwnership::owned_in_run(uint64_t first_pfn, uint64_t count) const
{
	if (first_pfn >= page_count_)
		return 0;
	const uint64_t end = first_pfn + std::min(count, page_count_ - first_pfn);
	uint64_t owned = 0;
	for (uint64_t word = first_pfn / kBitsPerWord; word * kBitsPerWord < end; ++word) {
		const uint64_t bits = words_[word].load(std::memory_order_acquire);
		owned += static_cast<uint64_t>(__builtin_popcountll(bits & run_mask(word, first_pfn, end)));
	}
	return owned;
}

uint64_t HostPageOwnership::give_back_run(uint64_t first_pfn, uint64_t count)
{
	if (first_pfn >= page_count_)
		return 0;
	const uint64_t end = first_pfn + std::min(count, page_count_ - first_pfn);
	uint64_t given = 0;
	for (uint64_t word = first_pfn / kBitsPerWord; word * kBitsPerWord < end; ++word) {
		const uint64_t mask = run_mask(word, first_pfn, end);
		const uint64_t before = words_[word].fetch_and(~mask, std::memory_order_acq_rel);
		given += static_cast<uint64_t>(__builtin_popcountll(mask & before));
	}
	owned_wire_pages_.fetch_sub(given, std::memory_order_acq_rel);
	return given;
}

uint64_t HostPageOwnership::give_back_all()
{
	uint64_t released = 0;
	const uint64_t word_count = (page_count_ + kBitsPerWord - 1) / kBitsPerWord;
	for (uint64_t i = 0; i < word_count; ++i)
		released += static_cast<uint64_t>(
			__builtin_popcountll(words_[i].exchange(0, std::memory_order_acq_rel)));
	owned_wire_pages_.fetch_sub(released, std::memory_order_acq_rel);
	return released;
}

} // namespace vbsim
