// SPDX-License-Identifier: GPL-2.0
#include "balloon/fault_injector.h"

#include <thread>

namespace vbsim
{

bool FaultInjector::ignore_kick(vb_queue_kind kind)
{
	if (!every(plan_.on(kind).ignore_kick_every, ++kicks_[kind]))
		return false;
	counters_.kicks_ignored.fetch_add(1);
	return true;
}

bool FaultInjector::drop_interrupt(vb_queue_kind kind)
{
	if (!every(plan_.on(kind).drop_interrupt_every, ++interrupts_[kind]))
		return false;
	counters_.interrupts_dropped.fetch_add(1);
	return true;
}

FaultInjector::ChainFate FaultInjector::before_chain(vb_queue_kind kind)
{
	const QueueFaults& faults = plan_.on(kind);
	if (faults.stall_per_chain.count() > 0) {
		// A slow host: the device thread itself is late, which is what the driver sees.
		std::this_thread::sleep_for(faults.stall_per_chain);
		counters_.stalls.fetch_add(1);
	}
	const uint64_t chains = chains_[kind]++;
	if (faults.break_after_chains && chains >= faults.break_after_chains && !counters_.broke) {
		counters_.broke = true;
		return ChainFate::kBreak;
	}
	if (faults.vanish_after_chains && chains >= faults.vanish_after_chains) {
		counters_.vanished = true;
		return ChainFate::kVanish;
	}
	return ChainFate::kServe;
}

std::optional<uint32_t> FaultInjector::after_inflate_chain()
{
	++inflate_chains_;
	if (plan_.retarget.after_inflate_chains == 0 || counters_.retargeted ||
	    inflate_chains_ < plan_.retarget.after_inflate_chains)
		return std::nullopt;
	counters_.retargeted = true;
	return plan_.retarget.new_target_wire_pages;
}

} // namespace vbsim
