// SPDX-License-Identifier: GPL-2.0
#include "balloon/host_page_ownership.h"

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
	owned_pages_.fetch_add(1, std::memory_order_acq_rel);
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
	owned_pages_.fetch_sub(1, std::memory_order_acq_rel);
	return true;
}

uint64_t HostPageOwnership::give_back_all()
{
	uint64_t released = 0;
	const uint64_t word_count = (page_count_ + kBitsPerWord - 1) / kBitsPerWord;
	for (uint64_t i = 0; i < word_count; ++i)
		released += static_cast<uint64_t>(
			__builtin_popcountll(words_[i].exchange(0, std::memory_order_acq_rel)));
	owned_pages_.fetch_sub(released, std::memory_order_acq_rel);
	return released;
}

} // namespace vbsim
