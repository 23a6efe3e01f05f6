// SPDX-License-Identifier: GPL-2.0
//
// The free page hinter (VIRTIO_BALLOON_F_FREE_PAGE_HINT): while the host migrates the guest,
// tell it which blocks are free so it can skip sending them. The device asks with a command
// id in config space; the driver echoes the id on free_page_vq, hands over free blocks of
// the largest order as in-buffers, and closes the round with STOP. The blocks stay with the
// driver (on the OS's hint list) until the device writes DONE, or until the OS's shrinker
// wants them back earlier. The blocks taken between two kicks go to the device as one
// descriptor chain (hint_chain_packer.h says why).
//
// Nothing here takes the balloon lock: a round may sleep on free_page_vq for as long as the
// device is slow, and inflate, deflate and the OOM notifier must not wait behind it.
#ifndef VBALLOON_CORE_FREE_PAGE_HINTER_H
#define VBALLOON_CORE_FREE_PAGE_HINTER_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/core_log.h"
#include "vballoon/core/counters.h"
#include "vballoon/core/features.h"
#include "vballoon/core/hint_chain_packer.h"
#include "vballoon/core/os_interface.h"
#include "vballoon/support/atomic.h"
#include "vballoon/support/freestanding.h"
#include "vballoon/support/invariant.h"
#include "vballoon/support/mutant.h"

namespace vb {

// Own state, own queue (free_page_vq), no balloon lock. The worker (one caller at a time)
// alone touches the plain fields; the config-change callback and the shrinker only the
// atomic ones.
template <BalloonOs Os> class FreePageHinter {
public:
	// Smaller blocks a round takes once the largest run out: down to this many orders
	// below the largest (order 4, 64 KiB, under 4 MiB blocks), and only while the guest
	// keeps 1/kHintReserveShare of its memory free besides.
	static constexpr unsigned kHintOrdersBelowLargest = 6;
	static constexpr uint64_t kHintReserveShare = 64;

	// `chain_blocks` must outlive the hinter.
	FreePageHinter(Os& os, uint64_t negotiated_features, const GuestTraits& traits,
		       BalloonCounters& counters, HintChainPacker::Blocks& chain_blocks)
	    : os_(os), features_(negotiated_features), traits_(traits),
	      wire_pages_per_page_(1u << (traits.page_shift - VB_PFN_SHIFT)), counters_(counters),
	      chain_(chain_blocks)
	{
	}

	FreePageHinter(const FreePageHinter&) = delete;
	FreePageHinter& operator=(const FreePageHinter&) = delete;

	// After DRIVER_OK (and on restore): hinting may run again.
	void start() { hint_stop_requested_.test_and_clear(); }
	// From the OS's config-change callback, in any context (never sleeps, takes no lock):
	// free_page_hint_cmd_id may have changed. True when the OS should queue its hint work
	// item (which then calls handle_free_page_hint()).
	bool hint_config_changed();
	// The hint work item. Reads the command id; on a new id runs a round (the id on
	// free_page_vq, then free blocks of the largest order as in-buffers until the OS has none
	// or the id changes, then STOP) and repeats while the id keeps changing; on DONE gives
	// every hinted block back. Sleeps on free_page_vq, never holds the balloon lock, so
	// inflate and deflate go on beside it. One caller at a time (a work item).
	void handle_free_page_hint();
	// The shrinker. Pages (guest pages) held as hints right now.
	uint64_t hint_held_pages() const { return hint_held_pages_.get(); }
	// Gives at least max_pages (rounded up to whole blocks) back to the guest, or all it
	// holds; returns the guest pages freed. Any thread, also while a round runs (which goes
	// on). A guest that keeps a pattern in free pages gets it written (free_page_run()).
	uint64_t hint_release(uint64_t max_pages);
	// Remove or freeze is coming: a running round ends at its next block (or wait), and
	// no new one starts, until hint_device_reset(). Any thread; the OS then waits for its
	// hint work item to finish.
	void hint_stop() { hint_stop_requested_.set(); }
	// hint_stop() was called and neither hint_device_reset() nor start() has run since. An
	// OS whose wait on free_page_vq may already be sleeping when the stop comes ends that
	// wait when it sees this. Any thread.
	bool hint_stopping() const { return hint_stop_requested_.get(); }
	// The device was reset or is going away, and the OS has stopped its hint work item:
	// the buffers on free_page_vq are gone, and every held block goes back to the guest.
	void hint_device_reset();

private:
	bool negotiated() const { return has_feature(features_, VB_F_FREE_PAGE_HINT); }
	uint32_t read_hint_cmd_id();
	void run_hint_round(uint32_t cmd_id);
	bool hint_add(const Segment* out, const Segment* in, void* token);
	bool hint_take_block(uint64_t pfn, uint64_t block_pages);
	void hint_flush_chain();
	void hint_kick();
	void hint_count_used(void* token);
	void hint_reap_used();
	bool hint_wait_used();
	uint64_t hint_give_back(uint64_t max_pages, bool after_done);
	unsigned hint_order() const;
	// What a round may take from the guest's free memory: any block, and blocks smaller
	// than the largest order.
	struct HintBudget {
		uint64_t any_pages;
		uint64_t small_pages;
	};
	HintBudget hint_budget();

	Os& os_;
	const uint64_t features_;
	const GuestTraits traits_;
	const uint32_t wire_pages_per_page_;
	BalloonCounters& counters_;
	// The two id buffers are read by the device, so they live here.
	uint32_t hint_id_buffer_ = VB_CMD_ID_STOP;   // the round's id, sent once
	uint32_t hint_stop_buffer_ = VB_CMD_ID_STOP; // STOP, closing a round
	uint8_t hint_block_token_ = 0;               // the token of every hinted block
	uint32_t hint_cmd_id_active_ = VB_CMD_ID_STOP; // id of the last round we ran
	uint32_t hint_cmd_id_seen_ = VB_CMD_ID_STOP;   // what config said when last read
	// Blocks and id buffers on free_page_vq, or gathered for its next chain: a block takes
	// at most one descriptor, however its chain is merged.
	uint32_t hint_in_flight_ = 0;
	bool hint_id_in_flight_ = false;
	HintChainPacker chain_;
	// free_page_vq refused a chain (the device broke: surprise removal): it takes nothing
	// and returns nothing more until the reset, so the round stops.
	bool hint_chain_refused_ = false;
	Flag hint_config_dirty_;
	Flag hint_done_seen_; // DONE read and not yet followed by a new round
	Flag hint_stop_requested_; // hint_stop(): remove or freeze waits for the round
	Counter hint_held_pages_;
};

template <BalloonOs Os> bool FreePageHinter<Os>::hint_config_changed()
{
	if (!negotiated())
		return false;
	hint_config_dirty_.set();
	return true;
}

// Config space is read only after a config change was announced: in a real guest every
// read is a trap to the host, and a round asks before every block.
template <BalloonOs Os> uint32_t FreePageHinter<Os>::read_hint_cmd_id()
{
	if (hint_config_dirty_.test_and_clear())
		hint_cmd_id_seen_ = os_.config_read32(VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET);
	return hint_cmd_id_seen_;
}

template <BalloonOs Os> unsigned FreePageHinter<Os>::hint_order() const
{
	// A block is one descriptor, whose length is 32 bits.
	return min(traits_.max_alloc_order, 31u - traits_.page_shift);
}

// The guest's free memory now, less what its allocator keeps free for itself
// (free_pages_kept(): in Linux the zones' high watermarks, raised by THP's
// min_free_kbytes to ~44 MiB of a 2 GiB guest). A round that went below them would make
// the next allocation wake kswapd or stall in direct reclaim, and that reclaim's shrinker
// pass hands the held blocks straight back. Blocks smaller than the largest order also
// leave kHintReserveShare of all memory. An OS that does not say how much is free gets
// largest-order blocks only, as many as its allocator gives.
template <BalloonOs Os> typename FreePageHinter<Os>::HintBudget FreePageHinter<Os>::hint_budget()
{
	MemoryStats stats{};

	os_.memory_stats(&stats);
	const uint32_t needed = (1u << VB_S_MEMFREE) | (1u << VB_S_MEMTOT);
	if ((stats.present_mask & needed) != needed)
		return {~0ull, 0};
	const uint64_t free_pages = stats.value[VB_S_MEMFREE] >> traits_.page_shift;
	const uint64_t kept = os_.free_pages_kept();
	const uint64_t reserve = (stats.value[VB_S_MEMTOT] >> traits_.page_shift) / kHintReserveShare;
	const uint64_t any = free_pages > kept ? free_pages - kept : 0;
	return {any, any > reserve ? any - reserve : 0};
}

template <BalloonOs Os> void FreePageHinter<Os>::handle_free_page_hint()
{
	if (!negotiated())
		return;
	// The OS calls this because config changed; read it even if the flag was consumed.
	hint_config_dirty_.set();
	for (;;) {
		if (hint_stop_requested_.get())
			return;
		uint32_t cmd_id = read_hint_cmd_id();

		if (cmd_id == VB_CMD_ID_DONE) {
			// The host no longer needs the hints: everything comes back as it is.
			hint_done_seen_.set();
			hint_cmd_id_active_ = VB_CMD_ID_DONE;
			hint_give_back(~0ull, true);
			return;
		}
		if (cmd_id == VB_CMD_ID_STOP) {
			// Earlier ids are void; the hinted blocks stay held until DONE. After STOP the
			// device may issue any id again, even the last one.
			hint_cmd_id_active_ = VB_CMD_ID_STOP;
			return;
		}
		if (cmd_id == hint_cmd_id_active_ && !VB_MUTANT(FPH05_CURRENT_ID_SENT_AGAIN)) {
			// Already answered: the spec forbids sending the current id twice.
			counters_.hint_ids_ignored.add(1);
			return;
		}
		run_hint_round(cmd_id);
		if (read_hint_cmd_id() == cmd_id)
			return;
		// The id changed during the round (a new id, STOP or DONE): handle it now.
	}
}

// A buffer the device returned. Used buffers need nothing more: the blocks stay on the hint
// list, the id buffers are ours. A chain gives back every block it carried.
template <BalloonOs Os> void FreePageHinter<Os>::hint_count_used(void* token)
{
	uint32_t blocks = 1;

	if (token == &hint_id_buffer_) {
		hint_id_in_flight_ = false;
	} else if (token != &hint_block_token_ && token != &hint_stop_buffer_) {
		blocks = chain_.take_used(token);
		if (!blocks) {
			counters_.foreign_used_buffers.add(1);
			return;
		}
	}
	hint_in_flight_ -= min(blocks, hint_in_flight_);
}

// Collects what the device returned.
template <BalloonOs Os> void FreePageHinter<Os>::hint_reap_used()
{
	uint32_t len;

	while (void* token = os_.queue_get_used(QueueKind::kFreePage, &len))
		hint_count_used(token);
}

// Sleeps until the device returns one buffer. False when it never will (device gone, a chain
// refused) or remove or freeze wants the round over.
template <BalloonOs Os> bool FreePageHinter<Os>::hint_wait_used()
{
	uint32_t len;
	void* token = hint_chain_refused_ || hint_stop_requested_.get()
			      ? nullptr
			      : os_.queue_wait_used(QueueKind::kFreePage, &len);

	if (!token) {
		counters_.queue_failures.add(1);
		return false;
	}
	hint_count_used(token);
	return true;
}

// Puts the blocks gathered since the last kick on the ring: one chain, or one buffer per
// block when every chain slot is taken (or there is a single block). Before any kick and
// before any other buffer, so the device sees the blocks in the round they belong to.
template <BalloonOs Os> void FreePageHinter<Os>::hint_flush_chain()
{
	const uint32_t blocks = chain_.pending_count();
	uint32_t refused = 0;

	if (!blocks)
		return;
	const uint32_t segments = chain_.merge();
	void* chain = blocks > 1 ? chain_.claim_chain(blocks) : nullptr;
	if (chain) {
		// The round counted one descriptor per block, so the chain fits even without an
		// indirect table.
		if (!os_.queue_add(QueueKind::kFreePage, nullptr, 0, chain_.merged(), segments,
				   chain)) {
			chain_.release_chain(chain);
			refused = blocks;
		}
	} else {
		for (uint32_t i = 0; i < blocks && !refused; i++) {
			if (!os_.queue_add(QueueKind::kFreePage, nullptr, 0, &chain_.pending()[i],
					   1, &hint_block_token_))
				refused = blocks - i;
		}
	}
	chain_.clear_pending();
	if (!refused)
		return;
	// The round kept room for every block, so the device broke (surprise removal) or the
	// OS ran out of memory: the round stops (every later add and wait fails) and the
	// blocks, never seen by the device, stay on the hint list until the reset gives them
	// back.
	if (!hint_chain_refused_)
		log_to(os_, LogLevel::kWarning,
		       "free_page_vq refused %u hint blocks: hinting stops until the device is "
		       "reset\n",
		       refused);
	hint_chain_refused_ = true;
}

template <BalloonOs Os> void FreePageHinter<Os>::hint_kick()
{
	hint_flush_chain();
	os_.queue_kick(QueueKind::kFreePage);
}

// A hinted block joins the chain being gathered. False when the device will never take it.
template <BalloonOs Os> bool FreePageHinter<Os>::hint_take_block(uint64_t pfn, uint64_t block_pages)
{
	// Asked before each block, since gathering a chain never touches the queue: a broken
	// device ends the round at once instead of after every free block of the guest.
	if (hint_chain_refused_ || os_.queue_broken(QueueKind::kFreePage))
		return false;
	if (chain_.full()) {
		hint_flush_chain();
		if (hint_chain_refused_)
			return false;
	}
	chain_.add({pfn << traits_.page_shift,
		    static_cast<uint32_t>(block_pages << traits_.page_shift)});
	hint_in_flight_++;
	return true;
}

// Adds one buffer, waiting for the device to make room when the ring is full. False when
// the device will never make room.
template <BalloonOs Os> bool FreePageHinter<Os>::hint_add(const Segment* out, const Segment* in, void* token)
{
	for (;;) {
		// Anything else (an id, STOP) goes behind the blocks gathered before it.
		hint_flush_chain();
		if (!hint_chain_refused_ &&
		    os_.queue_add(QueueKind::kFreePage, out, out ? 1 : 0, in, in ? 1 : 0, token)) {
			hint_in_flight_++;
			return true;
		}
		hint_kick();
		if (hint_stop_requested_.get() || !hint_in_flight_ || !hint_wait_used()) {
			counters_.queue_failures.add(1);
			return false;
		}
	}
}

template <BalloonOs Os> void FreePageHinter<Os>::run_hint_round(uint32_t cmd_id)
{
	unsigned order = hint_order();
	const unsigned smallest_order = order > kHintOrdersBelowLargest ? order - kHintOrdersBelowLargest : 0;
	const uint32_t ring = os_.queue_size(QueueKind::kFreePage);
	// Blocks of the largest order while there are any, as Linux's virtio_balloon takes;
	// then smaller ones (the host takes a hint of any length), down to smallest_order and
	// only while the guest keeps a reserve of its free memory (kHintReserveShare of all of
	// it) beside what its allocator keeps free (hint_budget()), so a round never drains
	// the guest.
	HintBudget budget = hint_budget();

	hint_reap_used();
	// The id buffer may be reused only once the device has returned it: otherwise the
	// last round's descriptor would read as this round's id, a second buffer with it.
	while (hint_id_in_flight_) {
		hint_kick();
		if (!hint_wait_used())
			return;
	}
	hint_id_buffer_ = VB_MUTANT(FPH04_ROUND_STARTS_WITH_ANOTHER_ID) ? cmd_id + 1 : cmd_id;
	Segment id_out = {os_.phys_addr(&hint_id_buffer_),
			  uint32_t{sizeof(hint_id_buffer_)} + (VB_MUTANT(FPH03_ID_BUFFER_NOT_4_BYTES) ? 4u : 0u)};
	if (!hint_add(&id_out, nullptr, &hint_id_buffer_))
		return;
	hint_id_in_flight_ = true;
	// No kick yet: the id, every block that fits in the ring and the STOP go to the device
	// together, with one kick. The host hears of the round only when it can take it all in
	// one pass; QEMU polls free_page_vq from the moment it sees the id until the STOP, and
	// on a loaded host that polling thread competes for the CPU with the vCPU that is
	// still allocating, while the migration's first pass over RAM goes on. Measured in
	// tests/guest/test_free_pages.py: a kick per block (Linux) or per 16 blocks let QEMU
	// send most of the free memory in about half of the runs.
	hint_cmd_id_active_ = cmd_id;
	hint_done_seen_.test_and_clear();
	counters_.hint_rounds.add(1);

	for (;;) {
		if (read_hint_cmd_id() != cmd_id)
			break; // STOP, DONE or a newer id: this round is over
		if (hint_stop_requested_.get())
			break; // remove or freeze: close the round now
		hint_reap_used();
		// One slot always stays free for the STOP that closes the round.
		if (hint_in_flight_ + 1 >= ring) {
			// The ring is full: this batch goes now, the rest follows as room comes.
			hint_kick();
			if (!hint_wait_used())
				return; // device gone: the held blocks come back through hint_device_reset()
			continue;
		}
		const uint64_t block_pages = 1ull << order;
		const bool small = order < hint_order();
		uint64_t pfn;
		if (block_pages > (small ? budget.small_pages : budget.any_pages) ||
		    !os_.alloc_pages(order, PageUse::kHintBlock, Reclaim::kNone, &pfn)) {
			// No free block of this order left (or none the budget allows): smaller.
			if (order == smallest_order || budget.small_pages < (1ull << smallest_order))
				break;
			order--;
			continue;
		}
		// Every block comes out of the free memory the budget was measured on.
		budget.any_pages = budget.any_pages > block_pages ? budget.any_pages - block_pages : 0;
		budget.small_pages = budget.small_pages > block_pages ? budget.small_pages - block_pages : 0;
		PageRun block = {pfn, block_pages, kPageRunWholeBlock};
		if (!hint_take_block(pfn, block_pages)) {
			// The device broke: give the block back untouched. A broken device returns
			// nothing, and the round ends here, at its first failure.
			os_.free_page_run(block);
			counters_.queue_failures.add(1);
			hint_kick();
			if (!hint_in_flight_ || !hint_wait_used())
				return;
			continue;
		}
		// Counted before it is visible on the list, so a racing shrinker never makes
		// the count go below zero.
		hint_held_pages_.add(block_pages);
		os_.hint_list_insert(block);
		counters_.hint_blocks.add(1);
		counters_.hint_wire_pages.add(block_pages * wire_pages_per_page_);
	}

	Segment stop_out = {os_.phys_addr(&hint_stop_buffer_), sizeof(hint_stop_buffer_)};
	hint_stop_buffer_ = VB_CMD_ID_STOP;
	if (!VB_MUTANT(FPH08_ROUND_NOT_CLOSED_WITH_STOP))
		hint_add(&stop_out, nullptr, &hint_stop_buffer_);
	hint_kick();
}

// Gives held blocks back to the guest, after DONE or before it (the shrinker, a reset).
// Before DONE the spec wants a hinted page the guest reuses written first (the host may
// have skipped it, and a write dirties it again); after DONE its content is undefined.
// Either way only a guest that keeps a pattern in free pages has anything to write, and
// free_page_run() writes exactly that (in Linux the allocator's poisoning or init_on_free,
// on the free itself). A guest that keeps none writes nothing: its next user of the page
// writes it before reading, as Linux's virtio_balloon relies on. So no 4 MiB pattern per
// block, re-dirtying memory in the middle of a migration, for Debian's default guest.
template <BalloonOs Os> uint64_t FreePageHinter<Os>::hint_give_back(uint64_t max_pages, bool after_done)
{
	constexpr size_t kBatch = 16;
	PageRun runs[kBatch];
	uint64_t freed = 0;

	while (freed < max_pages) {
		size_t count = os_.hint_list_take(runs, kBatch, max_pages - freed);
		if (!count)
			break;
		for (size_t i = 0; i < count; i++) {
			PageRun run = runs[i];
			// Never marked initialised: the OS writes the guest's pattern, if it keeps one.
			if (!after_done)
				run.flags = VB_MUTANT(FPH11_EARLY_RETURN_NOT_INITIALISED) ? kPageRunDeviceInitialised : 0;
			else
				run.flags = VB_MUTANT(FPH10_HINTED_CONTENT_TRUSTED_AFTER_DONE) ? kPageRunDeviceInitialised : 0;
			// hint_list_take() hands back each block as it was inserted.
			run.flags |= kPageRunWholeBlock;
			// Counted when hinted, before it reached the list: never more given back
			// than held, whichever thread (worker or shrinker) takes it.
			VB_INVARIANT(hint_held_pages_.get() >= run.count);
			os_.free_page_run(run);
			freed += run.count;
			if (after_done)
				counters_.hint_wire_pages_returned.add(run.count *
								       wire_pages_per_page_);
			else
				counters_.hint_wire_pages_released_early.add(run.count *
									     wire_pages_per_page_);
			// Held until it is back and counted: whoever sees nothing held sees every
			// block freed and in the counters.
			hint_held_pages_.sub(run.count);
		}
	}
	return freed;
}

template <BalloonOs Os> uint64_t FreePageHinter<Os>::hint_release(uint64_t max_pages)
{
	if (!negotiated())
		return 0;
	return hint_give_back(max_pages, hint_done_seen_.get());
}

template <BalloonOs Os> void FreePageHinter<Os>::hint_device_reset()
{
	if (!negotiated())
		return;
	// The rings were reset: no buffer is in flight any more.
	hint_stop_requested_.test_and_clear();
	hint_in_flight_ = 0;
	hint_id_in_flight_ = false;
	chain_.reset();
	hint_chain_refused_ = false;
	hint_cmd_id_active_ = VB_CMD_ID_STOP;
	hint_cmd_id_seen_ = VB_CMD_ID_STOP;
	hint_give_back(~0ull, hint_done_seen_.get());
}

} // namespace vb

#endif
