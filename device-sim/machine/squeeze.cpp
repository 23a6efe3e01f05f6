// SPDX-License-Identifier: GPL-2.0
#include "squeeze.h"

#include <chrono>
#include <exception>
#include <memory>

#include "balloon/balloon_profile.h"
#include "sim_machine.h"

namespace vbsim
{

namespace
{

constexpr uint64_t kPagesPerMib = 256;

} // namespace

std::string run_squeeze(const SqueezeOptions& options, SqueezeResult* result)
{
	*result = {};
	MachineConfig config;
	config.ram_bytes = options.ram_mib << 20;
	config.device.profile =
		qemu_7_2_profile(options.deflate_on_oom ? VB_FEATURE(VB_F_DEFLATE_ON_OOM) : 0);
	config.guest.min_free_pages = linux_min_free_pages(config.ram_bytes);
	WorkloadOptions workload;
	workload.anon_pages = options.anon_mib * kPagesPerMib;
	workload.file_pages = options.file_mib * kPagesPerMib;
	workload.cold_cache_pages = options.cold_cache_mib * kPagesPerMib;
	workload.refault_cost = options.refault_cost;
	workload.mapped_file = options.mapped_file;
	config.guest.workload = workload;
	config.guest.pressure_policy.enabled = options.governor;
	config.guest.pressure_policy.floor_pages = options.floor_mib * kPagesPerMib;

	std::unique_ptr<SimMachine> machine;
	try {
		machine = std::make_unique<SimMachine>(config);
	} catch (const std::exception& error) {
		return error.what();
	}
	std::string error = machine->boot();
	if (!error.empty())
		return error;
	SimGuest& guest = machine->guest;
	unsigned second = 0;
	int direction = 0;
	uint64_t last_balloon = 0;
	auto record = [&](const SimGuest::Second& s, uint64_t target_mib) {
		SqueezeSecond row;
		row.second = second++;
		row.target_mib = target_mib;
		row.balloon_pages = s.balloon_wire_pages;
		row.refaults = s.workload.refaults;
		row.alloc_stalls = s.workload.alloc_stalls;
		row.throughput_permille = s.workload.throughput_permille;
		row.oom = s.workload.oom;
		result->seconds.push_back(row);
		if (s.balloon_wire_pages != last_balloon) {
			const int now = s.balloon_wire_pages > last_balloon ? 1 : -1;
			if (direction && now != direction)
				result->direction_changes++;
			direction = now;
			last_balloon = s.balloon_wire_pages;
		}
	};
	try {
		for (unsigned i = 0; i < options.baseline_seconds; i++) {
			SimGuest::Second s = guest.run_second();
			result->baseline_refaults += s.workload.refaults;
			record(s, 0);
		}
		for (uint64_t target_mib : options.target_mib) {
			if (!machine->settle_at(static_cast<uint32_t>(target_mib * kPagesPerMib),
						std::chrono::seconds(60)))
				return "the driver did not settle";
			for (unsigned i = 0; i < options.step_seconds; i++)
				record(guest.run_second(), target_mib);
		}
	} catch (const std::exception& failure) {
		return failure.what();
	}
	const vb::BalloonCounters& counters = guest.core()->counters();
	result->give_back_wire_pages = counters.pressure_give_back_wire_pages.get();
	result->held_steps = counters.pressure_held_steps.get();
	result->floor_pages = counters.pressure_floor_pages.get();
	result->oom_notifications = guest.oom_notifications();
	result->actual_pages = machine->device.actual_wire_pages();
	result->target_pages =
		options.target_mib.empty() ? 0 : options.target_mib.back() * kPagesPerMib;
	result->problems = machine->guest_problems();
	return "";
}

} // namespace vbsim
