// SPDX-License-Identifier: GPL-2.0
#include "migration/workload.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "buddy_allocator.h"
#include "memory/guest_memory.h"
#include "migration/dirty_log.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
// The generator writes whole simulated guest pages.
static_assert(VBW_PAGE_BYTES == kPage);

class AllocatorUserMemory : public GuestUserMemory
{
public:
	AllocatorUserMemory(GuestMemory& ram, BuddyAllocator& allocator) : ram_(ram), allocator_(allocator) {}
	GuestMemory& ram() override { return ram_; }

	std::vector<PfnRun> allocate(uint64_t pages) override
	{
		std::vector<PfnRun> runs;
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

	void shuffle_free_memory(uint64_t seed) override { allocator_.shuffle_free_lists(seed); }
	void order_free_memory_top_first() override { allocator_.order_free_lists_top_first(); }

	void free(const std::vector<PfnRun>& runs) override
	{
		for (const PfnRun& run : runs)
			if (!allocator_.free_run(run.first_pfn, run.wire_pages))
				throw std::logic_error("workload freed pages it did not hold");
	}

private:
	GuestMemory& ram_;
	BuddyAllocator& allocator_;
};

uint64_t count_pages(const std::vector<PfnRun>& runs)
{
	uint64_t pages = 0;
	for (const PfnRun& run : runs)
		pages += run.wire_pages;
	return pages;
}

// The pages a region of the generator holds, in its own page order.
struct Region {
	std::vector<PfnRun> runs;
	std::vector<uint64_t> starts; // region page index of each run's first page

	void assign(std::vector<PfnRun> got)
	{
		runs = std::move(got);
		starts.clear();
		uint64_t at = 0;
		for (const PfnRun& run : runs) {
			starts.push_back(at);
			at += run.wire_pages;
		}
	}
	void clear() { assign({}); }
};

constexpr double kWarmupStepMs = 1.0;
constexpr uint64_t kStepPages = 256;

// Runs the generator on a GuestUserMemory. The generator thread is the only one that
// touches the generator's state and the regions while the workload runs; everyone else
// reads them only while it is paused or stopped.
class GuestWorkload : public Workload
{
public:
	GuestWorkload(const WorkloadConfig& config, GuestUserMemory& memory)
		: config_(config), memory_(memory), regions_(VBW_REGION_ARENA0 + VBW_MAX_ARENAS),
		  page_(VBW_PAGE_WORDS)
	{
		char bad[256];
		if (vbw_check_params(&config.params, memory.ram().size(), bad, sizeof(bad)) != 0)
			throw std::invalid_argument(std::string("workload ") + config.name + ": " +
						    bad);
		const vbw_ops ops = {this, &GuestWorkload::allocate_cb, &GuestWorkload::write_cb,
				     &GuestWorkload::release_cb};
		state_ = std::make_unique<vbw_state>();
		vbw_init(state_.get(), &config.params, memory.ram().size(), &ops);
	}

	~GuestWorkload() override { stop(); }

	void prepare() override
	{
		if (config_.pre_5_10_free_order)
			memory_.order_free_memory_top_first();
		if (config_.shuffle_free_list)
			memory_.shuffle_free_memory(config_.params.seed);
		if (config_.booted_guest_bytes != 0) {
			booted_.assign(memory_.allocate(config_.booted_guest_bytes / kPage));
			write_region(booted_, kBootedGuestRegion, 0, count_pages(booted_.runs), 1, VBW_PATH_ANON);
		}
		if (config_.booted_guest_zero_bytes != 0)
			booted_zero_.assign(memory_.allocate(config_.booted_guest_zero_bytes / kPage));
		vbw_prepare(state_.get());
		vbw_start(state_.get(), 0);
		publish_stats();
	}

	void start() override
	{
		if (!vbw_runs_while_migrating(&config_.params) || thread_.joinable())
			return;
		// The warm-up, in workload time: the migration has not started, so nothing waits.
		for (double t = 0;; t = std::min(t + kWarmupStepMs, config_.params.warmup_ms)) {
			while (vbw_step(state_.get(), t, kStepPages) != 0) {
			}
			if (t >= config_.params.warmup_ms)
				break;
		}
		{
			// Workload time goes on from the warm-up's end, whatever clock is set.
			std::lock_guard lock(mutex_);
			workload_ms_ = config_.params.warmup_ms;
			if (clock_)
				clock_offset_ms_ = workload_ms_ - clock_();
		}
		publish_stats();
		thread_ = std::thread([this] { run_busy(); });
	}

	void pause() override
	{
		std::unique_lock lock(mutex_);
		pause_requested_++;
		publish_wanted_locked();
		changed_.notify_all();
		changed_.wait(lock, [this] { return !thread_.joinable() || stopped_ || paused_; });
	}

	void resume() override
	{
		std::lock_guard lock(mutex_);
		if (pause_requested_ > 0)
			pause_requested_--;
		publish_wanted_locked();
		changed_.notify_all();
	}

	void stop() override
	{
		{
			std::lock_guard lock(mutex_);
			stop_requested_ = true;
			publish_wanted_locked();
			changed_.notify_all();
		}
		if (thread_.joinable())
			thread_.join();
	}

	void set_clock(std::function<double()> now) override
	{
		std::lock_guard lock(mutex_);
		// Workload time goes on from where it stands.
		workload_ms_ = now_ms_locked();
		clock_ = std::move(now);
		clock_offset_ms_ = clock_ ? workload_ms_ - clock_() : 0;
		changed_.notify_all();
	}

	std::vector<PfnRun> pages_in_use() const override
	{
		std::lock_guard lock(mutex_);
		std::vector<PfnRun> in_use = booted_.runs;
		in_use.insert(in_use.end(), booted_zero_.runs.begin(), booted_zero_.runs.end());
		auto add = [&](uint32_t region) {
			const Region& r = regions_[region];
			in_use.insert(in_use.end(), r.runs.begin(), r.runs.end());
		};
		add(VBW_REGION_WORKING_SET);
		add(VBW_REGION_HOT);
		add(VBW_REGION_CACHE);
		for (uint32_t slot = 0; slot < VBW_MAX_ARENAS; slot++)
			if (vbw_arena_live(state_.get(), slot))
				add(VBW_REGION_ARENA0 + slot);
		return in_use;
	}

	WorkloadStats stats() const override
	{
		std::lock_guard lock(mutex_);
		return stats_;
	}

private:
	static uint64_t allocate_cb(void* ctx, uint32_t region, uint64_t pages)
	{
		auto* self = static_cast<GuestWorkload*>(ctx);
		std::vector<PfnRun> got = self->memory_.allocate(pages);
		const uint64_t n = count_pages(got);
		std::lock_guard lock(self->mutex_);
		self->regions_[region].assign(std::move(got));
		return n;
	}

	static void release_cb(void* ctx, uint32_t region)
	{
		auto* self = static_cast<GuestWorkload*>(ctx);
		std::vector<PfnRun> runs;
		{
			std::lock_guard lock(self->mutex_);
			runs = std::move(self->regions_[region].runs);
			self->regions_[region].clear();
		}
		self->memory_.free(runs);
	}

	static void write_cb(void* ctx, uint32_t region, uint64_t first, uint64_t count, uint64_t stamp,
			     vbw_path path)
	{
		static_cast<GuestWorkload*>(ctx)->write(region, first, count, stamp, path);
	}

	// Anonymous memory marks through one DirtyMarker per call (one atomic OR per 64
	// neighbouring pages); page cache through GuestMemory's own range marking. The dirty
	// log is attached and detached only while the workload is paused between calls.
	void write(uint32_t region, uint64_t first, uint64_t count, uint64_t stamp, vbw_path path)
	{
		write_region(regions_[region], region, first, count, stamp, path);
	}

	void write_region(const Region& r, uint32_t region, uint64_t first, uint64_t count, uint64_t stamp,
			  vbw_path path)
	{
		GuestMemory& ram = memory_.ram();
		DirtyMarker marker(ram.dirty_log());
		size_t run = size_t(std::upper_bound(r.starts.begin(), r.starts.end(), first) - r.starts.begin()) - 1;
		for (uint64_t i = first; i < first + count; i++) {
			while (run + 1 < r.runs.size() && r.starts[run + 1] <= i)
				run++;
			if (run >= r.runs.size() || i - r.starts[run] >= r.runs[run].wire_pages)
				throw std::logic_error("workload wrote past its region");
			const uint64_t page = r.runs[run].first_pfn + (i - r.starts[run]);
			vbw_fill_page(page_.data(), region, i, stamp);
			const bool ok = path == VBW_PATH_CACHE ? ram.write(page * kPage, page_.data(), kPage)
							       : ram.write(page * kPage, page_.data(), kPage, marker);
			if (!ok)
				throw std::logic_error("workload page outside guest RAM");
		}
	}

	void publish_stats()
	{
		std::lock_guard lock(mutex_);
		stats_.pages_written = state_->stats.pages_written;
		stats_.pages_freed = state_->stats.pages_freed;
		stats_.allocations = state_->stats.allocations;
	}

	double now_ms_locked() const { return clock_ ? clock_() + clock_offset_ms_ : workload_ms_; }

	// busy: whatever is owed at the clock's time, in steps; before parking for a pause,
	// everything owed at that moment (writes go on until the pause).
	void run_busy()
	{
		std::unique_lock lock(mutex_);
		for (;;) {
			if (stop_requested_)
				break;
			const double now = now_ms_locked();
			lock.unlock();
			const uint64_t written = vbw_step(state_.get(), now, kStepPages);
			lock.lock();
			stats_.pages_written = state_->stats.pages_written;
			stats_.pages_freed = state_->stats.pages_freed;
			stats_.allocations = state_->stats.allocations;
			if (written != 0)
				continue;
			if (pause_requested_ > 0) {
				paused_ = true;
				changed_.notify_all();
				changed_.wait(lock, [this] { return stop_requested_ || pause_requested_ == 0; });
				paused_ = false;
				continue;
			}
			// Up to date with the clock: wait a little (pacing, not synchronisation).
			if (config_.vcpu_stays_on_cpu) {
				lock.unlock();
				stay_on_cpu(std::chrono::microseconds(200));
				lock.lock();
			} else {
				changed_.wait_for(lock, std::chrono::microseconds(200));
			}
		}
		stopped_ = true;
		changed_.notify_all();
	}

	// wanted_ mirrors the requests, which are under mutex_, for stay_on_cpu()'s lock-free look.
	void publish_wanted_locked()
	{
		wanted_.store(pause_requested_ > 0 || stop_requested_, std::memory_order_release);
	}

	// A running vCPU between two steps of the guest's work: runnable (yielding to whatever
	// else wants this CPU) rather than asleep, until the time is up or someone wants the
	// workload to pause or stop.
	void stay_on_cpu(std::chrono::microseconds how_long)
	{
		const auto until = std::chrono::steady_clock::now() + how_long;
		while (!wanted_.load(std::memory_order_acquire) &&
		       std::chrono::steady_clock::now() < until)
			std::this_thread::yield();
	}

	const WorkloadConfig config_;
	GuestUserMemory& memory_;
	std::unique_ptr<vbw_state> state_;
	static constexpr uint32_t kBootedGuestRegion = 0xffff; // not one of the generator's
	std::vector<Region> regions_;
	Region booted_;
	Region booted_zero_; // held, never written
	std::vector<uint64_t> page_;
	WorkloadStats stats_;

	mutable std::mutex mutex_;
	std::condition_variable changed_;
	std::function<double()> clock_;
	double clock_offset_ms_ = 0;
	double workload_ms_ = 0;
	unsigned pause_requested_ = 0;
	// A pause or stop is requested (publish_wanted_locked()): a vCPU staying on its CPU sees
	// it at once.
	std::atomic<bool> wanted_{false};
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

vbw_kind preset_of(WorkloadKind kind)
{
	switch (kind) {
	case WorkloadKind::kFresh:
		return VBW_FRESH;
	case WorkloadKind::kFreed:
		return VBW_FREED;
	case WorkloadKind::kBusy:
		return VBW_BUSY;
	}
	return VBW_FRESH;
}

namespace
{

void clamp_to_pages(uint64_t& bytes, uint64_t most)
{
	bytes = std::min(bytes, most / kPage * kPage);
}

// The booted guest's own memory, as every workload here runs on it.
void add_booted_guest(WorkloadConfig& config, uint64_t ram_bytes)
{
	config.booted_guest_bytes = kBootedTestGuestBytes;
	clamp_to_pages(config.booted_guest_bytes, ram_bytes / 16);
	config.booted_guest_zero_bytes = kBootedTestGuestZeroBytes;
	clamp_to_pages(config.booted_guest_zero_bytes, ram_bytes / 64);
}

} // namespace

WorkloadConfig workload_for_ram(WorkloadKind kind, uint64_t ram_bytes)
{
	WorkloadConfig config;
	config.name = workload_name(kind);
	config.params = vbw_preset(preset_of(kind));
	// A compile keeps its vCPUs on the host's CPUs, as the calibration guest's vCPU thread
	// is kept on one by its emulated writes (docs/migration-model.md, "Workloads", and the
	// calibration "the busy guest's vCPU on a host CPU").
	config.vcpu_stays_on_cpu = vbw_runs_while_migrating(&config.params) != 0;
	vbw_params& p = config.params;
	add_booted_guest(config, ram_bytes);
	clamp_to_pages(p.working_set_bytes, ram_bytes / 8);
	const uint64_t busy = p.hot_bytes + p.cache_bytes + p.live_bytes;
	if (busy > ram_bytes / 4) {
		const double scale = double(ram_bytes / 4) / double(busy);
		clamp_to_pages(p.hot_bytes, uint64_t(double(p.hot_bytes) * scale));
		clamp_to_pages(p.cache_bytes, uint64_t(double(p.cache_bytes) * scale));
		clamp_to_pages(p.live_bytes, uint64_t(double(p.live_bytes) * scale));
		clamp_to_pages(p.arena_bytes, p.live_bytes);
	}
	return config;
}

WorkloadConfig described_workload(const std::string& name, const vbw_params& params,
				  uint64_t ram_bytes)
{
	WorkloadConfig config;
	config.name = name;
	config.params = params;
	config.vcpu_stays_on_cpu = vbw_runs_while_migrating(&params) != 0;
	add_booted_guest(config, ram_bytes);
	return config;
}

std::unique_ptr<Workload> make_workload(const WorkloadConfig& config, GuestUserMemory& memory)
{
	return std::make_unique<GuestWorkload>(config, memory);
}

} // namespace vbsim::migration
