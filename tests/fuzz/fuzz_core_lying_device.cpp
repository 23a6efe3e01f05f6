// SPDX-License-Identifier: GPL-2.0
//
// fuzz_core_lying_device: the driver core (vb::Balloon) against a device that lies, on a
// fuzz-driven OS (lying_os.h). The input is
//   header   guest page size, memory size and place, traits, offered features, ring sizes
//   u16 n    then n bytes of operations: host target changes (num_pages anywhere,
//            0xffffffff included), adjust_towards_target, deflate_for_oom,
//            handle_stats_request, migrate_page, allocation failures, memory pressure,
//            queue-full refusals, lock contention, volatile config, release_all, the
//            pressure governor (its policy and pressure samples chosen by the input, any
//            values, and pressure_tick())
//   tape     the rest: what the device does each time the core waits (any buffer in
//            flight, in any order, with any used length and bitmap, a token it never got,
//            or nothing at all because it went away). An empty tape is an honest device.
//
// After every operation:
//   - the OS model is quiescent: no message in flight, no page in limbo, the lock free,
//     every page the device vouched for marked (lying_os.h checks each call as it happens:
//     no free before the deflate ack, at most 256 PFNs per message, ...);
//   - allocator.check_consistency() is empty, free + used + balloon == managed;
//   - the core's balloon_wire_pages() == the balloon list == the allocator's balloon pages, and
//     == wire_pages_inflated - wire_pages_deflated; `actual` matches; managed pages moved with them;
//   - a step never overshoots a stable target.
// At the end the device turns honest, the target drops to zero and release_all() runs:
// every page must be back in the allocator.
#include <memory>

#include "fuzz_input.h"
#include "lying_os.h"
#include "vballoon/core/balloon.h"
#include "vballoon/core/features.h"

namespace
{

using vbfuzz::FuzzInput;
using vbfuzz::LyingOs;
using vbfuzz::LyingOsConfig;
using Core = vb::Balloon<LyingOs>;

static_assert(vb::BalloonOs<LyingOs>);

constexpr size_t kMaxOps = 256;
constexpr unsigned kPageShifts[] = {12, 13, 14, 16};

class Harness
{
public:
	Harness(FuzzInput& ops, FuzzInput& tape, const LyingOsConfig& config)
	    : in_(ops), config_(config), os_(tape, config),
	      wire_pages_per_page_(1u << (config.traits.page_shift - VB_PFN_SHIFT)),
	      workspace_(std::make_unique<Core::Workspace>()),
	      core_(std::make_unique<Core>(os_, config.features, config.traits, *workspace_))
	{
		os_.set_core(core_.get(), sizeof(Core));
		os_.core_wire_pages = [this] { return core_->balloon_wire_pages(); };
		os_.reenter = [this](uint64_t call) {
			FUZZ_TRACE("  re-entered from allocation %llu: %s\n",
				   (unsigned long long)call,
				   call % 2 ? "migrate_page" : "deflate_for_oom");
			if (call % 2)
				migrate(false);
			else
				(void)core_->deflate_for_oom();
		};
	}

	void run()
	{
		if (!core_->prepare())
			FUZZ_CHECK(os_.gone() || config_.queue_sizes[VB_QUEUE_STATS] == 0,
				   "prepare() failed on a working statsq");
		os_.started = true;
		core_->start();
		check("start");

		for (size_t op = 0; op < kMaxOps && !in_.empty(); op++)
			step();

		// The device turns honest, the host wants everything back, the driver goes.
		os_.set_honest();
		os_.set_alloc_fail_mask(0);
		os_.set_reentry_mask(0);
		os_.contended = false;
		os_.num_pages = 0;
		FUZZ_TRACE("drain (balloon %llu PFNs)\n",
			   (unsigned long long)core_->balloon_wire_pages());
		// An honest device acknowledges every deflate, so the balloon drains; one that
		// went away cannot, and the pages wait for the reset below.
		vb::StepResult result = vb::StepResult::kMoreWork;
		for (unsigned i = 0; i < 100000 && result == vb::StepResult::kMoreWork; i++) {
			result = core_->adjust_towards_target();
			check("drain");
		}
		FUZZ_CHECK(result == vb::StepResult::kSettled || os_.gone(),
			   "an honest device, and the balloon did not drain (step result %d, %llu "
			   "PFNs left)",
			   static_cast<int>(result),
			   (unsigned long long)core_->balloon_wire_pages());
		core_->release_all();
		check("release_all");
		// Remove: the OS resets the device, and whatever the host did not acknowledge
		// giving back comes back now.
		os_.reset_device();
		core_->release_after_reset();
		check("release_after_reset");
		FUZZ_CHECK(core_->balloon_wire_pages() == 0 && os_.ballooned_pages() == 0,
			   "after release_all the core holds %llu PFNs, the lists %llu pages",
			   (unsigned long long)core_->balloon_wire_pages(),
			   (unsigned long long)os_.ballooned_pages());
		for (uint64_t pfn : harness_pages_)
			os_.harness_free(pfn);
		harness_pages_.clear();
		const vbsim::BuddyAllocator::Counts counts = os_.allocator.counts();
		FUZZ_CHECK(counts.free == counts.managed,
			   "%llu of %llu pages free after release_all",
			   (unsigned long long)counts.free, (unsigned long long)counts.managed);
		FUZZ_CHECK(os_.managed_delta == 0, "managed pages off by %lld after release_all",
			   (long long)os_.managed_delta);
	}

private:
	uint32_t pick_target()
	{
		const uint64_t all = config_.pages * wire_pages_per_page_;
		switch (in_.u8() % 8) {
		case 0:
			return 0;
		case 1:
			return UINT32_MAX;
		case 2:
			return static_cast<uint32_t>(all);
		case 3:
			return static_cast<uint32_t>(all + in_.u8());
		case 4:
			return static_cast<uint32_t>(all - in_.below(static_cast<uint32_t>(all)));
		case 5:
			return in_.u32();
		default:
			return in_.u16() % (static_cast<uint32_t>(all) + 1);
		}
	}

	uint64_t expected_target() const
	{
		const uint64_t wanted = os_.num_pages;
		return (wanted + wire_pages_per_page_ - 1) / wire_pages_per_page_ *
		       wire_pages_per_page_;
	}

	void adjust(const char* what)
	{
		const uint64_t target = expected_target();
		const uint64_t before = core_->balloon_wire_pages();
		const vb::StepResult result = core_->adjust_towards_target();
		check(what);
		if (volatile_)
			return;
		const uint64_t after = core_->balloon_wire_pages();
		FUZZ_CHECK(before > target || after <= target,
			   "inflate overshot: %llu -> %llu PFNs, target %llu",
			   (unsigned long long)before, (unsigned long long)after,
			   (unsigned long long)target);
		FUZZ_CHECK(before < target || after >= target,
			   "deflate overshot: %llu -> %llu PFNs, target %llu",
			   (unsigned long long)before, (unsigned long long)after,
			   (unsigned long long)target);
		// Settled: there already, or a deflate got there (an inflate that got there says so
		// on the next call).
		FUZZ_CHECK((result == vb::StepResult::kSettled) ==
				   (before == target || (before > target && after == target)),
			   "step %llu -> %llu PFNs towards %llu returned %d",
			   (unsigned long long)before, (unsigned long long)after,
			   (unsigned long long)target, static_cast<int>(result));
	}

	// `checked`: a migration of its own, checked as an operation (not one that re-entered
	// from inside an allocation, where the core is half-way through a step).
	void migrate(bool checked = true)
	{
		const uint64_t pages = os_.list.pages();
		if (!pages)
			return;
		// Compaction picks some ballooned page...
		uint64_t index = (checked ? in_.u16() : reentries_++ * 7919) % pages;
		uint64_t old_pfn = 0;
		for (const vb::PageRun& run : os_.list.all_runs()) {
			if (index < run.count) {
				old_pfn = run.first_pfn + index;
				break;
			}
			index -= run.count;
		}
		// ...and moves it to a free page wherever the allocator has one.
		uint64_t new_pfn;
		if (!os_.harness_alloc(0, &new_pfn))
			return;
		const uint64_t before = core_->balloon_wire_pages();
		if (core_->migrate_page(old_pfn, new_pfn)) {
			os_.take_back_migrated(old_pfn);
			os_.harness_free(old_pfn);
		} else {
			FUZZ_CHECK(os_.model(old_pfn, "not migrated").holder ==
					   vbfuzz::Holder::kBalloon,
				   "a refused migration moved the old page");
			os_.harness_free(new_pfn);
		}
		FUZZ_CHECK(core_->balloon_wire_pages() == before,
			   "migration changed the balloon size");
		if (checked)
			check("migrate_page");
	}

	// The governor's inputs, as the input likes them: the policy now and then, and a
	// sample whose clock and counters move by fuzz-chosen amounts (or jump anywhere).
	void pressure_sample()
	{
		const uint8_t how = in_.u8();
		if (how & 1) {
			vb::PressurePolicy policy;
			policy.enabled = how & 2;
			policy.give_back = how & 4;
			policy.floor_pages = how & 8 ? in_.u32() : 0;
			core_->set_pressure_policy(policy);
		}
		vb::PressureSample& p = os_.pressure;
		if (how & 16) {
			p.now_ms = in_.u64();
			p.refaults = in_.u64();
		} else {
			p.now_ms += in_.u16();
			p.refaults += in_.u16() << (in_.u8() % 16);
		}
		p.alloc_stalls += in_.u16();
		p.direct_scans += in_.u16();
		p.major_faults += in_.u16();
		p.oom_kills += in_.u8() & 1;
		p.has_stall_time = how & 32;
		p.stall_us += in_.u32();
		const uint64_t managed = os_.allocator.frame_count();
		p.total_pages = how & 64 ? in_.u64() : managed;
		p.free_pages = in_.u32() % (managed + 1);
		p.available_pages = p.free_pages + (how & 128 ? in_.u64() : in_.u16());
		os_.kept_free_pages = in_.u16();
		// Read last, so the inputs kept from before these counters mean what they meant.
		p.reclaim_scanned += uint64_t{in_.u16()} << (in_.u8() % 16);
		p.reclaim_stolen += in_.u16();
		p.file_lru_pages = in_.u32();
		p.mapped_file_pages = in_.u32();
	}

	void pressure_tick()
	{
		const uint64_t before = core_->balloon_wire_pages();
		const bool resume = core_->pressure_tick();
		check("pressure_tick");
		const uint64_t after = core_->balloon_wire_pages();
		FUZZ_CHECK(after <= before, "pressure_tick inflated: %llu -> %llu PFNs",
			   (unsigned long long)before, (unsigned long long)after);
		FUZZ_CHECK(after == before || os_.has_feature(VB_F_DEFLATE_ON_OOM),
			   "pressure_tick gave back without DEFLATE_ON_OOM: %llu -> %llu PFNs",
			   (unsigned long long)before, (unsigned long long)after);
		FUZZ_CHECK(!resume || core_->governor().enabled(),
			   "a disabled governor asked to resume");
		if (resume)
			adjust("adjust_towards_target (resumed by pressure_tick)");
	}

	void pressure()
	{
		const uint8_t how = in_.u8();
		if ((how & 3) == 3) {
			// A checkerboard: every free page taken, one in `stride` given back, so
			// free memory is single pages that never merge.
			const unsigned stride = in_.u8() % 3 + 2;
			std::vector<uint64_t> taken;
			uint64_t pfn;
			while (os_.harness_alloc(0, &pfn))
				taken.push_back(pfn);
			for (uint64_t page : taken) {
				if (page % stride == 0)
					os_.harness_free(page);
				else
					harness_pages_.push_back(page);
			}
		} else if ((how & 3) == 2 && !harness_pages_.empty()) {
			// Give some back, from anywhere in the list: fragments free memory.
			unsigned count = in_.u8() % 16 + 1;
			for (unsigned i = 0; i < count && !harness_pages_.empty(); i++) {
				size_t pick = in_.u16() % harness_pages_.size();
				os_.harness_free(harness_pages_[pick]);
				harness_pages_[pick] = harness_pages_.back();
				harness_pages_.pop_back();
			}
		} else {
			unsigned order = in_.u8() % (vbsim::BuddyAllocator::kMaxOrder + 1);
			unsigned count = in_.u8() % 8 + 1;
			for (unsigned i = 0; i < count; i++) {
				uint64_t pfn;
				if (!os_.harness_alloc(order, &pfn))
					break;
				for (uint64_t p = 0; p < (uint64_t{1} << order); p++)
					harness_pages_.push_back(pfn + p);
			}
		}
		check("memory pressure");
	}

	void step()
	{
		static const char* const kNames[] = {
			"target",    "target",	    "adjust",	       "adjust*n",     "oom",
			"stats",     "migrate",	    "alloc-failures",  "device-mood",  "pressure",
			"max-order", "release_all", "pressure-sample", "pressure-tick"};
		os_.begin_op();
		const unsigned op = in_.u8() % 14;
		FUZZ_TRACE("op %s (balloon %llu PFNs, target %u)\n", kNames[op],
			   (unsigned long long)core_->balloon_wire_pages(), os_.num_pages);
		switch (op) {
		case 0:
		case 1:
			os_.num_pages = pick_target();
			break;
		case 2:
			adjust("adjust_towards_target");
			break;
		case 3: {
			unsigned steps = in_.u8() % 16 + 1;
			for (unsigned i = 0; i < steps; i++)
				adjust("adjust_towards_target (repeated)");
			break;
		}
		case 4: {
			const uint64_t before = core_->balloon_wire_pages();
			const uint64_t freed_wire_pages = core_->deflate_for_oom();
			check("deflate_for_oom");
			FUZZ_CHECK(freed_wire_pages == before - core_->balloon_wire_pages(),
				   "OOM deflate says %llu wire pages, the balloon shrank by %llu",
				   (unsigned long long)freed_wire_pages,
				   (unsigned long long)(before - core_->balloon_wire_pages()));
			FUZZ_CHECK(freed_wire_pages % wire_pages_per_page_ == 0 &&
					   freed_wire_pages <= Core::kOomDeflateWirePages &&
					   (freed_wire_pages == 0 ||
					    os_.has_feature(VB_F_DEFLATE_ON_OOM)),
				   "OOM deflate freed %llu wire pages",
				   (unsigned long long)freed_wire_pages);
			break;
		}
		case 5:
			core_->handle_stats_request();
			check("handle_stats_request");
			break;
		case 6:
			migrate();
			break;
		case 7: {
			uint8_t how = in_.u8();
			if (how & 4)
				os_.set_reentry_mask(in_.u64());
			else
				os_.set_alloc_fail_mask(how & 1	  ? in_.u64()
							: how & 2 ? ~uint64_t{0}
								  : 0);
			break;
		}
		case 8: {
			uint8_t how = in_.u8();
			os_.set_refusals(how & 1);
			os_.contended = how & 2;
			volatile_ = how & 4;
			os_.set_volatile_config(volatile_);
			break;
		}
		case 9:
			pressure();
			break;
		case 10:
			core_->set_max_chunk_order(in_.u8() % 12);
			break;
		case 12:
			pressure_sample();
			break;
		case 13:
			pressure_tick();
			break;
		case 11:
			core_->release_all();
			check("release_all");
			if (os_.gone()) {
				// A device that went away is reset before the driver rebinds.
				os_.reset_device();
				core_->release_after_reset();
				check("release_after_reset");
			}
			break;
		}
		check("operation");
	}

	void check(const char* what)
	{
		os_.check_quiescent();
		const std::string problems = os_.allocator.check_consistency();
		FUZZ_CHECK(problems.empty(), "after %s the allocator is inconsistent:\n%s", what,
			   problems.c_str());
		const vbsim::BuddyAllocator::Counts counts = os_.allocator.counts();
		const uint64_t wire_pages = core_->balloon_wire_pages();
		FUZZ_CHECK(wire_pages == os_.ballooned_pages() * wire_pages_per_page_ &&
				   counts.balloon == os_.ballooned_pages(),
			   "after %s: core %llu wire pages, list %llu pages, allocator %llu "
			   "balloon pages",
			   what, (unsigned long long)wire_pages,
			   (unsigned long long)os_.ballooned_pages(),
			   (unsigned long long)counts.balloon);
		const vb::BalloonCounters& counters = core_->counters();
		FUZZ_CHECK(counters.wire_pages_inflated.get() -
					   counters.wire_pages_deflated.get() ==
				   wire_pages,
			   "after %s: inflated %llu - deflated %llu != %llu in the balloon", what,
			   (unsigned long long)counters.wire_pages_inflated.get(),
			   (unsigned long long)counters.wire_pages_deflated.get(),
			   (unsigned long long)wire_pages);
		FUZZ_CHECK(os_.actual == static_cast<uint32_t>(wire_pages),
			   "after %s: actual %u, balloon %llu", what, os_.actual,
			   (unsigned long long)wire_pages);
		if (!os_.has_feature(VB_F_DEFLATE_ON_OOM))
			FUZZ_CHECK(
				os_.managed_delta == -static_cast<int64_t>(os_.ballooned_pages()),
				"after %s: managed pages moved by %lld, balloon holds %llu pages",
				what, (long long)os_.managed_delta,
				(unsigned long long)os_.ballooned_pages());
	}

	FuzzInput& in_;
	const LyingOsConfig config_;
	LyingOs os_;
	const uint32_t wire_pages_per_page_;
	std::unique_ptr<Core::Workspace> workspace_;
	std::unique_ptr<Core> core_;
	std::vector<uint64_t> harness_pages_;
	uint64_t reentries_ = 0;
	bool volatile_ = false;
};

LyingOsConfig read_config(FuzzInput& in)
{
	LyingOsConfig config;
	config.traits.page_shift = kPageShifts[in.u8() % 4];
	config.pages = 16 + in.u16() % 4096;
	// Where guest memory sits: low, anywhere, or across the 16 TiB a 32-bit PFN reaches.
	const uint64_t wire_limit = (VB_PFN_MAX + 1) >> (config.traits.page_shift - VB_PFN_SHIFT);
	switch (in.u8() % 4) {
	case 0:
		config.first_pfn = 0;
		break;
	case 1:
		config.first_pfn = in.u16();
		break;
	case 2:
		config.first_pfn = wire_limit - config.pages / 2 - in.u8();
		break;
	default:
		config.first_pfn = in.u32() % (wire_limit + 4096);
		break;
	}
	const uint8_t traits = in.u8();
	config.traits.freed_pages_need_pattern = traits & 1;
	config.traits.initialise_before_inflate = traits & 2;
	config.traits.free_page_pattern = traits & 4 ? 0xaaaaaaaau : 0;
	config.traits.accept_device_init = traits & 8; // bit 7 then replaces bit 21
	config.traits.runs_pressure_governor = traits & 16; // VB_F_X_PRESSURE may be taken
	config.traits.max_alloc_order = in.u8() % (vbsim::BuddyAllocator::kMaxOrder + 1);
	// What the device offers; the driver takes what it can use, as a real one would.
	config.features = vb::accept_features(in.u64(), config.traits);
	for (uint32_t& size : config.queue_sizes)
		size = 1u << (in.u8() % 11);
	config.indirect = in.boolean();
	// The 16 bits read name Linux's tags; VB_F_X_PRESSURE's (16 and up) mirror them, so the
	// OS offers those too without changing how older inputs decode.
	const uint32_t linux_tags = in.u16();
	config.stats_present_mask = (linux_tags | linux_tags << 16) & ((1u << VB_S_NR) - 1);
	FUZZ_TRACE(
		"config: %u-byte pages, %llu pages at %#llx, traits need-pattern %d init-before %d "
		"pattern %#x max-order %u, features %#llx, rings %u/%u/%u, indirect %d, stats "
		"%#x\n",
		1u << config.traits.page_shift, (unsigned long long)config.pages,
		(unsigned long long)config.first_pfn, config.traits.freed_pages_need_pattern,
		config.traits.initialise_before_inflate, config.traits.free_page_pattern,
		config.traits.max_alloc_order, (unsigned long long)config.features,
		config.queue_sizes[0], config.queue_sizes[1], config.queue_sizes[2],
		config.indirect, config.stats_present_mask);
	return config;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	FuzzInput in(data, size);
	const LyingOsConfig config = read_config(in);
	// The operations, then the device's tape: mutating one leaves the other in step.
	FuzzInput ops = in.split(in.u16());
	Harness harness(ops, in, config);
	harness.run();
	return 0;
}
