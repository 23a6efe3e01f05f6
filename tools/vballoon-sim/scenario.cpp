// SPDX-License-Identifier: GPL-2.0
#include "scenario.h"

#include <fmt/core.h>

#include <chrono>
#include <memory>
#include <stdexcept>

#include "machine/inflate_then_deflate.h"
#include "machine/machine_builder.h"

namespace vbsim {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kPagesPerMib = 256;
constexpr std::chrono::minutes kSettleTimeout{10};

double ms_since(Clock::time_point start)
{
	return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

void record_phase(PhaseResult& phase, const MachineCounters& before, const MachineCounters& after,
		  bool inflate)
{
	phase.device_requests = inflate ? after.inflate_requests - before.inflate_requests
					: after.deflate_requests - before.deflate_requests;
	phase.device_pages = inflate ? after.wire_pages_inflated - before.wire_pages_inflated
				     : after.wire_pages_deflated - before.wire_pages_deflated;
	phase.wire_pages_discarded = after.wire_pages_discarded - before.wire_pages_discarded;
	phase.discard_calls = after.discard_calls - before.discard_calls;
	phase.kicks = after.all_kicks() - before.all_kicks();
	phase.interrupts = after.all_interrupts() - before.all_interrupts();
	phase.driver_messages = inflate ? after.inflate_messages - before.inflate_messages
					: after.deflate_messages - before.deflate_messages;
}

} // namespace

std::string run_inflate_deflate(const ScenarioOptions& options, ScenarioResult* result)
{
	MachineBuilder builder;
	builder.ram_bytes(uint64_t{options.ram_mib} << 20)
		.backing(options.backing)
		.offer(options.chunked ? VB_FEATURE(VB_F_X_CHUNKED) : 0)
		.discard_mode(options.discard_mode)
		.max_chunk_order(options.max_chunk_order);
	try {
		builder.profile(options.profile);
	} catch (const std::invalid_argument& unknown) {
		return unknown.what();
	}
	std::unique_ptr<SimMachine> machine = builder.build();

	const uint32_t target = options.balloon_mib * kPagesPerMib;
	std::string error;
	MachineCounters inflated_counters;
	std::vector<vb::PageRun> ballooned;
	InflateThenDeflateHooks hooks;
	hooks.booted = [&](SimMachine& booted) {
		result->negotiated_features = booted.guest.negotiated_features();
		// The guest has been busy: it wrote most of its memory and freed it again, so the
		// host holds it resident until the balloon gives it back.
		const auto start = Clock::now();
		UserMemory dirty = booted.guest.allocate_user_memory(
			uint64_t{options.dirty_mib} * kPagesPerMib, 0x5a);
		booted.guest.free_user_memory(dirty);
		result->dirty_ms = ms_since(start);
		result->resident_mib_before = booted.resident_mib();
		return true;
	};
	hooks.inflated = [&](SimMachine& inflated, const BalloonPhase& phase) {
		result->inflate.ms = phase.ms;
		if (!phase.settled) {
			error = "the balloon did not settle while inflating";
			return false;
		}
		inflated_counters = phase.after;
		record_phase(result->inflate, phase.before, phase.after, true);
		result->inflate.actual_wire_pages = inflated.device.actual_wire_pages();
		result->inflate.resident_mib_after = inflated.resident_mib();
		if (inflated.device.actual_wire_pages() != target)
			result->problems.push_back(
				fmt::format("actual is {} pages after inflating, not {}",
					    inflated.device.actual_wire_pages(), target));
		ballooned = inflated.guest.os().balloon_list().all_runs();
		return true;
	};
	hooks.deflated = [&](SimMachine& deflated, const BalloonPhase& phase) {
		result->deflate.ms = phase.ms;
		if (!phase.settled) {
			error = "the balloon did not settle while deflating";
			return false;
		}
		record_phase(result->deflate, inflated_counters, phase.after, false);
		result->deflate.actual_wire_pages = deflated.device.actual_wire_pages();
		result->deflate.resident_mib_after = deflated.resident_mib();

		// Every deflated page reads back as zero: the host really dropped what it held.
		for (const vb::PageRun& run : ballooned) {
			for (uint64_t pfn = run.first_pfn; pfn < run.first_pfn + run.count; pfn++) {
				const uint8_t* page =
					deflated.memory.translate(pfn * GuestMemory::kWirePageBytes,
								  GuestMemory::kWirePageBytes);
				bool zero = true;
				for (uint64_t i = 0; i < GuestMemory::kWirePageBytes && zero;
				     i += 8)
					zero = *reinterpret_cast<const uint64_t*>(page + i) == 0;
				result->zero_check_pages++;
				result->zero_check_failures += !zero;
			}
		}
		if (result->zero_check_failures)
			result->problems.push_back(
				fmt::format("{} deflated pages did not read back as zero",
					    result->zero_check_failures));
		result->rejected_inputs = deflated.rejected_inputs();
		return true;
	};
	InflateThenDeflateRun run = inflate_then_deflate(*machine, target, kSettleTimeout, hooks);
	if (!run.refused.empty())
		return "the driver could not bind: " + run.refused;
	if (!error.empty())
		return error;
	for (std::string& problem : run.guest_problems)
		result->problems.push_back(std::move(problem));
	return "";
}

nlohmann::json to_json(const ScenarioOptions& options, const ScenarioResult& result)
{
	auto phase = [](const PhaseResult& p) {
		return nlohmann::json{{"ms", p.ms},
				      {"actual_pages", p.actual_wire_pages},
				      {"resident_mib_after", p.resident_mib_after},
				      {"device_requests", p.device_requests},
				      {"device_pages", p.device_pages},
				      {"pages_discarded", p.wire_pages_discarded},
				      {"discard_calls", p.discard_calls},
				      {"kicks", p.kicks},
				      {"interrupts", p.interrupts},
				      {"driver_messages", p.driver_messages}};
	};
	return {{"scenario",
		 {{"ram_mib", options.ram_mib},
		  {"balloon_mib", options.balloon_mib},
		  {"dirty_mib", options.dirty_mib},
		  {"profile", options.profile},
		  {"discard", options.discard_mode == DiscardMode::kMergeRuns ? "merge" : "per-page"},
		  {"backing", options.backing == PageBacking::kTransparentHugePages ? "thp" : "small"},
		  {"max_chunk_order", options.max_chunk_order},
		  {"chunked", options.chunked}}},
		{"negotiated_features", fmt::format("{:#x}", result.negotiated_features)},
		{"resident_mib_before", result.resident_mib_before},
		{"dirty_ms", result.dirty_ms},
		{"inflate", phase(result.inflate)},
		{"deflate", phase(result.deflate)},
		{"zero_check_pages", result.zero_check_pages},
		{"zero_check_failures", result.zero_check_failures},
		{"rejected_inputs", result.rejected_inputs},
		{"problems", result.problems}};
}

std::string to_text(const ScenarioOptions& options, const ScenarioResult& result)
{
	std::string out;
	out += fmt::format("vballoon-sim: {} MiB guest ({} backing), device profile {}, {} discards, "
			   "chunk order {}{}\n",
			   options.ram_mib,
			   options.backing == PageBacking::kTransparentHugePages ? "THP" : "4 KiB page",
			   options.profile, options.discard_mode == DiscardMode::kMergeRuns ? "merged" : "per-page",
			   options.max_chunk_order, options.chunked ? ", chunk descriptors" : "");
	out += fmt::format("negotiated features {:#x}\n", result.negotiated_features);
	out += fmt::format("guest wrote and freed {} MiB in {:.0f} ms; host resident: {} MiB\n\n",
			   options.dirty_mib, result.dirty_ms, result.resident_mib_before);
	out += fmt::format("{:<9} {:>10} {:>12} {:>13} {:>10} {:>13} {:>10} {:>7} {:>10} {:>13}\n", "phase",
			   "ms", "actual", "resident MiB", "requests", "pages", "discarded", "calls",
			   "kicks", "interrupts");
	auto row = [&](const char* name, const PhaseResult& p) {
		out += fmt::format(
			"{:<9} {:>10.1f} {:>12} {:>13} {:>10} {:>13} {:>10} {:>7} {:>10} {:>13}\n",
			name, p.ms, p.actual_wire_pages, p.resident_mib_after, p.device_requests,
			p.device_pages, p.wire_pages_discarded, p.discard_calls, p.kicks,
			p.interrupts);
	};
	row("inflate", result.inflate);
	row("deflate", result.deflate);
	out += fmt::format("\ndeflated pages read back as zero: {} of {}; inputs the device rejected: {}\n",
			   result.zero_check_pages - result.zero_check_failures, result.zero_check_pages,
			   result.rejected_inputs);
	for (const std::string& problem : result.problems)
		out += "PROBLEM: " + problem + "\n";
	return out;
}

} // namespace vbsim
