// SPDX-License-Identifier: GPL-2.0
#include "inflate_run.h"

#include <fmt/core.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "machine/inflate_then_deflate.h"
#include "machine/machine_builder.h"

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 // Linux 5.14; older libc headers lack the name
#endif

namespace vbbench
{

namespace
{

using Clock = std::chrono::steady_clock;
using vbsim::GuestMemory;

// Only a hung device or driver gets near this: 7 GiB a page at a time takes seconds.
constexpr std::chrono::minutes kSettleTimeout{10};

double ms_since(Clock::time_point start)
{
	return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

uint64_t resident_mib(const GuestMemory& memory)
{
	return memory.resident_bytes(0, memory.size()) >> 20;
}

// One direction's counters from the scenario's readings around it: `queue` is the
// direction's queue (its kicks, interrupts and chains).
PhaseSample difference(const vbsim::BalloonPhase& phase, vb_queue_kind queue)
{
	const vbsim::MachineCounters& before = phase.before;
	const vbsim::MachineCounters& after = phase.after;
	const bool inflate = queue == VB_QUEUE_INFLATE;
	PhaseSample sample;
	sample.ms = phase.ms;
	sample.alloc_ns = after.alloc_ns - before.alloc_ns;
	sample.translate_ns = after.translate_ns - before.translate_ns;
	sample.discard_ns = after.discard_ns - before.discard_ns;
	sample.zero_ns = after.guest_init_ns - before.guest_init_ns;
	sample.kicks = after.kicks[queue] - before.kicks[queue];
	sample.interrupts = after.interrupts[queue] - before.interrupts[queue];
	sample.interrupt_ns = after.interrupt_ns[queue] - before.interrupt_ns[queue];
	sample.chains = after.chains[queue] - before.chains[queue];
	sample.driver_messages = inflate ? after.inflate_messages - before.inflate_messages
					 : after.deflate_messages - before.deflate_messages;
	sample.discard_calls = after.discard_calls - before.discard_calls;
	sample.wire_pages_discarded = after.wire_pages_discarded - before.wire_pages_discarded;
	sample.pages_moved = inflate ? after.wire_pages_inflated - before.wire_pages_inflated
				     : after.wire_pages_deflated - before.wire_pages_deflated;
	sample.pages_zeroed = after.pages_initialised_by_guest - before.pages_initialised_by_guest;
	sample.pages_zero_skipped =
		after.pages_skipped_initialising - before.pages_skipped_initialising;
	sample.wire_pages_device_initialised =
		after.wire_pages_device_initialised - before.wire_pages_device_initialised;
	return sample;
}

// Makes all of guest RAM resident, one slice per thread (faults on a fresh mapping are
// mostly the kernel's and its host's work, and they scale over CPUs). A fresh THP mapping
// gets 2 MiB pages here.
void populate(GuestMemory& memory, unsigned threads, RunSample& sample)
{
	constexpr uint64_t kSliceAlign = 2ull << 20;
	const uint64_t slice =
		(memory.size() / threads + kSliceAlign - 1) / kSliceAlign * kSliceAlign;
	std::vector<int> errors(threads, 0);
	std::vector<std::thread> workers;
	const auto start = Clock::now();
	for (unsigned i = 0; i < threads; i++) {
		const uint64_t first = slice * i;
		if (first >= memory.size())
			break;
		const uint64_t len = std::min(slice, memory.size() - first);
		workers.emplace_back([&memory, &errors, i, first, len] {
			errors[i] = memory.populate(first, len);
		});
	}
	for (std::thread& worker : workers)
		worker.join();
	sample.populate_ms = ms_since(start);
	for (const int error : errors) {
		if (error != 0)
			throw std::system_error(error, std::generic_category(),
						"populating guest RAM");
	}
	sample.huge_mib_populated = anon_huge_mib();
	sample.resident_mib_populated = resident_mib(memory);
}

// The limit: the host dropping the same amount of populated memory in one call, from the
// first page the guest's allocator manages.
RunSample run_limit(const BenchConfig& config)
{
	RunSample sample;
	GuestMemory memory({config.ram_bytes, config.backing});
	populate(memory, config.populate_threads, sample);
	const uint64_t first = vbsim::SimGuestOptions{}.kernel_bytes;
	const auto start = Clock::now();
	const int error = memory.discard(first, config.balloon_bytes);
	sample.inflate.ms = ms_since(start);
	sample.inflate.discard_ns = static_cast<uint64_t>(sample.inflate.ms * 1e6);
	sample.inflate.discard_calls = 1;
	if (error != 0)
		sample.problems.push_back(fmt::format("madvise failed: errno {}", error));
	else
		sample.inflate.wire_pages_discarded =
			config.balloon_bytes / GuestMemory::kWirePageBytes;
	sample.inflate.pages_moved = sample.inflate.wire_pages_discarded;
	sample.huge_mib_after_inflate = anon_huge_mib();
	sample.resident_mib_after_inflate = resident_mib(memory);
	sample.huge_mib_after_deflate = sample.huge_mib_after_inflate;
	sample.resident_mib_after_deflate = sample.resident_mib_after_inflate;
	return sample;
}

void check_negotiated(const Mode& mode, uint64_t features, RunSample& sample)
{
	auto expect = [&](unsigned bit, bool wanted, const char* name) {
		if (((features & VB_FEATURE(bit)) != 0) != wanted)
			sample.problems.push_back(
				fmt::format("{} {} negotiated", name, wanted ? "was not" : "was"));
	};
	expect(VB_F_X_CHUNKED, mode.chunked(), "VB_F_X_CHUNKED");
	expect(VB_F_X_INIT_ON_INFLATE, mode.zeroing == Zeroing::kHost, "VB_F_X_INIT_ON_INFLATE");
}

// What must hold after the inflate whatever the timing; a broken run is reported, not hidden.
void check_inflate(const BenchConfig& config, const Mode& mode, uint64_t target,
		   const PhaseSample& phase, RunSample& sample)
{
	auto expect = [&](bool ok, const std::string& what) {
		if (!ok)
			sample.problems.push_back("inflate: " + what);
	};
	expect(phase.pages_moved == target,
	       fmt::format("the device took {} pages, not {}", phase.pages_moved, target));
	// A device tracking huge pages keeps partly ballooned ones until they fill up.
	if (config.host_page_bytes == GuestMemory::kWirePageBytes)
		expect(phase.wire_pages_discarded == target,
		       fmt::format("the device discarded {} pages, not {}",
				   phase.wire_pages_discarded, target));
	if (mode.zeroing == Zeroing::kGuest)
		expect(phase.pages_zeroed == target,
		       fmt::format("the guest zeroed {} pages, not {}", phase.pages_zeroed,
				   target));
	if (mode.zeroing == Zeroing::kHost)
		expect(phase.pages_zeroed == 0,
		       fmt::format("the guest zeroed {} pages although the device initialises them",
				   phase.pages_zeroed));
}

// On the way back every page is zeroed by the guest or was initialised by the device, and
// the guest skips exactly what the device promised.
void check_deflate(const Mode& mode, uint64_t target, const PhaseSample& inflate,
		   const PhaseSample& deflate, RunSample& sample)
{
	auto expect = [&](bool ok, const std::string& what) {
		if (!ok)
			sample.problems.push_back("deflate: " + what);
	};
	expect(deflate.pages_moved == target,
	       fmt::format("the device gave back {} pages, not {}", deflate.pages_moved, target));
	const uint64_t handled = deflate.pages_zeroed + deflate.pages_zero_skipped;
	if (mode.zeroing == Zeroing::kNone)
		expect(handled == 0, fmt::format("the guest initialised {} pages without "
						 "init_on_free",
						 handled));
	else
		expect(handled == target,
		       fmt::format("{} pages zeroed or skipped, not {}", handled, target));
	expect(deflate.pages_zero_skipped == inflate.wire_pages_device_initialised,
	       fmt::format("the guest skipped zeroing {} pages, the device initialised {}",
			   deflate.pages_zero_skipped, inflate.wire_pages_device_initialised));
}

} // namespace

PopulateMethod detect_populate_method()
{
	const size_t bytes = 4096;
	void* scratch =
		mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (scratch == MAP_FAILED)
		return PopulateMethod::kTouch;
	const bool supported = madvise(scratch, bytes, MADV_POPULATE_WRITE) == 0;
	munmap(scratch, bytes);
	return supported ? PopulateMethod::kPopulateWrite : PopulateMethod::kTouch;
}

std::string_view to_string(PopulateMethod method)
{
	return method == PopulateMethod::kPopulateWrite ? "MADV_POPULATE_WRITE"
							: "writing one byte per 4 KiB page";
}

uint64_t anon_huge_mib()
{
	std::ifstream rollup("/proc/self/smaps_rollup");
	std::string key;
	uint64_t kib = 0;
	while (rollup >> key) {
		if (key == "AnonHugePages:" && rollup >> kib)
			return kib >> 10;
		rollup.ignore(1 << 12, '\n');
	}
	return 0;
}

RunSample run_mode(const BenchConfig& config, const Mode& mode)
{
	if (mode.is_limit())
		return run_limit(config);

	uint64_t extra_features = 0;
	if (mode.chunked())
		extra_features |= VB_FEATURE(VB_F_X_CHUNKED);
	if (mode.zeroing == Zeroing::kHost)
		extra_features |= VB_FEATURE(VB_F_X_INIT_ON_INFLATE);

	RunSample sample;
	vbsim::MachineBuilder builder;
	builder.ram_bytes(config.ram_bytes)
		.backing(config.backing)
		.profile(config.profile)
		.offer(extra_features)
		.discard_mode(mode.discard_mode())
		.host_page_bytes(config.host_page_bytes)
		.max_chunk_order(mode.max_chunk_order())
		// Resident before the device and the guest exist, timed on its own.
		.prepare_memory([&config, &sample](GuestMemory& memory) {
			populate(memory, config.populate_threads, sample);
		});
	// init_on_free, and zeroing on the way into the balloon unless the host does it.
	if (mode.zeroing != Zeroing::kNone)
		builder.guest_zeroes_pages(true);
	const std::unique_ptr<vbsim::SimMachine> machine = builder.build();

	const uint64_t target = config.balloon_bytes / GuestMemory::kWirePageBytes;
	vbsim::InflateThenDeflateHooks hooks;
	hooks.booted = [&](vbsim::SimMachine& booted) {
		sample.negotiated_features = booted.guest.negotiated_features();
		check_negotiated(mode, sample.negotiated_features, sample);
		if (config.pin_threads && (!booted.guest.run_worker_on_cpu(0) ||
					   !booted.device.transport().run_device_thread_on_cpu(1))) {
			sample.problems.push_back(
				"--pin-threads: cannot keep the threads on CPUs 0 and 1");
			return false;
		}
		return true;
	};
	hooks.inflated = [&](vbsim::SimMachine& inflated, const vbsim::BalloonPhase& phase) {
		sample.inflate = difference(phase, VB_QUEUE_INFLATE);
		if (!phase.settled || *phase.settled != vb::StepResult::kSettled)
			sample.problems.push_back("inflate: the driver did not settle at the target");
		if (inflated.device.actual_wire_pages() != target)
			sample.problems.push_back(fmt::format("inflate: actual is {} pages, not {}",
							      inflated.device.actual_wire_pages(),
							      target));
		check_inflate(config, mode, target, sample.inflate, sample);
		sample.huge_mib_after_inflate = anon_huge_mib();
		sample.resident_mib_after_inflate = resident_mib(inflated.memory);
		return true;
	};
	hooks.deflated = [&](vbsim::SimMachine& deflated, const vbsim::BalloonPhase& phase) {
		sample.deflate = difference(phase, VB_QUEUE_DEFLATE);
		if (!phase.settled || *phase.settled != vb::StepResult::kSettled ||
		    deflated.device.actual_wire_pages() != 0)
			sample.problems.push_back(
				fmt::format("deflate: the driver did not settle at 0 "
					    "(actual {} pages)",
					    deflated.device.actual_wire_pages()));
		check_deflate(mode, target, sample.inflate, sample.deflate, sample);
		sample.huge_mib_after_deflate = anon_huge_mib();
		sample.resident_mib_after_deflate = resident_mib(deflated.memory);
		// The machine is fresh, so the cumulative counters cover exactly this run.
		if (phase.after.discard_failures)
			sample.problems.push_back(
				fmt::format("{} madvise calls failed", phase.after.discard_failures));
		if (phase.after.rejected)
			sample.problems.push_back(
				fmt::format("the device rejected {} inputs", phase.after.rejected));
		return true;
	};
	vbsim::InflateThenDeflateRun run = vbsim::inflate_then_deflate(
		*machine, static_cast<uint32_t>(target), kSettleTimeout, hooks);
	if (!run.refused.empty()) {
		sample.problems.push_back("the driver could not bind: " + run.refused);
		return sample;
	}
	for (std::string& problem : run.guest_problems)
		sample.problems.push_back(std::move(problem));
	return sample;
}

} // namespace vbbench
