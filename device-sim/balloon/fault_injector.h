// SPDX-License-Identifier: GPL-2.0
//
// Carries out a FaultPlan (fault_plan.h) for the balloon device: it is asked at each kick,
// chain and interrupt and says what the device does wrong this time. Breaking, vanishing
// and the target change happen once; drops repeat every Nth time. Called on the device
// thread with the transport's state lock held; the counts are atomics for the tests.
#ifndef VBSIM_BALLOON_FAULT_INJECTOR_H
#define VBSIM_BALLOON_FAULT_INJECTOR_H

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>

#include "balloon/fault_plan.h"

namespace vbsim
{

struct FaultCounters {
	std::atomic<uint64_t> kicks_ignored{0};
	std::atomic<uint64_t> interrupts_dropped{0};
	std::atomic<uint64_t> stalls{0};
	std::atomic<bool> broke{false};    // DEVICE_NEEDS_RESET was raised on purpose
	std::atomic<bool> vanished{false}; // surprise removal
	std::atomic<bool> retargeted{false};
};

class FaultInjector
{
public:
	enum class ChainFate : uint8_t {
		kServe,
		kBreak,	 // take the chain, never return it, ask for a reset
		kVanish, // take the chain, never return it, the device disappears
	};

	explicit FaultInjector(const FaultPlan& plan) : plan_(plan) {}

	bool ignore_kick(vb_queue_kind kind);
	bool drop_interrupt(vb_queue_kind kind);
	// Before a chain is handled (sleeps first when the plan stalls this queue).
	ChainFate before_chain(vb_queue_kind kind);
	// After an inflate chain was handled: the new target, once it is due.
	std::optional<uint32_t> after_inflate_chain();

	const FaultCounters& counters() const { return counters_; }

private:
	static bool every(uint32_t n, uint64_t count) { return n != 0 && count % n == 0; }

	const FaultPlan plan_;
	FaultCounters counters_;
	std::array<uint64_t, VB_QUEUE_KIND_COUNT> kicks_{};
	std::array<uint64_t, VB_QUEUE_KIND_COUNT> interrupts_{};
	std::array<uint64_t, VB_QUEUE_KIND_COUNT> chains_{};
	uint64_t inflate_chains_ = 0;
};

} // namespace vbsim

#endif
