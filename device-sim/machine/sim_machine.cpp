// SPDX-License-Identifier: GPL-2.0
#include "machine/sim_machine.h"

#include <fmt/core.h>

namespace vbsim
{

namespace
{

GuestMemory& prepared(GuestMemory& memory, const MachineConfig& config)
{
	if (config.prepare_memory)
		config.prepare_memory(memory);
	return memory;
}

} // namespace

SimMachine::SimMachine(const MachineConfig& machine_config)
	: config(machine_config), memory({config.ram_bytes, config.backing}),
	  device(prepared(memory, config), config.device),
	  guest(memory, device.transport(), config.guest)
{
	guest.set_host_owns_probe(
		[this](uint64_t first_pfn, uint64_t count) { return device.host_owned_in_run(first_pfn, count); });
}

std::string SimMachine::boot()
{
	return guest.probe();
}

std::optional<vb::StepResult> SimMachine::settle_at(uint32_t target_wire_pages,
						    std::chrono::milliseconds timeout)
{
	device.set_target_wire_pages(target_wire_pages);
	return guest.wait_until_settled(timeout);
}

uint64_t SimMachine::rejected_inputs() const
{
	uint64_t total = 0;
	for (const auto& count : device.counters().rejected)
		total += count.load();
	return total;
}

std::vector<std::string> SimMachine::guest_problems() const
{
	std::vector<std::string> problems;
	if (std::string accounting = guest.check_accounting(); !accounting.empty())
		problems.push_back("guest accounting: " + accounting);
	const SimOsCounters& os = guest.os().counters();
	if (os.must_tell_host_violations.load())
		problems.push_back("a page was reused while the host still owned it");
	if (os.bad_page_operations.load())
		problems.push_back("the guest saw bad page operations");
	return problems;
}

std::vector<std::string> SimMachine::host_problems() const
{
	std::vector<std::string> problems;
	if (uint64_t failures = device.counters().discard_failures.load())
		problems.push_back(fmt::format("{} madvise calls failed", failures));
	if (uint64_t rejected = rejected_inputs())
		problems.push_back(fmt::format("the device rejected {} inputs", rejected));
	return problems;
}

} // namespace vbsim
