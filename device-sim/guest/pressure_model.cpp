// SPDX-License-Identifier: GPL-2.0
#include "pressure_model.h"

#include <algorithm>

namespace vbsim
{

PressureModel::PressureModel(BuddyAllocator& allocator, uint64_t min_free_pages,
			     PageAllocated allocated, OomNotifier oom)
    : allocator_(allocator), min_free_pages_(min_free_pages), allocated_(std::move(allocated)),
      oom_(std::move(oom))
{
}

bool PressureModel::start(const WorkloadOptions& options)
{
	std::lock_guard lock(mutex_);
	options_ = options;
	const uint64_t ids = options.file_pages + options.cold_cache_pages;
	pfn_of_.assign(ids, kNotResident);
	lru_pos_.assign(ids, lru_.end());
	referenced_.assign(ids, false);
	for (uint64_t i = 0; i < options.anon_pages; i++) {
		auto pfn = allocator_.allocate(0);
		if (!pfn)
			return false;
		if (allocated_)
			allocated_(*pfn);
		anon_.push_back(*pfn);
	}
	// The cold cache first, so it is the oldest on the LRU.
	for (uint64_t i = 0; i < options.cold_cache_pages; i++)
		if (!allocate_cache_page_locked(static_cast<uint32_t>(options.file_pages + i),
						false))
			return false;
	for (uint64_t i = 0; i < options.file_pages; i++)
		if (!allocate_cache_page_locked(static_cast<uint32_t>(i), false))
			return false;
	return true;
}

bool PressureModel::low_locked(unsigned order) const
{
	return allocator_.counts().free < min_free_pages_ + (1ull << order);
}

uint64_t PressureModel::reclaim_pass_locked()
{
	alloc_stalls_++;
	uint64_t evicted = 0;
	uint64_t scanned = 0;
	// Every page once, and the batch again: a whole LRU of referenced pages is cleared in
	// one sweep and then evicted from.
	const uint64_t scan_limit = lru_.size() + kReclaimBatch;
	while (evicted < kReclaimBatch && !lru_.empty() && scanned < scan_limit) {
		const uint32_t id = lru_.back();
		scanned++;
		if (referenced_[id]) {
			referenced_[id] = false;
			lru_.splice(lru_.begin(), lru_, lru_pos_[id]);
			continue;
		}
		lru_.pop_back();
		lru_pos_[id] = lru_.end();
		allocator_.free_run(pfn_of_[id], 1);
		pfn_of_[id] = kNotResident;
		if (id < options_.file_pages)
			resident_file_--;
		evicted++;
	}
	direct_scans_ += scanned;
	reclaim_stolen_ += evicted;
	return evicted;
}

bool PressureModel::allocate_cache_page_locked(uint32_t id, bool workload)
{
	for (;;) {
		if (!workload || !low_locked(0)) {
			if (auto pfn = allocator_.allocate(0)) {
				if (allocated_)
					allocated_(*pfn);
				pfn_of_[id] = *pfn;
				referenced_[id] = workload; // read back because it was touched
				lru_.push_front(id);
				lru_pos_[id] = lru_.begin();
				if (id < options_.file_pages)
					resident_file_++;
				return true;
			}
			if (!workload)
				return false;
		}
		if (reclaim_pass_locked() != 0)
			continue;
		// Nothing left to evict: the OOM notifier (deflate-on-OOM), then the OOM killer,
		// which here only means the page is not read back this tick.
		if (oom_ && oom_() != 0)
			continue;
		oom_kills_++;
		return false;
	}
}

WorkloadTick PressureModel::tick()
{
	std::lock_guard lock(mutex_);
	WorkloadTick tick;
	const uint64_t stalls_before = alloc_stalls_;
	tick.touched = anon_.size() + options_.file_pages;
	for (uint32_t id = 0; id < options_.file_pages; id++) {
		if (pfn_of_[id] != kNotResident) {
			lru_.splice(lru_.begin(), lru_, lru_pos_[id]);
			referenced_[id] = true;
			continue;
		}
		refaults_++;
		major_faults_++;
		tick.refaults++;
		if (!allocate_cache_page_locked(id, true))
			tick.oom = true;
	}
	now_ms_ += 1000;
	tick.alloc_stalls = alloc_stalls_ - stalls_before;
	const uint64_t cost = tick.refaults * options_.refault_cost;
	const uint64_t work = cost >= tick.touched ? 0 : tick.touched - cost;
	tick.throughput_permille = tick.touched ? work * 1000 / tick.touched : 1000;
	return tick;
}

bool PressureModel::reclaim_for(unsigned order)
{
	std::lock_guard lock(mutex_);
	if (!low_locked(order))
		return true;
	reclaim_pass_locked();
	return !low_locked(order);
}

void PressureModel::sample(vb::PressureSample* sample)
{
	std::lock_guard lock(mutex_);
	sample->now_ms = now_ms_;
	sample->alloc_stalls = alloc_stalls_;
	sample->direct_scans = direct_scans_;
	// Only direct reclaim here: the model has no kswapd.
	sample->reclaim_scanned = direct_scans_;
	sample->reclaim_stolen = reclaim_stolen_;
	sample->refaults = refaults_;
	sample->major_faults = major_faults_;
	sample->oom_kills = oom_kills_;
	sample->file_pages = lru_.size();
	sample->file_lru_pages = lru_.size();
	sample->mapped_file_pages = options_.mapped_file ? resident_file_ : 0;
	sample->available_pages = allocator_.counts().free + lru_.size();
}

uint64_t PressureModel::cache_pages() const
{
	std::lock_guard lock(mutex_);
	return lru_.size();
}

uint64_t PressureModel::resident_file_pages() const
{
	std::lock_guard lock(mutex_);
	return resident_file_;
}

uint64_t PressureModel::now_ms() const
{
	std::lock_guard lock(mutex_);
	return now_ms_;
}

} // namespace vbsim
