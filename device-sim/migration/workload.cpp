// SPDX-License-Identifier: GPL-2.0
#include "migration/workload.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <random>
#include <stdexcept>
#include <thread>

#include "buddy_allocator.h"
#include "memory/guest_memory.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kPageBytes;

class AllocatorUserMemory : public GuestUserMemory
{
public:
	AllocatorUserMemory(GuestMemory& ram, BuddyAllocator& allocator) : ram_(ram), allocator_(allocator) {}
	GuestMemory& ram() override { return ram_; }

	std::vector<PageRange> allocate(uint64_t pages) override
	{
		std::vector<PageRange> runs;
		unsigned order = BuddyAllocator::kMaxOrder;
		uint64_t got = 0;
		while (got < pages) {
			while (order > 0 && (uint64_t{1} << order) > pages - got)
				order--;
			auto block = allocator_.allocate(order);
			if (!block) {
				if (order == 0)
					break;
				order--;
				continue;
			}
			runs.push_back({*block, uint64_t{1} << order});
			got += uint64_t{1} << order;
		}
		return runs;
	}

	void free(const std::vector<PageRange>& runs) override
	{
		for (const PageRange& run : runs)
			if (!allocator_.free_run(run.first_page, run.pages))
				throw std::logic_error("workload freed pages it did not hold");
	}

private:
	GuestMemory& ram_;
	BuddyAllocator& allocator_;
};

// Writes every page of the runs whole, with contents unique to the page and the write: a
// stale copy at the destination always differs.
class PageWriter
{
public:
	explicit PageWriter(GuestMemory& ram) : ram_(ram), buffer_(kPage / 8) {}

	// One batch of marks per call (one atomic OR per 64 neighbouring pages): the dirty log
	// is attached and detached only while the workload is paused between calls.
	uint64_t write(const std::vector<PageRange>& runs)
	{
		DirtyMarker marker(ram_.dirty_log());
		uint64_t pages = 0;
		for (const PageRange& run : runs)
			for (uint64_t page = run.first_page; page < run.first_page + run.pages; page++) {
				const uint64_t stamp = (++generation_ << 24) ^ (page * 0x9e3779b97f4a7c15ull);
				for (size_t i = 0; i < buffer_.size(); i++)
					buffer_[i] = stamp + i * 0x100000001b3ull;
				if (!ram_.write(page * kPage, buffer_.data(), kPage, marker))
					throw std::logic_error("workload page outside guest RAM");
				pages++;
			}
		return pages;
	}

private:
	GuestMemory& ram_;
	std::vector<uint64_t> buffer_;
	uint64_t generation_ = 0;
};

uint64_t count_pages(const std::vector<PageRange>& runs)
{
	uint64_t pages = 0;
	for (const PageRange& run : runs)
		pages += run.pages;
	return pages;
}

class GuestWorkload : public Workload
{
public:
	GuestWorkload(const WorkloadConfig& config, GuestUserMemory& memory)
		: config_(config), memory_(memory), writer_(memory.ram()), random_(config.seed)
	{
		if (config.freed_fraction < 0 || config.freed_fraction > 1)
			throw std::invalid_argument("workload: freed fraction must be within 0..1");
		if (config.kind == WorkloadKind::kBusy &&
		    (config.busy_allocation_bytes < kPage || config.busy_bytes_per_second <= 0))
			throw std::invalid_argument("workload: busy needs an allocation of at least a page and a rate");
	}

	~GuestWorkload() override { stop(); }

	void prepare() override
	{
		working_set_ = memory_.allocate(config_.working_set_bytes / kPage);
		stats_.pages_written += writer_.write(working_set_);
		stats_.allocations++;
		if (config_.kind == WorkloadKind::kFreed) {
			// Most of what is left, written and given back: free but not zero.
			const uint64_t ram_pages = memory_.ram().size() / kPage;
			const uint64_t rest = ram_pages - std::min(ram_pages, count_pages(working_set_));
			auto freed = memory_.allocate(uint64_t(double(rest) * config_.freed_fraction));
			stats_.pages_written += writer_.write(freed);
			stats_.pages_freed += count_pages(freed);
			memory_.free(freed);
		}
	}

	void start() override
	{
		if (config_.kind != WorkloadKind::kBusy || thread_.joinable())
			return;
		start_ms_ = now_ms();
		thread_ = std::thread([this] { run_busy(); });
	}

	void pause() override
	{
		std::unique_lock lock(mutex_);
		pause_requested_++;
		changed_.notify_all();
		changed_.wait(lock, [this] { return !thread_.joinable() || stopped_ || paused_; });
	}

	void resume() override
	{
		std::lock_guard lock(mutex_);
		if (pause_requested_ > 0)
			pause_requested_--;
		changed_.notify_all();
	}

	void stop() override
	{
		{
			std::lock_guard lock(mutex_);
			stop_requested_ = true;
			changed_.notify_all();
		}
		if (thread_.joinable())
			thread_.join();
	}

	void set_clock(std::function<double()> now) override
	{
		std::lock_guard lock(mutex_);
		// Keep the bytes owed continuous across a change of clock.
		const double elapsed = now_ms_locked() - start_ms_;
		clock_ = std::move(now);
		start_ms_ = now_ms_locked() - elapsed;
	}

	std::vector<PageRange> pages_in_use() const override
	{
		std::lock_guard lock(mutex_);
		std::vector<PageRange> in_use = working_set_;
		for (const auto& allocation : live_)
			in_use.insert(in_use.end(), allocation.begin(), allocation.end());
		return in_use;
	}

	WorkloadStats stats() const override
	{
		std::lock_guard lock(mutex_);
		return stats_;
	}

private:
	double now_ms_locked() const
	{
		if (clock_)
			return clock_();
		return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch())
			.count();
	}
	double now_ms() const
	{
		std::lock_guard lock(mutex_);
		return now_ms_locked();
	}

	// A compile: allocate an arena, write it, keep a bounded number alive, free the oldest
	// (or a random one), at the configured bytes per second of the current clock.
	void run_busy()
	{
		const uint64_t allocation_pages = config_.busy_allocation_bytes / kPage;
		const size_t max_live = std::max<uint64_t>(1, config_.busy_live_bytes / config_.busy_allocation_bytes);
		uint64_t bytes_done = 0;
		std::unique_lock lock(mutex_);
		for (;;) {
			if (stop_requested_)
				break;
			if (pause_requested_ > 0) {
				paused_ = true;
				changed_.notify_all();
				changed_.wait(lock, [this] { return stop_requested_ || pause_requested_ == 0; });
				paused_ = false;
				continue;
			}
			const double owed = (now_ms_locked() - start_ms_) * config_.busy_bytes_per_second / 1000.0;
			if (double(bytes_done) >= owed) {
				// Ahead of the clock: wait a little (pacing, not synchronisation).
				changed_.wait_for(lock, std::chrono::microseconds(200));
				continue;
			}
			std::vector<PageRange> freed;
			if (live_.size() >= max_live) {
				const size_t victim = random_() % live_.size();
				freed = std::move(live_[victim]);
				live_.erase(live_.begin() + long(victim));
			}
			lock.unlock();
			if (!freed.empty())
				memory_.free(freed);
			std::vector<PageRange> fresh = memory_.allocate(allocation_pages);
			const uint64_t written = writer_.write(fresh);
			lock.lock();
			stats_.pages_freed += count_pages(freed);
			stats_.pages_written += written;
			stats_.allocations++;
			bytes_done += config_.busy_allocation_bytes;
			if (!fresh.empty())
				live_.push_back(std::move(fresh));
		}
		stopped_ = true;
		changed_.notify_all();
	}

	const WorkloadConfig config_;
	GuestUserMemory& memory_;
	PageWriter writer_;
	std::mt19937_64 random_;
	std::vector<PageRange> working_set_;
	std::deque<std::vector<PageRange>> live_;
	WorkloadStats stats_;

	mutable std::mutex mutex_;
	std::condition_variable changed_;
	std::function<double()> clock_;
	double start_ms_ = 0;
	unsigned pause_requested_ = 0;
	bool paused_ = false;
	bool stop_requested_ = false;
	bool stopped_ = false;
	std::thread thread_;
};

} // namespace

std::unique_ptr<GuestUserMemory> make_allocator_user_memory(GuestMemory& ram, BuddyAllocator& allocator)
{
	return std::make_unique<AllocatorUserMemory>(ram, allocator);
}

const char* workload_name(WorkloadKind kind)
{
	switch (kind) {
	case WorkloadKind::kFresh: return "fresh";
	case WorkloadKind::kFreed: return "freed";
	case WorkloadKind::kBusy: return "busy";
	}
	return "?";
}

std::optional<WorkloadKind> parse_workload(std::string_view name)
{
	for (WorkloadKind kind : {WorkloadKind::kFresh, WorkloadKind::kFreed, WorkloadKind::kBusy})
		if (name == workload_name(kind))
			return kind;
	return std::nullopt;
}

std::unique_ptr<Workload> make_workload(const WorkloadConfig& config, GuestUserMemory& memory)
{
	return std::make_unique<GuestWorkload>(config, memory);
}

} // namespace vbsim::migration
