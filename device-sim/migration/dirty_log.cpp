// SPDX-License-Identifier: GPL-2.0
#include "migration/dirty_log.h"

#include <algorithm>
#include <bit>

#include "vballoon/support/mutant.h"

namespace vbsim
{

DirtyLog::DirtyLog(uint64_t pages)
	: pages_(pages), words_((pages + kPagesPerWord - 1) / kPagesPerWord),
	  first_(new Word[words_]()), second_(new Word[words_]()), active_(first_.get()),
	  retired_(second_.get())
{
}

void DirtyLog::mark_range(uint64_t first_page, uint64_t count)
{
	if (first_page >= pages_ || count == 0)
		return;
	if (count > pages_ - first_page)
		count = pages_ - first_page;
	Word* bitmap = active_.load(std::memory_order_acquire);
	uint64_t page = first_page;
	const uint64_t end = first_page + count;
	while (page < end) {
		const uint64_t word = page / kPagesPerWord;
		const unsigned shift = page % kPagesPerWord;
		const uint64_t in_word = std::min<uint64_t>(kPagesPerWord - shift, end - page);
		const uint64_t mask = in_word == kPagesPerWord ? ~uint64_t{0}
							       : ((uint64_t{1} << in_word) - 1) << shift;
		bitmap[word].fetch_or(mask, std::memory_order_release);
		page += in_word;
	}
}

uint64_t DirtyLog::collect(Word* from, uint64_t words, uint64_t* into)
{
	uint64_t added = 0;
	for (uint64_t i = 0; i < words; i++) {
		// Most words are clean: a plain load skips them without taking the cache line.
		if (from[i].load(std::memory_order_relaxed) == 0)
			continue;
		const uint64_t bits = from[i].exchange(0, std::memory_order_acq_rel);
		added += std::popcount(bits & ~into[i]);
		into[i] |= bits;
	}
	return added;
}

uint64_t DirtyLog::harvest(uint64_t* into)
{
	Word* retired = active_.exchange(retired_, std::memory_order_acq_rel);
	retired_ = retired;
	return collect(retired, words_, into);
}

uint64_t DirtyLog::harvest_final(uint64_t* into)
{
	// Mutant (spec/compare_mutants.tsv): only the bitmap the last harvest retired, not the
	// one the guest has been marking since.
	if (VB_MUTANT(MIG_FINAL_HARVEST_ONE_BITMAP))
		return collect(retired_, words_, into);
	uint64_t added = harvest(into);
	added += collect(active_.load(std::memory_order_acquire), words_, into);
	return added;
}

uint64_t DirtyLog::harvest_get_and_clear(uint64_t* into)
{
	return collect(active_.load(std::memory_order_acquire), words_, into);
}

uint64_t DirtyLog::count_marked() const
{
	uint64_t marked = 0;
	for (uint64_t i = 0; i < words_; i++)
		marked += std::popcount(first_[i].load(std::memory_order_relaxed) |
					second_[i].load(std::memory_order_relaxed));
	return marked;
}

void DirtyLog::clear()
{
	for (uint64_t i = 0; i < words_; i++) {
		first_[i].store(0, std::memory_order_relaxed);
		second_[i].store(0, std::memory_order_relaxed);
	}
}

} // namespace vbsim
