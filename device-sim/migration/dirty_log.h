// SPDX-License-Identifier: GPL-2.0
//
// The dirty-page log: one bit per 4 KiB guest page, set after every write into guest RAM
// and harvested by the migration model between rounds.
//
// Marking. A writer first stores its data, then sets the page's bit with an atomic OR
// (release), so a harvester that sees the bit also sees the data, and a bit set after the
// harvester looked stays for the next harvest. A range is marked with one 64-bit OR per
// bitmap word it covers. Writers that touch many pages one at a time use a DirtyMarker:
// it gathers bits of one word and ORs them in one go (the batching of the vhost dirty-log thread), and
// stops gathering while its writes have no locality, so random writes cost what a plain
// per-page atomic costs (bench/dirty_log measures all of this).
//
// Harvest. Two bitmaps: writers mark the active one; a harvest makes the other one active
// (one pointer exchange, the KVM dirty-bitmap thread) and then collects and clears the retired one, taking
// each non-zero word with an exchange so an OR that lands during the scan is either
// collected now or left for the next harvest, never overwritten. A writer that loaded the
// retired pointer just before the swap may set its bit after the scan; that bit stays in
// the retired bitmap and is collected two harvests later. harvest_final(), called while
// no writer runs (the guest is paused), collects both bitmaps, so no bit is ever lost.
#ifndef VBSIM_MIGRATION_DIRTY_LOG_H
#define VBSIM_MIGRATION_DIRTY_LOG_H

#include <atomic>
#include <cstdint>
#include <memory>

namespace vbsim
{

class DirtyLog
{
public:
	static constexpr unsigned kPagesPerWord = 64;

	explicit DirtyLog(uint64_t pages);
	DirtyLog(const DirtyLog&) = delete;
	DirtyLog& operator=(const DirtyLog&) = delete;

	uint64_t pages() const { return pages_; }
	uint64_t words() const { return words_; }

	// Pages [first_page, first_page + count), clipped to the log. One atomic OR per word.
	void mark_range(uint64_t first_page, uint64_t count);
	void mark_page(uint64_t page)
	{
		if (page < pages_)
			or_word(page / kPagesPerWord, uint64_t{1} << (page % kPagesPerWord));
	}
	void or_word(uint64_t word, uint64_t mask)
	{
		active_.load(std::memory_order_acquire)[word].fetch_or(mask, std::memory_order_release);
	}

	// Swaps the bitmaps and ORs every bit of the retired one into `into` (words() words),
	// clearing it. Returns the number of bits newly set in `into`.
	uint64_t harvest(uint64_t* into);
	// Both bitmaps; only while no writer runs.
	uint64_t harvest_final(uint64_t* into);
	// The single-bitmap alternative (KVM's classic GET_DIRTY_LOG with clear): exchange
	// every non-zero word of the active bitmap in place. For the benchmark's comparison.
	uint64_t harvest_get_and_clear(uint64_t* into);
	// Bits set in either bitmap (for tests; not atomic with respect to writers).
	uint64_t count_marked() const;
	void clear();

private:
	using Word = std::atomic<uint64_t>;
	static uint64_t collect(Word* from, uint64_t words, uint64_t* into);

	uint64_t pages_;
	uint64_t words_;
	std::unique_ptr<Word[]> first_;
	std::unique_ptr<Word[]> second_;
	std::atomic<Word*> active_;
	Word* retired_;
};

// Per-writer batching of page marks. Not shared between threads. The marks it holds reach
// the log on flush() (and on destruction): a writer flushes before it tells anyone its
// writes are done, as the DPDK patch flushes before updating the used index.
class DirtyMarker
{
public:
	explicit DirtyMarker(DirtyLog* log) : log_(log), pages_(log != nullptr ? log->pages() : 0) {}
	~DirtyMarker() { flush(); }
	DirtyMarker(const DirtyMarker&) = delete;
	DirtyMarker& operator=(const DirtyMarker&) = delete;

	void mark(uint64_t page)
	{
		if (page >= pages_) // also when there is no log
			return;
		const uint64_t word = page / DirtyLog::kPagesPerWord;
		const uint64_t bit = uint64_t{1} << (page % DirtyLog::kPagesPerWord);
		if (direct_left_ != 0) {
			// No locality lately: mark at once, as a per-page atomic would.
			direct_left_--;
			log_->or_word(word, bit);
			return;
		}
		marks_++;
		if (word == word_) {
			mask_ |= bit;
		} else {
			flush();
			word_ = word;
			mask_ = bit;
			misses_++;
		}
		// Mostly word changes over a window means random writes, where gathering only
		// adds work: mark directly for a stretch, then look again.
		if (marks_ == kWindow) {
			if (misses_ * 4 > kWindow * 3) {
				flush();
				direct_left_ = kDirectStretch;
			}
			marks_ = 0;
			misses_ = 0;
		}
	}

	void flush()
	{
		if (mask_ != 0)
			log_->or_word(word_, mask_);
		mask_ = 0;
		word_ = kNoWord;
	}

private:
	static constexpr uint64_t kNoWord = ~uint64_t{0};
	static constexpr unsigned kWindow = 64;
	static constexpr unsigned kDirectStretch = 1 << 16;

	DirtyLog* log_;
	uint64_t pages_;
	uint64_t word_ = kNoWord;
	uint64_t mask_ = 0;
	unsigned marks_ = 0;
	unsigned misses_ = 0;
	unsigned direct_left_ = 0;
};

} // namespace vbsim

#endif
