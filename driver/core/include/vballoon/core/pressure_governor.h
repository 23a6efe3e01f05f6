// SPDX-License-Identifier: GPL-2.0
//
// The pressure governor: how much of the guest the inflate may take now, and when the
// balloon gives memory back before the OOM killer would run. Pure logic over the
// PressureSamples the OS gives (os_interface.h): no Os calls, no locks, no floating point
// (the kernel runs this without the FPU), so tests drive it on its own. The page balloon
// feeds it (page_balloon.h: pressure_tick() once a second, plan() before every inflate
// batch) and keeps it under the balloon lock.
//
// Why. Linux's own driver takes every page with one light direct-reclaim pass and checks
// nothing: once the cold page cache is gone it evicts the working set, the kernel counts
// that churn as progress, OOM (and deflate-on-OOM with it) never comes, and the guest
// crawls (issue 30: Fly.io, Firecracker #4324, Proxmox reports). The governor reads the
// signals a module has.
//
// Levels, decided once per tick from the rates between two samples (per second, so a late
// tick is not mistaken for a calm one), with T = the refault threshold below:
//   kThrashing  refaults >= T/s (the working set is being evicted and read back), an OOM
//               kill, or (where the OS has it) tasks stalled on memory >= 5% of the time;
//   kTight      refaults >= T/4 per s, major faults >= T/s, direct reclaim the balloon did
//               not cause (allocation stalls beyond the balloon's own reclaiming
//               allocations; direct scans in an interval where the balloon did not
//               reclaim) >= T/s, reclaim (anyone's, kswapd's too) scanning >= T pages/s
//               and freeing fewer than 1 in kScannedPerFreedInUse of them, or stalled
//               >= 1% of the time;
//   kCalm       none of these.
//   T = max(64 pages, RAM / 4096) per second: 256 KiB/s on a 1 GiB guest, 2 MiB/s on 8 GiB.
//   A healthy guest refaults far less (Fly.io's thrashing guest: major faults x594 against
//   a healthy one).
//   Reclaim that scans much and frees little found the pages referenced (in use) and kept
//   them: the cold cache is gone and what is left is working set, a tick or two before the
//   refaults show it (issue 30's bench, 6.1: 227,000 pages/s scanned for an 8 MiB probe,
//   then 13,000 refaults/s). Linux's vmpressure reads the same ratio.
//
// Pacing (plan()):
//   - free pages above what the allocator keeps (free_pages_kept(), the high watermarks)
//     cost the guest nothing: the inflate takes them without reclaim (Reclaim::kNone),
//     unlimited while calm, kTightQuantumShift-paced while tight;
//   - reclaim (Reclaim::kLight, which evicts page cache) only while calm, at most the
//     reclaim allowance per tick, so the refaults it may cause show up at the next tick
//     before more is evicted. The allowance starts at a probe (RAM/1024: 1 MiB on a 1 GiB
//     guest, 4 MiB on 4 GiB) and doubles after every kTicksForAnEvictionToShow calm ticks that
//     followed a reclaim, up to the reclaim quantum (RAM/64); a tick that is not calm sets
//     it back to the probe. Two ticks, because an evicted page comes back only when the
//     workload next touches it: the first tick sees part of the damage. Why a probe: the
//     page cache left once the free pages are gone may be all working set (issue 30's
//     bench: 64 MiB evicted at once from a 1 GiB hot file set cost 4 s of 3% throughput
//     and 245 MiB given back), and how much cold cache there is shows only by taking it;
//   - and never more than the page cache no process maps (the file LRU minus Mapped):
//     mapped file pages are what processes keep in their address space (program text,
//     libraries, files they chose to map), and Linux's own reclaim keeps a referenced mapped
//     page on first sight. Which mapped pages are hot shows only when reclaim reads their
//     accessed bits, all at once (issue 30's bench, 6.1: a 1 GiB mapped file set, all on the
//     inactive list until then, scanned whole in one second and some of it evicted before any
//     signal could stop it), so the balloon leaves them to the guest;
//   - no reclaim at all where the balloon cannot give back (no DEFLATE_ON_OOM, or
//     PressurePolicy::give_back off): the first quantum that reaches the working set is
//     what teaches the governor where it is, and without a give-back that damage would
//     stay (the spec forbids deflating below the target), so such a balloon takes free
//     pages only and leaves the page cache alone;
//   - tight: no reclaim, free pages only, the quantum halved for each tight tick in a row;
//   - thrashing, or holding after pressure: nothing.
// The floor (floor_pages()) bounds every plan: the inflate never leaves less available
// memory (MemAvailable: free pages plus reclaimable cache) than the floor, which is the
// largest of
//   - the policy's floor (PressurePolicy::floor_pages, a module parameter; 0: none);
//   - Hyper-V's floor for the guest's RAM (hyperv_floor_pages()), as the least any guest
//     keeps: hv_balloon refuses a request that would leave MemAvailable below it;
//   - the working set learned from refaults: MemAvailable at the first thrashing tick of an
//     episode (where the working set stopped fitting) plus a margin of RAM/32, the largest
//     seen. Never forgotten while bound: a working set that shrinks keeps a high floor
//     (safe; a host that wants more must wait for a rebind).
// Undo (tick()): a tick that is not calm during a reclaim streak (ticks in a row that
// reclaimed, and the one after) is the balloon's own doing: it learns the knee there
// (MemAvailable now), holds, and gives back at once what the streak reclaimed (at most one
// reclaim quantum), before the refaults grow into a thrash.
// Give-back (tick()), only with VIRTIO_BALLOON_F_DEFLATE_ON_OOM and PressurePolicy::
// give_back: after kGiveBackAfterTicks thrashing ticks in a row the balloon deflates one
// give-back quantum (RAM/64, at least Linux's 1 MiB OOM quantum) per tick while thrashing
// lasts. Re-inflation is then held for kHoldCalmTicks calm ticks (VMware's balloon waits
// 5 s after a shrink, ChromeOS 10-100 s), or until the host sets a new target; the learned
// floor stops the next inflate short of where the refaults began, so inflate, reclaim and
// give-back do not cycle (the 2018-2020 shrinker's "busy no-op").
#ifndef VBALLOON_CORE_PRESSURE_GOVERNOR_H
#define VBALLOON_CORE_PRESSURE_GOVERNOR_H

#include <stdint.h>

#include "vballoon/core/os_interface.h"
#include "vballoon/core/rules/pressure_rules.h"
#include "vballoon/support/freestanding.h"

namespace vb
{

// What the OS asks of the governor (a module parameter for each field in Linux).
struct PressurePolicy {
	bool enabled = false;
	uint64_t floor_pages = 0; // guest pages kept available at least; 0: derived only
	bool give_back = true;	  // with DEFLATE_ON_OOM: deflate under sustained pressure
};

enum class PressureLevel : uint8_t { kCalm, kTight, kThrashing };

// One look at the guest, as the page balloon assembles it (guest pages throughout).
struct GovernorInput {
	PressureSample sample;
	uint64_t kept_free_pages; // free_pages_kept(): the allocator's watermarks
	uint64_t ram_pages;	  // the guest's RAM, the balloon's pages included
	uint64_t balloon_pages;
};

// What the next inflate batch may take.
struct InflatePlan {
	uint64_t max_pages;  // at most this many pages; 0: hold
	uint64_t free_pages; // of them, this many without reclaim (Reclaim::kNone)
	bool reclaim;	     // the rest may reclaim (Reclaim::kLight)
};

// What one tick decided.
struct TickDecision {
	uint64_t give_back_pages; // deflate this many guest pages now
	bool resume;		  // a held inflate may go on: run adjust_towards_target()
};

class PressureGovernor
{
public:
	// How often the OS calls the balloon's pressure_tick().
	static constexpr uint64_t kPressureTickMs = 1000;
	static constexpr uint64_t kMinRefaultsPerSecond = 64;
	static constexpr unsigned kRefaultThresholdShift = 12; // T = RAM >> 12 per second
	static constexpr unsigned kReclaimQuantumShift = 6;    // RAM/64 per tick at most
	static constexpr unsigned kReclaimProbeShift = 10;     // RAM/1024: the first reclaim
	static constexpr uint32_t kTicksForAnEvictionToShow = 2;
	static constexpr unsigned kGiveBackQuantumShift = 6;   // RAM/64 per give-back
	static constexpr unsigned kMarginShift = 5;	       // RAM/32 above the knee
	static constexpr unsigned kMaxPaceShift = 6;
	static constexpr uint32_t kStallPermilleThrashing = 50;
	static constexpr uint32_t kStallPermilleTight = 10;
	static constexpr uint64_t kScannedPerFreedInUse = 8;
	static constexpr uint32_t kGiveBackAfterTicks = 2;
	static constexpr uint32_t kHoldCalmTicks = 10;

	explicit PressureGovernor(unsigned page_shift) : page_shift_(page_shift) {}

	void set_policy(const PressurePolicy& policy, bool deflate_on_oom)
	{
		policy_ = policy;
		deflate_on_oom_ = deflate_on_oom;
	}
	const PressurePolicy& policy() const { return policy_; }
	bool enabled() const { return policy_.enabled; }

	// Hyper-V's floor for a guest of `ram_pages` (drivers/hv/hv_balloon.c,
	// compute_balloon_floor()): a continuous piecewise linear function of RAM whose slope
	// halves at each knot, 72 MiB at 128 MiB, 168 MiB at 512 MiB, 360 MiB at 2 GiB, 744 MiB
	// at 8 GiB, 1512 MiB at 32 GiB. Written here as knots and slopes: below the first knot
	// half of RAM plus 8 MiB, then from each knot on the knot's floor plus RAM beyond it
	// over 4, 8, 16, 32.
	static uint64_t hyperv_floor_pages(uint64_t ram_pages, unsigned page_shift)
	{
		struct Knot {
			uint64_t ram_mib, floor_mib;
			unsigned slope_shift;
		};
		static constexpr Knot kKnots[] = {
			{32768, 1512, 5}, {8192, 744, 5}, {2048, 360, 4},
			{512, 168, 3},	  {128, 72, 2},
		};
		const unsigned mib_shift = 20 - page_shift;
		for (const Knot& knot : kKnots) {
			const uint64_t knot_pages = knot.ram_mib << mib_shift;
			if (ram_pages >= knot_pages)
				return (knot.floor_mib << mib_shift) +
				       ((ram_pages - knot_pages) >> knot.slope_shift);
		}
		return (uint64_t{8} << mib_shift) + (ram_pages >> 1);
	}

	// The least available memory (guest pages) the inflate leaves.
	uint64_t floor_pages(uint64_t ram_pages) const
	{
		uint64_t floor =
			max(policy_.floor_pages, hyperv_floor_pages(ram_pages, page_shift_));
		if (knee_available_pages_ && rules::floor_learned_from_refaults())
			floor = max(floor, knee_available_pages_ + (ram_pages >> kMarginShift));
		return floor;
	}
	// A reclaim that evicted working set can be undone only by a give-back.
	bool can_give_back() const { return deflate_on_oom_ && policy_.give_back; }
	// Where refaults began (MemAvailable), 0 while none were seen.
	uint64_t knee_available_pages() const { return knee_available_pages_; }
	PressureLevel level() const { return level_; }
	uint32_t thrashing_ticks() const { return thrashing_ticks_; }
	uint32_t hold_ticks_left() const { return hold_ticks_left_; }
	bool holding() const { return hold_ticks_left_ != 0 && rules::holds_after_pressure(); }
	bool inflate_held() const { return inflate_held_; }

	// The page cache reclaim may take without unmapping anything from a process.
	static uint64_t unmapped_cache_pages(const PressureSample& sample)
	{
		return sample.file_lru_pages > sample.mapped_file_pages
			       ? sample.file_lru_pages - sample.mapped_file_pages
			       : 0;
	}

	// The refault rate (pages per second) that means thrashing.
	static uint64_t refault_threshold(uint64_t ram_pages)
	{
		return max<uint64_t>(kMinRefaultsPerSecond, ram_pages >> kRefaultThresholdShift);
	}
	static uint64_t reclaim_quantum(uint64_t ram_pages)
	{
		return max<uint64_t>(ram_pages >> kReclaimQuantumShift, 1);
	}
	static uint64_t reclaim_probe(uint64_t ram_pages)
	{
		return max<uint64_t>(ram_pages >> kReclaimProbeShift, 1);
	}
	// How much the inflate may reclaim per tick now: the probe, doubled per
	// kTicksForAnEvictionToShow calm ticks after a reclaim, at most the quantum.
	uint64_t reclaim_allowance(uint64_t ram_pages) const
	{
		if (!rules::reclaim_starts_with_a_probe())
			return reclaim_quantum(ram_pages);
		// At most kReclaimProbeShift - kReclaimQuantumShift doublings: no overflow.
		return min(reclaim_probe(ram_pages) << reclaim_doublings_,
			   reclaim_quantum(ram_pages));
	}
	uint64_t give_back_quantum(uint64_t ram_pages) const
	{
		// At least Linux's OOM quantum, 256 wire pages (1 MiB).
		const uint64_t oom_pages = max<uint64_t>(uint64_t{256} >> (page_shift_ - 12), 1);
		return max(ram_pages >> kGiveBackQuantumShift, oom_pages);
	}

	// The host set a target: a new one ends a hold (the host has seen `actual` and asks
	// again); the floor stays.
	void note_target(uint64_t target_wire_pages)
	{
		if (target_wire_pages != last_target_wire_pages_ && rules::new_target_ends_hold())
			hold_ticks_left_ = 0;
		last_target_wire_pages_ = target_wire_pages;
	}

	// What the next batch may take now: nothing while thrashing or holding, never below the
	// floor, free pages above the watermarks, and reclaim only while calm.
	InflatePlan plan(const GovernorInput& in) const
	{
		InflatePlan plan = {0, 0, false};
		if (holding() || level_ == PressureLevel::kThrashing)
			return plan;
		const uint64_t floor = floor_pages(in.ram_pages);
		const uint64_t available = in.sample.available_pages;
		uint64_t room = available > floor ? available - floor : 0;
		if (!rules::inflate_stops_at_floor())
			room = ~uint64_t{0};
		const uint64_t free_above_kept = in.sample.free_pages > in.kept_free_pages
							 ? in.sample.free_pages - in.kept_free_pages
							 : 0;
		uint64_t free_pages = free_above_kept;
		uint64_t reclaim_pages = 0;
		if (level_ == PressureLevel::kCalm || !rules::reclaims_only_when_calm()) {
			const uint64_t quantum = reclaim_allowance(in.ram_pages);
			if (can_give_back() || !rules::reclaims_only_when_it_can_give_back())
				reclaim_pages = quantum > reclaimed_this_tick_
							? quantum - reclaimed_this_tick_
							: 0;
			if (rules::reclaims_only_unmapped_cache())
				reclaim_pages = min(reclaim_pages, unmapped_cache_pages(in.sample));
		} else {
			// Tight: free pages only, and fewer each tight tick in a row.
			uint64_t quantum = reclaim_quantum(in.ram_pages);
			if (rules::paces_when_tight())
				quantum >>= pace_shift_;
			const uint64_t left =
				quantum > taken_this_tick_ ? quantum - taken_this_tick_ : 0;
			free_pages = min(free_pages, left);
		}
		plan.free_pages = min(free_pages, room);
		plan.max_pages = min(room, plan.free_pages + reclaim_pages);
		plan.reclaim = plan.max_pages > plan.free_pages;
		return plan;
	}

	// A batch took `free_pages` without reclaim and `reclaimed_pages` with it.
	void note_inflated(uint64_t free_pages, uint64_t reclaimed_pages)
	{
		taken_this_tick_ += free_pages + reclaimed_pages;
		reclaimed_this_tick_ += reclaimed_pages;
		reclaimed_since_sample_ += reclaimed_pages;
	}
	// The inflate stopped short because of the governor: a tick may resume it.
	void note_held() { inflate_held_ = true; }
	// The OOM notifier deflated: hold re-inflation as after a give-back.
	void note_oom_deflate()
	{
		hold_ticks_left_ = kHoldCalmTicks;
		inflate_held_ = true;
	}

	// One tick (every kPressureTickMs): the level from the rates since the last tick, the
	// knee, the hold, and whether to give back or resume. `below_target`: the balloon holds
	// less than the host's target.
	TickDecision tick(const GovernorInput& in, bool below_target)
	{
		TickDecision decision = {0, false};
		const PressureSample& now = in.sample;
		taken_this_tick_ = 0;
		reclaimed_this_tick_ = 0;
		if (!have_last_) {
			have_last_ = true;
			last_ = now;
			reclaimed_since_sample_ = 0;
			return decision;
		}
		const PressureLevel previous = level_;
		level_ = classify(in);
		last_ = now;
		const uint64_t reclaimed_now = reclaimed_since_sample_;
		reclaimed_since_sample_ = 0;
		note_reclaim_outcome(reclaimed_now);
		note_reclaim_streak(reclaimed_now);

		if (level_ != PressureLevel::kCalm && reclaim_streak_pages_ &&
		    rules::undoes_its_own_reclaim()) {
			// The balloon's own eviction reached the working set: this is the knee.
			knee_available_pages_ = max(knee_available_pages_, now.available_pages);
			const uint64_t undo =
				min(reclaim_streak_pages_, reclaim_quantum(in.ram_pages));
			reclaim_streak_pages_ = 0; // undone once
			hold_ticks_left_ = kHoldCalmTicks;
			inflate_held_ = true;
			if (level_ == PressureLevel::kThrashing)
				thrashing_ticks_++;
			else
				thrashing_ticks_ = 0;
			if (can_give_back() &&
			    rules::gives_back_only_with_deflate_on_oom(deflate_on_oom_))
				decision.give_back_pages = min(undo, in.balloon_pages);
			return decision;
		}

		if (level_ == PressureLevel::kThrashing) {
			if (previous != PressureLevel::kThrashing &&
			    last_refault_rate_ >= refault_threshold(in.ram_pages))
				knee_available_pages_ =
					max(knee_available_pages_, now.available_pages);
			thrashing_ticks_++;
			hold_ticks_left_ = kHoldCalmTicks;
			if (below_target || in.balloon_pages)
				inflate_held_ = true;
			pace_shift_ = kMaxPaceShift;
		} else {
			thrashing_ticks_ = 0;
			if (level_ == PressureLevel::kTight) {
				pace_shift_ = min(pace_shift_ + 1, kMaxPaceShift);
			} else {
				if (pace_shift_)
					pace_shift_--;
				if (hold_ticks_left_)
					hold_ticks_left_--;
			}
		}

		if (level_ == PressureLevel::kThrashing &&
		    thrashing_ticks_ >= kGiveBackAfterTicks && policy_.give_back &&
		    rules::gives_back_only_with_deflate_on_oom(deflate_on_oom_) &&
		    in.balloon_pages) {
			decision.give_back_pages =
				min(give_back_quantum(in.ram_pages), in.balloon_pages);
			inflate_held_ = true;
			return decision;
		}
		if (inflate_held_ && below_target && level_ != PressureLevel::kThrashing &&
		    !holding()) {
			// Resume only for a worthwhile batch, so a guest at its floor is not woken
			// every second for nothing.
			const InflatePlan next = plan(in);
			if (next.max_pages >= min_resume_pages(in.ram_pages)) {
				inflate_held_ = false;
				decision.resume = true;
			}
		}
		return decision;
	}

	static uint64_t min_resume_pages(uint64_t ram_pages)
	{
		return max<uint64_t>(ram_pages >> 10, 1);
	}

private:
	// Slow start: grow the reclaim allowance after calm ticks that followed a reclaim,
	// back to the probe after any tick that is not calm.
	void note_reclaim_outcome(uint64_t reclaimed_now)
	{
		if (level_ != PressureLevel::kCalm) {
			reclaim_doublings_ = 0;
			calm_reclaim_ticks_ = 0;
			return;
		}
		if (!reclaimed_now)
			return;
		if (++calm_reclaim_ticks_ >= kTicksForAnEvictionToShow) {
			calm_reclaim_ticks_ = 0;
			if (reclaim_doublings_ < kReclaimProbeShift - kReclaimQuantumShift)
				reclaim_doublings_++;
		}
	}

	// The streak: what the balloon reclaimed in the ticks in a row that reclaimed, and the
	// one after. Its eviction may come late: an allocation with light reclaim takes free
	// pages down to the low watermark first, and kswapd evicts for it only then (issue 30's
	// bench: three probes of 4-8 MiB, no refault for three ticks, then the eviction).
	void note_reclaim_streak(uint64_t reclaimed_now)
	{
		if (reclaimed_now) {
			reclaim_streak_pages_ += reclaimed_now;
			ticks_since_reclaim_ = 0;
		} else if (++ticks_since_reclaim_ >= kTicksForAnEvictionToShow) {
			reclaim_streak_pages_ = 0;
		}
	}

	static uint64_t per_second(uint64_t delta, uint64_t ms)
	{
		return delta > ~uint64_t{0} / 1000 ? delta / ms * 1000 : delta * 1000 / ms;
	}

	PressureLevel classify(const GovernorInput& in)
	{
		const PressureSample& now = in.sample;
		const uint64_t ms = max<uint64_t>(now.now_ms - last_.now_ms, 1);
		const uint64_t threshold = refault_threshold(in.ram_pages);
		const uint64_t refaults = per_second(now.refaults - last_.refaults, ms);
		const uint64_t majors = per_second(now.major_faults - last_.major_faults, ms);
		// The balloon's own reclaiming allocations stall at most once each.
		const uint64_t stalls_delta = now.alloc_stalls - last_.alloc_stalls;
		const uint64_t others_stalls = stalls_delta > reclaimed_since_sample_
						       ? stalls_delta - reclaimed_since_sample_
						       : 0;
		const uint64_t scans =
			reclaimed_since_sample_
				? 0
				: per_second(now.direct_scans - last_.direct_scans, ms);
		uint64_t stall_permille = 0;
		if (now.has_stall_time && last_.has_stall_time)
			stall_permille =
				(now.stall_us - last_.stall_us) / ms; // us per ms = permille
		// Cold cache is freed as it is scanned; pages in use are scanned and kept.
		const uint64_t scanned =
			per_second(now.reclaim_scanned - last_.reclaim_scanned, ms);
		const uint64_t freed = per_second(now.reclaim_stolen - last_.reclaim_stolen, ms);
		const bool reclaim_finds_pages_in_use = scanned >= threshold &&
							freed < scanned / kScannedPerFreedInUse &&
							rules::reclaim_of_used_pages_is_pressure();
		last_refault_rate_ = refaults;
		if (refaults >= threshold || now.oom_kills != last_.oom_kills ||
		    stall_permille >= kStallPermilleThrashing)
			return PressureLevel::kThrashing;
		if (refaults >= threshold / 4 || majors >= threshold ||
		    per_second(others_stalls, ms) >= threshold || scans >= threshold ||
		    reclaim_finds_pages_in_use || stall_permille >= kStallPermilleTight)
			return PressureLevel::kTight;
		return PressureLevel::kCalm;
	}

	const unsigned page_shift_;
	PressurePolicy policy_;
	bool deflate_on_oom_ = false;
	bool have_last_ = false;
	PressureSample last_{};
	PressureLevel level_ = PressureLevel::kCalm;
	uint64_t last_refault_rate_ = 0;
	uint64_t knee_available_pages_ = 0;
	uint32_t thrashing_ticks_ = 0;
	uint32_t hold_ticks_left_ = 0;
	unsigned pace_shift_ = 0;
	bool inflate_held_ = false;
	uint64_t last_target_wire_pages_ = 0;
	uint64_t taken_this_tick_ = 0;
	uint64_t reclaimed_this_tick_ = 0;
	uint64_t reclaimed_since_sample_ = 0;
	uint64_t reclaim_streak_pages_ = 0;
	uint32_t ticks_since_reclaim_ = 0;
	uint32_t reclaim_doublings_ = 0;
	uint32_t calm_reclaim_ticks_ = 0;
};

} // namespace vb

#endif
