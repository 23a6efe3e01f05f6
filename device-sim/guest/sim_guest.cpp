// SPDX-License-Identifier: GPL-2.0
#include "sim_guest.h"

#include <poll.h>
#include <time.h>

#include <algorithm>
#include <new>
#include <sstream>
#include <stdexcept>

#include "transport/thread_cpu.h"
#include "vballoon/core/features.h"
#include "vballoon/support/mutant.h"

namespace vbsim {

namespace {

// The simulated guest's pages are 4 KiB: one guest page is one wire page.
constexpr uint64_t kPageBytes = GuestMemory::kWirePageBytes;
// Nothing of the kernel area below 64 KiB is used, so guest-physical 0 never names a buffer.
constexpr uint64_t kKernelAreaStart = 64 * 1024;
constexpr uint16_t kIndirectTableEntries = 64;
constexpr uint64_t kDeviceSpecificBits = (1ull << 24) - 1;

uint64_t align_up(uint64_t value, uint64_t align)
{
	return (value + align - 1) / align * align;
}

// This thread's CPU time: what guest work cost, without the time it waited for the device.
uint64_t thread_cpu_ns()
{
	timespec now{};
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
	return static_cast<uint64_t>(now.tv_sec) * 1000000000u + static_cast<uint64_t>(now.tv_nsec);
}

} // namespace

SimGuest::SimGuest(GuestMemory& memory, Transport& transport, SimGuestOptions options)
	: memory_(memory), transport_(transport), options_(options)
{
	if (options.kernel_bytes % (4ull << 20) != 0 || options.kernel_bytes >= memory.size())
		throw std::invalid_argument("the kernel area must be a multiple of 4 MiB, smaller than RAM");
	uint64_t first_pfn = options.kernel_bytes / kPageBytes;
	allocator_ = std::make_unique<BuddyAllocator>(first_pfn, memory.size() / kPageBytes - first_pfn);
	os_ = std::make_unique<SimOs>(memory, transport, *allocator_, options.free_policy, options.verbose);
	os_->set_min_free_pages(options.min_free_pages);
	kernel_next_ = kKernelAreaStart;
	if (options.workload) {
		pressure_model_ = std::make_unique<PressureModel>(
			*allocator_, options.min_free_pages,
			[this](uint64_t pfn) {
				os_->check_reuse(pfn, 1);
				os_->forget_host_zeroed({pfn, 1});
			},
			[this]() -> uint64_t {
				oom_notifications_++;
				return core_ ? core_->deflate_for_oom() : 0;
			});
		if (!pressure_model_->start(*options.workload))
			throw std::invalid_argument("the workload does not fit in guest RAM");
		os_->set_pressure_model(pressure_model_.get());
	}
}

uint64_t linux_min_free_pages(uint64_t ram_bytes)
{
	const uint64_t kib = ram_bytes >> 10;
	uint64_t sqrt_rule = 0; // int_sqrt(lowmem_kbytes * 16), kB
	while ((sqrt_rule + 1) * (sqrt_rule + 1) <= kib * 16)
		sqrt_rule++;
	sqrt_rule = std::clamp<uint64_t>(sqrt_rule, 128, 262144);
	// Zones with memory: DMA and DMA32, and Normal once RAM goes past 4 GiB.
	const uint64_t zones = ram_bytes > (4ull << 30) ? 3 : 2;
	const uint64_t pageblock_kib = 2048;
	uint64_t thp_rule = pageblock_kib * zones * 2 + pageblock_kib * zones * 3 * 3;
	thp_rule = std::min(thp_rule, kib / 20);
	return std::max(sqrt_rule, thp_rule) / 4;
}

SimGuest::~SimGuest()
{
	remove();
}

uint64_t SimGuest::kernel_alloc(uint64_t bytes, uint64_t align)
{
	uint64_t at = align_up(kernel_next_, align);
	if (at + bytes > options_.kernel_bytes)
		throw std::length_error("the simulated kernel area is full");
	kernel_next_ = at + bytes;
	return at;
}

std::string SimGuest::probe()
{
	transport_.set_status(0);
	transport_.set_status(VB_STATUS_ACKNOWLEDGE);
	transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER);

	uint64_t offered = transport_.device_features();
	if (!(offered & VB_FEATURE(VB_F_VERSION_1))) {
		transport_.set_status(transport_.status() | VB_STATUS_FAILED);
		return "the device is legacy-only (no VERSION_1)";
	}
	vb::GuestTraits traits;
	traits.freed_pages_need_pattern = options_.free_policy.initialise;
	traits.free_page_pattern = 0x01010101u * options_.free_policy.byte;
	traits.max_alloc_order = BuddyAllocator::kMaxOrder;
	traits.initialise_before_inflate = options_.zero_on_inflate && options_.free_policy.initialise;
	traits.runs_free_page_hinting = options_.free_page_hinting;
	traits.runs_page_reporting = options_.page_reporting;
	traits.runs_pressure_governor = options_.pressure_governor;
	traits.accept_device_init = options_.device_init;
	uint64_t ring_features = VB_FEATURE(VB_F_VERSION_1);
	if (options_.event_idx)
		ring_features |= offered & VB_FEATURE(VB_F_RING_EVENT_IDX);
	if (options_.indirect_descriptors)
		ring_features |= offered & VB_FEATURE(VB_F_RING_INDIRECT_DESC);
	uint64_t device_bits = vb::accept_features(offered & kDeviceSpecificBits, traits) & ~options_.refused_features;
	uint64_t features = device_bits | ring_features;

	if (!transport_.set_driver_features(features))
		return "the transport refused the driver's features";
	transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER | VB_STATUS_FEATURES_OK);
	if (!(transport_.status() & VB_STATUS_FEATURES_OK)) {
		transport_.set_status(transport_.status() | VB_STATUS_FAILED);
		return "the device refused FEATURES_OK";
	}
	negotiated_features_ = features;
	bool indirect = features & VB_FEATURE(VB_F_RING_INDIRECT_DESC);

	for (int kind = 0; kind < VB_QUEUE_KIND_COUNT; kind++) {
		int index = vb_queue_index(features, static_cast<vb_queue_kind>(kind));
		if (index < 0)
			continue;
		uint16_t size = transport_.queue_max_size(static_cast<unsigned>(index));
		if (size == 0)
			return "the device has no queue " + std::to_string(index);
		DriverRing::Config config;
		config.size = size;
		config.areas = contiguous_queue_areas(
			kernel_alloc(vb_vring_total_bytes(size, VB_VRING_USED_ALIGN), kPageBytes),
			size);
		config.event_idx = features & VB_FEATURE(VB_F_RING_EVENT_IDX);
		config.indirect_desc = indirect;
		if (indirect) {
			config.indirect_table_entries = kIndirectTableEntries;
			config.indirect_area_gpa =
				kernel_alloc(DriverRing::indirect_area_bytes(size, kIndirectTableEntries), 16);
		}
		auto ring = std::make_unique<DriverRing>(memory_, config);
		QueueSetupError error = transport_.setup_queue(static_cast<unsigned>(index), size, config.areas);
		if (error != QueueSetupError::kNone)
			return "the device refused queue " + std::to_string(index);
		os_->set_ring(static_cast<vb::QueueKind>(kind), static_cast<unsigned>(index), std::move(ring));
	}

	uint64_t core_gpa = kernel_alloc(sizeof(Core), alignof(Core));
	void* core_memory = memory_.translate(core_gpa, sizeof(Core));
	workspace_ = std::make_unique<Core::Workspace>();
	core_ = new (core_memory) Core(*os_, device_bits, traits, *workspace_);
	core_->set_max_chunk_order(options_.max_chunk_order);
	core_->set_pressure_policy(options_.pressure_policy);
	if (!core_->prepare()) {
		core_->~Core();
		core_ = nullptr;
		transport_.set_status(transport_.status() | VB_STATUS_FAILED);
		return "the driver could not prime its queues";
	}
	transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER | VB_STATUS_FEATURES_OK |
			      VB_STATUS_DRIVER_OK);
	core_->start();
	worker_ = std::thread([this] { worker(); });
	if (negotiated_features_ & VB_FEATURE(VB_F_FREE_PAGE_HINT))
		hint_worker_ = std::thread([this] { hint_worker(); });
	if (negotiated_features_ & VB_FEATURE(VB_F_PAGE_REPORTING)) {
		// Reports begin only after DRIVER_OK (the spec lets the driver report from then on).
		allocator_->set_report_notifier(options_.report_order, [this] { request_report(); });
		reporting_held_.store(options_.hold_reporting, std::memory_order_release);
		report_worker_ = std::thread([this] { report_worker(); });
		request_report(); // memory free at boot is reportable too
	}
	return "";
}

void SimGuest::remove()
{
	if (!core_)
		return;
	stop_.signal();
	if (worker_.joinable())
		worker_.join();
	// A round or a report in progress finishes first (Linux's cancel_work_sync()).
	if (hint_worker_.joinable())
		hint_worker_.join();
	if (report_worker_.joinable())
		report_worker_.join();
	allocator_->set_report_notifier(BuddyAllocator::kMaxOrder + 1, nullptr);
	// Like Linux's remove: give back every page the device acknowledges while it still
	// listens, then reset it; whatever it did not acknowledge comes back after the reset.
	if (transport_.status() & VB_STATUS_DRIVER_OK && !(transport_.status() & VB_STATUS_NEEDS_RESET))
		core_->release_all();
	os_->abort_waits();
	transport_.set_status(0);
	core_->release_after_reset();
	// Hinted blocks come back too, once the device has forgotten them.
	core_->hint_device_reset();
	core_->~Core();
	core_ = nullptr;
}

bool SimGuest::run_worker_on_cpu(unsigned cpu)
{
	return worker_.joinable() && pin_thread_to_cpu(worker_, cpu);
}

uint64_t SimGuest::take_config_interrupts()
{
	// Marked running before the interrupt is consumed: wait_until_settled() must never see
	// an interrupt gone from the eventfd that no pass has handled yet.
	{
		std::lock_guard lock(state_mutex_);
		pass_running_ = true;
	}
	// The config-change callback's part of hinting: note it, queue the work item.
	if (transport_.take_config_changes() != 0 && core_->hint_config_changed())
		hint_work_.signal();
	// Read after the drain: the transport counts an interrupt before it signals, so an
	// interrupt this does not count is still pending on the eventfd and gets a pass of its own.
	return transport_.counters().config_interrupts.load();
}

void SimGuest::adjust_pass(std::optional<uint64_t> config_interrupts_taken)
{
	uint32_t generation = transport_.config_generation();
	{
		std::lock_guard lock(state_mutex_);
		pass_running_ = true;
	}
	vb::StepResult result;
	do {
		result = core_->adjust_towards_target();
		struct pollfd stop = {stop_.fd(), POLLIN, 0};
		if (poll(&stop, 1, 0) > 0)
			break;
	} while (result == vb::StepResult::kMoreWork);
	{
		std::lock_guard lock(state_mutex_);
		handled_generation_ = generation;
		if (config_interrupts_taken)
			handled_config_interrupts_ = *config_interrupts_taken;
		last_result_ = result;
		pass_running_ = false;
		adjust_passes_++;
	}
	state_changed_.notify_all();
}

SimGuest::Second SimGuest::run_second()
{
	Second second;
	if (!pressure_model_)
		throw std::logic_error("run_second() needs a workload");
	second.workload = pressure_model_->tick();
	if (!core_)
		return second;
	bool adjust = false;
	{
		std::shared_lock running(vcpu_);
		if (options_.pressure_policy.enabled)
			second.resumed = core_->pressure_tick();
	}
	uint64_t passes;
	{
		std::lock_guard lock(state_mutex_);
		second.retried = !pass_running_ && last_result_ == vb::StepResult::kStalled;
		adjust = second.resumed || second.retried;
		passes = adjust_passes_;
	}
	if (adjust) {
		adjust_.signal();
		std::unique_lock lock(state_mutex_);
		if (!state_changed_.wait_for(lock, std::chrono::seconds(60),
					     [&] { return adjust_passes_ > passes; }))
			throw std::runtime_error("the driver did not run its adjust pass");
	}
	second.balloon_wire_pages = core_->balloon_wire_pages();
	return second;
}

void SimGuest::worker()
{
	int stats_fd = os_->call_fd(vb::QueueKind::kStats);
	{
		std::shared_lock running(vcpu_);
		// A target set before the driver bound counts too.
		adjust_pass(take_config_interrupts());
	}
	for (;;) {
		struct pollfd fds[5] = {{stop_.fd(), POLLIN, 0},
					{transport_.config_change_fd(), POLLIN, 0},
					{retry_.fd(), POLLIN, 0},
					{adjust_.fd(), POLLIN, 0},
					{stats_fd, POLLIN, 0}};
		if (poll(fds, stats_fd >= 0 ? 5 : 4, -1) < 0)
			continue;
		if (fds[0].revents & POLLIN)
			return;
		std::shared_lock running(vcpu_);
		if (stats_fd >= 0 && fds[4].revents & POLLIN) {
			uint64_t drained;
			if (read(stats_fd, &drained, sizeof(drained)) < 0) {
				// Already drained; the used ring is what counts.
			}
			core_->handle_stats_request();
			state_changed_.notify_all();
		}
		bool config_changed = fds[1].revents & POLLIN;
		bool retry = fds[2].revents & POLLIN;
		std::optional<uint64_t> config_interrupts_taken;
		if (config_changed)
			config_interrupts_taken = take_config_interrupts();
		if (retry)
			retry_.drain();
		const bool asked = fds[3].revents & POLLIN;
		if (asked)
			adjust_.drain();
		if (config_changed || asked || (retry && last_result_ == vb::StepResult::kStalled))
			adjust_pass(config_interrupts_taken);
	}
}

void SimGuest::note_progress()
{
	{
		std::lock_guard lock(state_mutex_);
	}
	state_changed_.notify_all();
}

void SimGuest::hint_worker()
{
	for (;;) {
		struct pollfd fds[2] = {{stop_.fd(), POLLIN, 0}, {hint_work_.fd(), POLLIN, 0}};
		if (poll(fds, 2, -1) < 0)
			continue;
		if (fds[0].revents & POLLIN)
			return;
		if (fds[1].revents & POLLIN) {
			hint_work_.drain();
			std::shared_lock running(vcpu_);
			const uint64_t start = thread_cpu_ns();
			core_->handle_free_page_hint();
			free_page_cpu_ns_ += thread_cpu_ns() - start;
			note_progress();
		}
	}
}

void SimGuest::report_worker()
{
	for (;;) {
		struct pollfd fds[2] = {{stop_.fd(), POLLIN, 0}, {report_request_.fd(), POLLIN, 0}};
		if (poll(fds, 2, -1) < 0)
			continue;
		if (fds[0].revents & POLLIN)
			return;
		if (!(fds[1].revents & POLLIN))
			continue;
		// A delayed pass, as Linux's: more blocks get freed meanwhile and go in one pass.
		struct pollfd stop = {stop_.fd(), POLLIN, 0};
		if (poll(&stop, 1, static_cast<int>(options_.report_delay.count())) > 0)
			return;
		while (reporting_held_.load(std::memory_order_acquire)) {
			struct pollfd held[2] = {{stop_.fd(), POLLIN, 0},
						 {report_release_.fd(), POLLIN, 0}};
			if (poll(held, 2, -1) < 0)
				continue;
			if (held[0].revents & POLLIN)
				return;
		}
		// Every request counted before the drain is answered by this pass; one counted
		// after it has signalled again and gets a pass of its own.
		const uint64_t requests = report_requests_.load();
		report_request_.drain();
		bool more;
		{
			std::shared_lock running(vcpu_);
			const uint64_t start = thread_cpu_ns();
			more = report_pass();
			free_page_cpu_ns_ += thread_cpu_ns() - start;
		}
		report_passes_++;
		if (more)
			request_report();
		report_requests_answered_ = requests;
		note_progress();
	}
}

void SimGuest::release_reporting()
{
	reporting_held_.store(false, std::memory_order_release);
	report_release_.signal();
}

void SimGuest::request_report()
{
	report_requests_++;
	report_request_.signal();
}

bool SimGuest::reporting_idle() const
{
	return report_requests_answered_.load() == report_requests_.load() && allocator_->isolated_pages() == 0;
}

bool SimGuest::report_pass()
{
	constexpr size_t kBatch = Core::kReportRunsMax;
	constexpr uint64_t kBudgetShare = 16; // at most 1/16 of a free list per pass
	bool more = false;

	for (unsigned order = options_.report_order; order <= BuddyAllocator::kMaxOrder; order++) {
		uint64_t batches = std::max<uint64_t>(
			1, (allocator_->free_blocks(order) + kBatch * kBudgetShare - 1) / (kBatch * kBudgetShare));
		for (; batches > 0; batches--) {
			uint64_t pfns[kBatch];
			size_t count = allocator_->isolate_unreported(order, pfns, kBatch);
			if (!count)
				break;
			// As Linux before it reports a batch: the blocks behind it come first.
			allocator_->rotate_unreported_to_front(order);
			vb::PageRun runs[kBatch];
			for (size_t i = 0; i < count; i++)
				runs[i] = {pfns[i], 1ull << order};
			// Only an acknowledged report marks the blocks; either way they go back.
			// Blocks the host zeroed (DEVICE_INIT_REPORTED) are known zero until used.
			bool device_initialised = false;
			bool acked = core_->report_free_pages(runs, count, &device_initialised);
			if (VB_MUTANT(DI_DRV07_REPORT_MARKED_WITHOUT_PROMISE))
				device_initialised = true;
			for (size_t i = 0; acked && device_initialised && i < count; i++)
				os_->mark_host_zeroed(runs[i]);
			// Last taken first, each to the head: the batch keeps its order there, as
			// Linux's drain of a scatterlist it filled from the end does.
			for (size_t i = count; i-- > 0;) {
				if (!allocator_->put_back_isolated(pfns[i], order, acked))
					throw std::logic_error("an isolated block could not go back");
			}
			if (!acked)
				return false; // the device is gone or broken: no more passes
		}
		// Linux's pass ends rotating the first block it did not report to the head, so
		// that allocations until the next pass take unreported memory first.
		allocator_->rotate_unreported_to_front(order);
		if (allocator_->unreported_free_blocks(order) > 0)
			more = true;
	}
	return more;
}

void SimGuest::pause()
{
	vcpu_.lock();
}

void SimGuest::resume()
{
	vcpu_.unlock();
}

uint64_t SimGuest::shrink_free_page_hints(uint64_t pages)
{
	return core_ ? core_->hint_release(pages) : 0;
}

bool SimGuest::wait_for(const std::function<bool()>& condition, std::chrono::milliseconds timeout)
{
	std::unique_lock lock(state_mutex_);
	return state_changed_.wait_for(lock, timeout, condition);
}

std::optional<vb::StepResult> SimGuest::wait_until_settled(std::chrono::milliseconds timeout)
{
	std::unique_lock lock(state_mutex_);
	bool done = state_changed_.wait_for(lock, timeout, [this] {
		// A config interrupt without a config change (DEVICE_NEEDS_RESET) wakes a pass too.
		return !pass_running_ && handled_generation_ == transport_.config_generation() &&
		       handled_config_interrupts_ == transport_.counters().config_interrupts.load();
	});
	if (!done)
		return std::nullopt;
	return last_result_;
}

bool SimGuest::wait_for_stats_reports(uint64_t count, std::chrono::milliseconds timeout)
{
	std::unique_lock lock(state_mutex_);
	return state_changed_.wait_for(lock, timeout,
				       [&] { return core_ && core_->counters().stats_reports.get() >= count; });
}

UserMemory SimGuest::allocate_user_memory(uint64_t pages, std::optional<uint8_t> fill_byte)
{
	UserMemory user;
	unsigned order = BuddyAllocator::kMaxOrder;

	while (user.pages < pages) {
		uint64_t left = pages - user.pages;
		while (order > 0 && (1ull << order) > left)
			order--;
		auto block = allocator_->allocate(order);
		if (!block) {
			if (order > 0) {
				order--;
				continue;
			}
			// Memory pressure: the shrinkers run first (free page hints held by the driver
			// are the cheapest memory to get back), then the OOM notifier chain.
			constexpr uint64_t kShrinkBatch = 128; // Linux's SHRINK_BATCH
			if (core_ && core_->hint_held_pages() > 0 && core_->hint_release(kShrinkBatch) > 0) {
				order = BuddyAllocator::kMaxOrder;
				continue;
			}
			oom_notifications_++;
			if (core_ && core_->deflate_for_oom() > 0) {
				order = BuddyAllocator::kMaxOrder;
				continue;
			}
			user.oom_killed = true;
			break;
		}
		vb::PageRun run = {*block, 1ull << order};
		os_->check_reuse(run.first_pfn, run.count);
		if (options_.zero_on_alloc)
			os_->zero_allocated(run);
		else
			os_->forget_host_zeroed(run);
		if (fill_byte && !memory_.fill(run.first_pfn * kPageBytes, *fill_byte, run.count * kPageBytes))
			throw std::logic_error("user memory outside guest RAM");
		os_->count_minor_faults(run.count);
		user.runs.push_back(run);
		user.pages += run.count;
	}
	user_pages_ += user.pages;
	return user;
}

void SimGuest::free_user_memory(UserMemory& user)
{
	for (const vb::PageRun& run : user.runs) {
		// init_on_free or page poisoning: freed memory holds the guest's pattern.
		if (options_.free_policy.initialise && !VB_MUTANT(FPR03_FREED_PAGES_NOT_POISONED) &&
		    !memory_.fill(run.first_pfn * kPageBytes, options_.free_policy.byte, run.count * kPageBytes))
			throw std::logic_error("user memory outside guest RAM");
		if (!allocator_->free_run(run.first_pfn, run.count))
			throw std::logic_error("user memory freed twice");
	}
	user_pages_ -= user.pages;
	user.runs.clear();
	user.pages = 0;
	retry_.signal();
}

bool SimGuest::migrate_balloon_page(uint64_t pfn)
{
	auto target = allocator_->allocate(0);
	if (!target || !core_)
		return false;
	os_->forget_host_zeroed({*target, 1});
	if (!core_->migrate_page(pfn, *target)) {
		allocator_->free_run(*target, 1);
		return false;
	}
	// The old page left the balloon; compaction hands it back to the allocator.
	return allocator_->free_run(pfn, 1);
}

std::string SimGuest::check_accounting() const
{
	std::ostringstream problems;
	problems << allocator_->check_consistency();
	BuddyAllocator::Counts counts = allocator_->counts();
	// On the list, or held off it since the host did not acknowledge their deflate.
	uint64_t listed = os_->ballooned_pages();
	if (counts.balloon != listed)
		problems << "allocator holds " << counts.balloon << " balloon pages, the lists " << listed << "\n";
	if (core_ && core_->balloon_wire_pages() != listed)
		problems << "driver counts " << core_->balloon_wire_pages() << " balloon pages, the lists " << listed
			 << "\n";
	if (core_ && core_->hint_held_pages() != os_->hint_list_pages())
		problems << "driver counts " << core_->hint_held_pages() << " hinted pages, the hint list "
			 << os_->hint_list_pages() << "\n";
	if (counts.used < user_pages_)
		problems << "fewer used pages (" << counts.used << ") than user memory (" << user_pages_ << ")\n";
	return problems.str();
}

} // namespace vbsim
