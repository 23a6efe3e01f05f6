// SPDX-License-Identifier: GPL-2.0
#include "inflate_then_deflate.h"

namespace vbsim
{

namespace
{

using Clock = std::chrono::steady_clock;

BalloonPhase run_phase(SimMachine& machine, uint32_t target_wire_pages,
		       std::chrono::milliseconds settle_timeout)
{
	BalloonPhase phase;
	phase.target_wire_pages = target_wire_pages;
	phase.before = MachineCounters::read(machine);
	const auto start = Clock::now();
	phase.settled = machine.settle_at(target_wire_pages, settle_timeout);
	phase.ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
	phase.after = MachineCounters::read(machine);
	return phase;
}

} // namespace

MachineCounters MachineCounters::read(const SimMachine& machine)
{
	const BalloonDevice& device = machine.device;
	const BalloonDeviceCounters& host = device.counters();
	const SimOsCounters& os = machine.guest.os().counters();
	const vb::BalloonCounters& core = machine.guest.core()->counters();
	MachineCounters counters;
	counters.inflate_requests = host.inflate_requests.load();
	counters.deflate_requests = host.deflate_requests.load();
	counters.wire_pages_inflated = host.wire_pages_inflated.load();
	counters.wire_pages_deflated = host.wire_pages_deflated.load();
	counters.wire_pages_discarded = host.wire_pages_discarded.load();
	counters.discard_calls = host.discard_calls.load();
	counters.discard_failures = host.discard_failures.load();
	counters.translate_ns = host.translate_ns.load();
	counters.discard_ns = host.discard_ns.load();
	for (const auto& count : host.rejected)
		counters.rejected += count.load();
	for (int kind = 0; kind < VB_QUEUE_KIND_COUNT; kind++) {
		const auto queue = static_cast<vb_queue_kind>(kind);
		counters.kicks[kind] = device.kicks_received(queue);
		counters.interrupts[kind] = device.interrupts_sent(queue);
		counters.interrupt_ns[kind] = device.interrupt_ns(queue);
		counters.chains[kind] = device.chains_processed(queue);
	}
	counters.alloc_ns = os.alloc_ns.load();
	counters.guest_init_ns = os.guest_init_ns.load();
	counters.pages_initialised_by_guest = os.pages_initialised_by_guest.load();
	counters.pages_skipped_initialising = os.pages_skipped_initialising.load();
	counters.inflate_messages = core.inflate_messages.get();
	counters.deflate_messages = core.deflate_messages.get();
	counters.wire_pages_device_initialised = core.wire_pages_device_initialised.get();
	return counters;
}

uint64_t MachineCounters::all_kicks() const
{
	uint64_t total = 0;
	for (const uint64_t count : kicks)
		total += count;
	return total;
}

uint64_t MachineCounters::all_interrupts() const
{
	uint64_t total = 0;
	for (const uint64_t count : interrupts)
		total += count;
	return total;
}

InflateThenDeflateRun inflate_then_deflate(SimMachine& machine, uint32_t target_wire_pages,
					   std::chrono::milliseconds settle_timeout,
					   const InflateThenDeflateHooks& hooks)
{
	InflateThenDeflateRun run;
	run.refused = machine.boot();
	if (!run.refused.empty())
		return run;
	if (hooks.booted && !hooks.booted(machine))
		return run;
	run.inflate = run_phase(machine, target_wire_pages, settle_timeout);
	if (hooks.inflated && !hooks.inflated(machine, run.inflate))
		return run;
	run.deflate = run_phase(machine, 0, settle_timeout);
	if (hooks.deflated && !hooks.deflated(machine, run.deflate))
		return run;
	run.completed = true;
	run.guest_problems = machine.guest_problems();
	machine.guest.remove();
	return run;
}

} // namespace vbsim
