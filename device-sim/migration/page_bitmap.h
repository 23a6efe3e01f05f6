// SPDX-License-Identifier: GPL-2.0
//
// The source's bitmap of pages still to send in a round (QEMU's RAMBlock bmap): senders
// take a word at a time, free page hints clear bits from another thread, so every word is
// atomic.
#ifndef VBSIM_MIGRATION_PAGE_BITMAP_H
#define VBSIM_MIGRATION_PAGE_BITMAP_H

#include <atomic>
#include <bit>
#include <cstdint>
#include <memory>

namespace vbsim::migration
{

class PageBitmap
{
public:
	explicit PageBitmap(uint64_t pages)
		: pages_(pages), words_((pages + 63) / 64), bits_(new std::atomic<uint64_t>[words_]())
	{
	}

	uint64_t pages() const { return pages_; }
	uint64_t words() const { return words_; }

	void set_all()
	{
		for (uint64_t w = 0; w < words_; w++)
			bits_[w].store(w + 1 < words_ || pages_ % 64 == 0 ? ~uint64_t{0}
									   : (uint64_t{1} << (pages_ % 64)) - 1,
				       std::memory_order_relaxed);
	}
	void set_range(uint64_t first, uint64_t count)
	{
		for (uint64_t p = first; p < first + count && p < pages_; p++)
			bits_[p / 64].fetch_or(uint64_t{1} << (p % 64), std::memory_order_relaxed);
	}
	// Clears [first, first + count); returns how many bits were set.
	uint64_t clear_range(uint64_t first, uint64_t count);
	void or_words(const uint64_t* from)
	{
		for (uint64_t w = 0; w < words_; w++)
			if (from[w] != 0)
				bits_[w].fetch_or(from[w], std::memory_order_relaxed);
	}
	uint64_t take_word(uint64_t word) { return bits_[word].exchange(0, std::memory_order_acq_rel); }
	uint64_t count() const
	{
		uint64_t n = 0;
		for (uint64_t w = 0; w < words_; w++)
			n += std::popcount(bits_[w].load(std::memory_order_relaxed));
		return n;
	}

	// Set bits in [first, first + count).
	uint64_t count_range(uint64_t first, uint64_t count) const
	{
		uint64_t n = 0;
		for (uint64_t p = first; p < first + count && p < pages_; p++)
			n += (bits_[p / 64].load(std::memory_order_relaxed) >> (p % 64)) & 1;
		return n;
	}

private:
	uint64_t pages_;
	uint64_t words_;
	std::unique_ptr<std::atomic<uint64_t>[]> bits_;
};

inline uint64_t PageBitmap::clear_range(uint64_t first, uint64_t count)
{
	uint64_t cleared = 0;
	uint64_t page = first;
	const uint64_t end = first + count < pages_ ? first + count : pages_;
	while (page < end) {
		const unsigned shift = page % 64;
		const uint64_t in_word = 64 - shift < end - page ? 64 - shift : end - page;
		const uint64_t mask =
			in_word == 64 ? ~uint64_t{0} : ((uint64_t{1} << in_word) - 1) << shift;
		cleared += std::popcount(bits_[page / 64].fetch_and(~mask, std::memory_order_acq_rel) & mask);
		page += in_word;
	}
	return cleared;
}

} // namespace vbsim::migration

#endif
