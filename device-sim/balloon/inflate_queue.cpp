// SPDX-License-Identifier: GPL-2.0
#include "balloon/inflate_queue.h"

#include <chrono>
#include <stdexcept>

#include "balloon/chunk_request.h"
#include "balloon/host_page_ownership.h"
#include "balloon/huge_page_tracker.h"
#include "balloon/page_discarder.h"
#include "balloon/rules/inflate_queue_rules.h"
#include "memory/guest_memory.h"

namespace vbsim
{

InflateQueue::InitRule InflateQueue::init_rule() const
{
	// A driver should take one of the two; a device given both keeps the stricter rule.
	if (negotiated(VB_F_DEVICE_INIT_ON_INFLATE))
		return InitRule::kZeroOnly;
	if (negotiated(VB_F_X_INIT_ON_INFLATE))
		return InitRule::kZeroOrPoisonByte;
	return InitRule::kNone;
}

bool InflateQueue::wants_poison_value() const
{
	return init_rule() != InitRule::kNone && negotiated(VB_F_PAGE_POISON);
}

void InflateQueue::receive(DeviceQueue& queue, const DescriptorChain& chain, uint32_t poison_val)
{
	const auto start = std::chrono::steady_clock::now();
	const bool chunked = negotiated(VB_F_X_CHUNKED);
	const InitRule rule = init_rule();
	const uint32_t poison = negotiated(VB_F_PAGE_POISON) ? poison_val : 0;
	const DescriptorChain* request = &chain;

	// DEVICE_INIT_ON_INFLATE (bit 7) as mst's device does it: with a non-zero poison_val
	// the bitmap is not used at all (not even cleared) and the used length is 0; a chain
	// without a writable buffer is an inflate without a bitmap. With chunks (bit 20) the
	// proposal's 5.5.6.x.3 binds instead: an inflate without its bitmap is refused whole
	// (BAL-DEV-XCH-10), and a non-zero poison_val only keeps every bit clear, the bitmap
	// still cleared and used with length ceil(n/8) (BAL-DEV-XCH-11, BAL-DEV-XCH-12).
	const bool mst_declines = !chunked || (!rules::chunked_inflate_without_bitmap_refused() &&
					       chain.writable.empty());
	const bool zero_only_declined =
		rule == InitRule::kZeroOnly && mst_declines &&
		((poison != 0 && rules::bit7_poison_leaves_bitmap_unused()) ||
		 chain.writable.empty());
	const bool wants_bitmap = rule != InitRule::kNone && !zero_only_declined;
	if (zero_only_declined && !chain.writable.empty()) {
		payload_ = chain;
		payload_.writable.clear();
		payload_.writable_bytes = 0;
		request = &payload_;
	}

	// With either bit the chain ends in the bitmap the device fills in; the rest is the
	// request proper.
	if (wants_bitmap) {
		if (chain.writable.size() != 1) {
			counters_.reject(BalloonRejection::kBitmapMissing);
			queue.push_used(chain.head, 0);
			return;
		}
		payload_ = chain;
		payload_.writable.clear();
		payload_.writable_bytes = 0;
		request = &payload_;
	}
	uint64_t units;
	if (chunked) {
		if (const auto reason = read_chunk_request(*request, chunks_)) {
			counters_.reject(*reason);
			queue.push_used(chain.head, 0);
			return;
		}
		units = chunks_.size();
	} else {
		if (!reader_.read(*request)) {
			queue.push_used(chain.head, 0);
			return;
		}
		units = reader_.pfns().size();
	}
	if (wants_bitmap && chain.writable[0].len < (units + 7) / 8 &&
	    (!chunked || rules::chunked_inflate_with_short_bitmap_refused())) {
		counters_.reject(BalloonRejection::kBitmapMissing);
		queue.push_used(chain.head, 0);
		return;
	}
	counters_.inflate_requests.fetch_add(1);

	const uint64_t discard_before = counters_.discard_ns.load();
	const bool discards_done = take_and_discard();
	const uint32_t written =
		wants_bitmap ? report_initialised(chain.writable[0], rule, discards_done, poison)
			     : 0;
	const uint64_t total_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
					  std::chrono::steady_clock::now() - start)
					  .count();
	counters_.translate_ns.fetch_add(total_ns - (counters_.discard_ns.load() - discard_before));
	queue.push_used(chain.head, written);
}

bool InflateQueue::take_and_discard()
{
	// "The device MAY modify the contents of a page in the balloon after detecting its
	// physical number in an inflate request" (5.5.6.1): the page is the host's from here.
	discard_runs_.clear();
	auto take = [&](uint64_t pfn) {
		if (!ownership_.take(pfn)) {
			counters_.reject(BalloonRejection::kPfnAlreadyHostOwned);
			return;
		}
		counters_.wire_pages_inflated.fetch_add(1);
		if (huge_pages_)
			huge_pages_->ballooned(pfn, discard_runs_);
	};
	if (negotiated(VB_F_X_CHUNKED) && !huge_pages_) {
		// Whole chunks change hands a bitmap word at a time.
		uint64_t requested = 0, taken = 0;
		for (const PfnRun& chunk : chunks_) {
			requested += chunk.wire_pages;
			taken += ownership_.take_run(chunk.first_pfn, chunk.wire_pages);
		}
		counters_.wire_pages_inflated.fetch_add(taken);
		if (requested != taken)
			counters_.reject(BalloonRejection::kPfnAlreadyHostOwned, requested - taken);
	} else if (negotiated(VB_F_X_CHUNKED)) {
		for (const PfnRun& chunk : chunks_)
			for (uint64_t pfn = chunk.first_pfn;
			     pfn < chunk.first_pfn + chunk.wire_pages; pfn++)
				take(pfn);
	} else {
		for (const uint64_t pfn : reader_.valid_pfns())
			take(pfn);
	}

	const auto start = std::chrono::steady_clock::now();
	bool done;
	if (huge_pages_) {
		// Only host pages that are now wholly ballooned go; the rest wait for their last
		// 4 KiB page (splitting a huge page for one 4 KiB page costs more than it frees).
		done = discard_runs_.empty() || discarder_.discard_runs(discard_runs_);
	} else if (negotiated(VB_F_X_CHUNKED)) {
		discard_runs_ = chunks_;
		done = discarder_.discard_runs(discard_runs_);
	} else {
		// A page inflated twice is discarded again: the guest may have dirtied it in
		// between, and the host wants the memory back either way.
		done = discarder_.discard(reader_.valid_pfns());
	}
	counters_.discard_ns.fetch_add(std::chrono::duration_cast<std::chrono::nanoseconds>(
					       std::chrono::steady_clock::now() - start)
					       .count());
	return done;
}

uint32_t InflateQueue::report_initialised(const ChainBuffer& bitmap, InitRule rule,
					  bool discards_done, uint32_t poison)
{
	const bool chunked = negotiated(VB_F_X_CHUNKED);
	const std::vector<uint32_t>& pfns = reader_.pfns();
	const uint64_t units = chunked ? chunks_.size() : pfns.size();
	const uint32_t bytes = static_cast<uint32_t>((units + 7) / 8);
	bitmap_.assign(bytes, 0);
	if (chunked && !rules::range_bitmap_cleared())
		(void)memory_.read(bitmap.phys_addr, bitmap_.data(), bytes);

	// Discarded private anonymous memory reads back as zero. The one difference between
	// the two bits is a non-zero poison_val: under VB_F_X_INIT_ON_INFLATE this device
	// writes it when it is one repeated byte (and promises nothing otherwise); under
	// DEVICE_INIT_ON_INFLATE it never gets here (receive() declines the bitmap).
	const uint8_t poison_byte = static_cast<uint8_t>(poison);
	const bool poison_writable =
		rule == InitRule::kZeroOrPoisonByte && poison == 0x01010101u * poison_byte;
	const bool can_initialise = (discards_done || !rules::bits_set_only_after_discard()) &&
				    (poison == 0 || poison_writable);
	// Above 4 KiB host pages a page reads zero only once its whole host page is ballooned
	// (and so discarded).
	auto page_initialised = [&](uint64_t pfn) {
		return pfn_inside_ram(pfn, memory_.size()) &&
		       (!huge_pages_ || huge_pages_->complete(pfn) ||
			!rules::partial_host_page_bits_clear());
	};
	auto initialise = [&](uint64_t pfn, uint64_t count) {
		if (poison_byte)
			(void)memory_.fill(pfn * GuestMemory::kWirePageBytes, poison_byte,
					   count * GuestMemory::kWirePageBytes);
	};
	uint64_t reported = 0;
	uint64_t pages_before = 0; // of the units before this one
	for (uint64_t unit = 0; can_initialise && unit < units; unit++) {
		uint64_t first = chunked ? chunks_[unit].first_pfn : pfns[unit];
		uint64_t count = chunked ? chunks_[unit].wire_pages : 1;
		// With chunks bit i is chunk i (a mutant numbers the bits by 4 KiB page instead).
		const uint64_t bit = rules::range_bits_numbered_by_range() ? unit : pages_before;
		pages_before += count;
		bool all = true;
		for (uint64_t pfn = first; pfn < first + count && all; pfn++)
			all = page_initialised(pfn);
		if (!all || bit / 8 >= bytes)
			continue;
		initialise(first, count);
		bitmap_[bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
		reported += count;
	}
	if (!memory_.write(bitmap.phys_addr, bitmap_.data(), bytes))
		throw std::logic_error("InflateQueue: validated bitmap outside RAM");
	counters_.wire_pages_reported_initialised.fetch_add(reported);
	// The used length is the bitmap's ceil(n / 8) bytes, whatever bits are set.
	if (chunked && !rules::range_used_length_is_ceil_n_over_8())
		return 1;
	return rules::used_length_is_bitmap_length() ? bytes : 0;
}

} // namespace vbsim
