// SPDX-License-Identifier: GPL-2.0
//
// vballoon-bench-device-init: what the DEVICE_INIT proposals save the simulated guest. Two
// scenarios, each run with the guest opted in (device_init: bits 6 and 7 negotiated) and
// without (the baseline, measured in the same run); the ratio opted-in / baseline is printed
// at the end.
//
//   deflate  an init_on_free guest deflates 128 MiB it had ballooned: with bit 7 the
//            device's bitmap said the pages read zero, so the guest does not zero them.
//            Timed: the deflate (settle_at(0)).
//   reuse    an init_on_alloc guest takes back memory that free page reporting handed to
//            the host: with bit 6 the report's used length said the host zeroed it, so the
//            allocation does not zero it again. Timed: the allocation of the reported memory.
//
// Both runs of a scenario do the same discards and the same ring traffic; they differ only
// in the guest's own zeroing, which is what a guest kernel with mst's mm changes would save.
// The machine has 2 cores shared with other work: read the ratio, not the absolute times.
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>

#include "machine/sim_machine.h"

namespace
{

using namespace std::chrono_literals;

constexpr uint64_t kRamBytes = 256ull << 20;
constexpr uint32_t kBalloonPages = 32768; // 128 MiB
constexpr auto kTimeout = 60s;

// Mean seconds per iteration, by scenario and opt-in.
std::map<std::string, std::map<bool, double>> g_seconds;

double seconds_since(std::chrono::steady_clock::time_point start)
{
	return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void check(bool ok, const char* what)
{
	if (!ok)
		throw std::runtime_error(what);
}

void BM_Deflate(benchmark::State& state)
{
	const bool opt_in = state.range(0) != 0;
	vbsim::MachineConfig config;
	config.ram_bytes = kRamBytes;
	config.device.device_init_on_inflate = true;
	config.guest.free_policy = {true, 0}; // init_on_free
	config.guest.device_init = opt_in;
	vbsim::SimMachine machine(config);
	check(machine.boot().empty(), "boot");
	check(bool(machine.guest.negotiated_features() & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE)) ==
		      opt_in,
	      "bit 7 negotiated as asked");

	double total = 0;
	const uint64_t written_before =
		machine.guest.os().counters().pages_initialised_by_guest.load();
	for (auto _ : state) {
		check(machine.settle_at(kBalloonPages, kTimeout) == vb::StepResult::kSettled,
		      "inflate");
		const auto start = std::chrono::steady_clock::now();
		check(machine.settle_at(0, kTimeout) == vb::StepResult::kSettled, "deflate");
		const double seconds = seconds_since(start);
		state.SetIterationTime(seconds);
		total += seconds;
	}
	const uint64_t written =
		machine.guest.os().counters().pages_initialised_by_guest.load() - written_before;
	state.counters["guest_zeroed_pages_per_deflate"] =
		double(written) / double(state.iterations());
	check(machine.guest_problems().empty(), "guest accounting");
	g_seconds["deflate 128 MiB (init_on_free guest, bit 7)"][opt_in] =
		total / double(state.iterations());
}

bool all_free_reported(vbsim::SimMachine& machine)
{
	auto& allocator = machine.guest.allocator();
	return machine.guest.wait_for(
		[&] {
			return allocator.isolated_pages() == 0 &&
			       allocator.reported_pages() == allocator.counts().free;
		},
		kTimeout);
}

void BM_ReuseReported(benchmark::State& state)
{
	const bool opt_in = state.range(0) != 0;
	vbsim::MachineConfig config;
	config.ram_bytes = kRamBytes;
	config.device.profile = vbsim::qemu_7_2_profile(VB_FEATURE(VB_F_PAGE_REPORTING));
	config.device.device_init_reported = vbsim::OnOffAuto::kAuto;
	config.guest.page_reporting = true;
	config.guest.zero_on_alloc = true; // init_on_alloc
	config.guest.device_init = opt_in;
	vbsim::SimMachine machine(config);
	check(machine.boot().empty(), "boot");
	check(bool(machine.guest.negotiated_features() & VB_FEATURE(VB_F_DEVICE_INIT_REPORTED)) ==
		      opt_in,
	      "bit 6 negotiated as asked");
	check(all_free_reported(machine), "boot reports");

	double total = 0;
	const auto& counters = machine.guest.os().counters();
	const uint64_t zeroed_before = counters.pages_zeroed_on_alloc.load();
	// Nearly all of it: the allocation never has to reclaim.
	const uint64_t pages = machine.guest.allocator().counts().free / 64 * 63;
	for (auto _ : state) {
		const auto start = std::chrono::steady_clock::now();
		vbsim::UserMemory user = machine.guest.allocate_user_memory(pages, std::nullopt);
		const double seconds = seconds_since(start);
		check(!user.oom_killed, "allocation");
		state.SetIterationTime(seconds);
		total += seconds;
		machine.guest.free_user_memory(user);
		check(all_free_reported(machine), "reports");
	}
	state.counters["guest_zeroed_pages_per_reuse"] =
		double(counters.pages_zeroed_on_alloc.load() - zeroed_before) /
		double(state.iterations());
	check(machine.guest_problems().empty(), "guest accounting");
	g_seconds["reuse reported memory (init_on_alloc guest, bit 6)"][opt_in] =
		total / double(state.iterations());
}

BENCHMARK(BM_Deflate)
	->ArgName("device_init")
	->Arg(0)
	->Arg(1)
	->UseManualTime()
	->Unit(benchmark::kMillisecond)
	->MinTime(1.0);
BENCHMARK(BM_ReuseReported)
	->ArgName("device_init")
	->Arg(0)
	->Arg(1)
	->UseManualTime()
	->Unit(benchmark::kMillisecond)
	->MinTime(1.0);

} // namespace

int main(int argc, char** argv)
{
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	std::printf("\nHost-initialised pages against the guest zeroing them itself, same run "
		    "(lower is better):\n");
	for (const auto& [scenario, runs] : g_seconds) {
		if (runs.count(false) && runs.count(true) && runs.at(false) > 0)
			std::printf("  %-66s %6.1f ms -> %6.1f ms  ratio %.3f\n", scenario.c_str(),
				    runs.at(false) * 1e3, runs.at(true) * 1e3,
				    runs.at(true) / runs.at(false));
	}
	return 0;
}
