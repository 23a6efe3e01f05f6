// SPDX-License-Identifier: GPL-2.0
//
// vballoon-bench-migration: the live-migration model's figures for each workload and
// strategy on one guest size, without the balloon device (hints come from the direct
// hinter, reports from discarding the allocator's free blocks). The `vballoon-sim compare`
// command runs the same engine on the full machine (device and driver core).
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <memory>
#include <string>
#include <vector>

#include "buddy_allocator.h"
#include "memory/guest_memory.h"
#include "migration/direct_hinter.h"
#include "migration/host_profile.h"
#include "migration/migration.h"
#include "migration/workload.h"
#include "migration/zero_page.h"

using namespace vbsim;
using namespace vbsim::migration;

namespace
{

constexpr uint64_t kKernelPages = 1024; // 4 MiB, as the simulated guest's kernel area

struct Options {
	uint64_t ram_mib = 8192;
	std::vector<std::string> workloads = {"fresh", "freed", "busy"};
	std::vector<std::string> strategies;
	double link_gbit = 0;
	unsigned threads = 2;
	bool legacy_zero = false;
	bool hot_zero_page = false;
	double downtime_ms = 300;
	uint64_t working_set_mib = 192;
	double freed_fraction = 0.75;
	double busy_mib_per_s = vbw_default_params().churn_bytes_per_second / (1 << 20);
};

// Free page reporting as the guest and device do it: free blocks taken, discarded, given back.
void report_free_pages(GuestMemory& memory, BuddyAllocator& allocator)
{
	std::vector<uint64_t> blocks;
	while (auto block = allocator.allocate(BuddyAllocator::kMaxOrder))
		blocks.push_back(*block);
	for (uint64_t block : blocks) {
		if (memory.discard(block * 4096, 4096ull << BuddyAllocator::kMaxOrder) != 0)
			throw std::runtime_error("discard failed");
		allocator.free_run(block, 1ull << BuddyAllocator::kMaxOrder);
	}
}

MigrationResult run_one(const Options& options, WorkloadKind kind, Strategy strategy)
{
	GuestMemory memory({.size_bytes = options.ram_mib << 20, .backing = PageBacking::kTransparentHugePages});
	BuddyAllocator allocator(kKernelPages, memory.size() / 4096 - kKernelPages);
	{
		std::vector<uint8_t> kernel(kKernelPages * 4096, 0x5a);
		if (!memory.write(0, kernel.data(), kernel.size()))
			throw std::runtime_error("kernel area");
	}
	auto user = make_allocator_user_memory(memory, allocator);
	WorkloadConfig wc;
	wc.name = workload_name(kind);
	wc.params = vbw_default_params();
	wc.params.working_set_bytes = options.working_set_mib << 20;
	wc.params.freed_fraction = options.freed_fraction;
	wc.params.churn_bytes_per_second = options.busy_mib_per_s * (1 << 20);
	vbw_keep_preset_parts(preset_of(kind), &wc.params);
	auto workload = make_workload(wc, *user);
	workload->prepare();
	if (uses_reports(strategy))
		report_free_pages(memory, allocator); // the guest reported its free memory before
	DirectHinter hinter(allocator, false);
	MigrationMachine machine;
	machine.memory = &memory;
	machine.always_dirty = {{0, kKernelPages}};
	machine.pages_in_use = [&] { return workload->pages_in_use(); };
	machine.hints = &hinter;
	machine.set_free_page_observer = [&](FreePageEvents* o) { hinter.set_observer(o); };
	machine.guest_cpu_ms = [&] { return hinter.guest_cpu_ms(); };
	machine.workload = workload.get();
	machine.pause_guest = [] {}; // nothing but the workload runs: the kernel area is verified too
	machine.resume_guest = [] {};
	MigrationConfig mc;
	mc.strategy = strategy;
	// The engine's own figures: the `ideal` host (hints at once, multifd zero detection).
	apply_host_profile(*find_host_profile("ideal"), options.threads, mc);
	mc.link_bytes_per_second = options.link_gbit > 0 ? options.link_gbit * 1e9 / 8 : kUnlimitedLink;
	mc.downtime_limit_ms = options.downtime_ms;
	if (options.hot_zero_page)
		mc.untouched_page_reads = UntouchedPageReads::kSharedZeroPage;
	if (options.legacy_zero)
		mc.zero_detection_place = ZeroDetectionPlace::kMigrationThread;
	workload->start();
	MigrationResult r = migrate(machine, mc);
	workload->stop();
	return r;
}

} // namespace

int main(int argc, char** argv)
{
	Options options;
	CLI::App app{"The live-migration model per workload and strategy"};
	app.add_option("--ram-mib", options.ram_mib, "guest RAM in MiB");
	app.add_option("--workload", options.workloads, "fresh, freed, busy");
	app.add_option("--strategy", options.strategies, "default: all");
	app.add_option("--link-gbit", options.link_gbit,
		       "link in Gbit/s (default: unlimited, as the 2018 hinting threads' 100G)");
	app.add_option("--threads", options.threads, "sender threads");
	app.add_flag("--legacy-zero", options.legacy_zero, "zero detection in one thread (QEMU < 9.0)");
	app.add_flag("--hot-zero-page", options.hot_zero_page,
		     "untouched pages read from a cache-hot zero page (default: at memory speed)");
	app.add_option("--downtime-ms", options.downtime_ms, "downtime limit");
	app.add_option("--working-set-mib", options.working_set_mib, "the booted guest's working set");
	app.add_option("--freed-fraction", options.freed_fraction, "freed: share of RAM written then freed");
	app.add_option("--busy-mib-per-s", options.busy_mib_per_s, "busy: arena turnover (allocate+write+free), MiB per second of model time");
	CLI11_PARSE(app, argc, argv);

	std::vector<Strategy> strategies;
	for (const std::string& name : options.strategies) {
		auto s = parse_strategy(name);
		if (!s) {
			fmt::print(stderr, "unknown strategy {}\n", name);
			return 2;
		}
		strategies.push_back(*s);
	}
	if (strategies.empty())
		strategies.assign(all_strategies().begin(), all_strategies().end());

	fmt::print("guest {} MiB, {} sender threads, zero check {} ({}), untouched pages {}, "
		   "working set {} MiB, "
		   "link {}\n",
		   options.ram_mib, options.threads, zero_check_kind(),
		   options.legacy_zero ? "legacy: one thread" : "multifd",
		   options.hot_zero_page ? "from a hot zero page" : "at memory speed",
		   options.working_set_mib,
		   options.link_gbit > 0 ? fmt::format("{} Gbit/s", options.link_gbit)
					 : "unlimited (as the 2018 hinting threads)");
	fmt::print("{:<7} {:<19} {:>9} {:>8} {:>9} {:>8} {:>9} {:>9} {:>8} {:>7} {:>6} {:>8}\n", "work", "strategy",
		   "MiB sent", "pages", "zero", "hinted", "reported", "total ms", "down ms", "hostCPU", "rounds",
		   "verified");
	int failures = 0;
	for (const std::string& wname : options.workloads) {
		auto kind = parse_workload(wname);
		if (!kind) {
			fmt::print(stderr, "unknown workload {}\n", wname);
			return 2;
		}
		for (Strategy s : strategies) {
			MigrationResult r = run_one(options, *kind, s);
			fmt::print("{:<7} {:<19} {:>9.1f} {:>8} {:>9} {:>8} {:>9} {:>9.1f} {:>8.1f} {:>7.1f} {:>6} {:>8}\n",
				   wname, strategy_name(s), double(r.bytes_sent) / (1 << 20), r.pages_sent,
				   r.zero_pages, r.pages_skipped_hinted, r.pages_skipped_reported, r.total_ms,
				   r.downtime_ms, r.host_cpu_ms, r.rounds, r.verified ? "yes" : "NO");
			if (!r.verified) {
				fmt::print(stderr, "  {}\n", r.error);
				failures++;
			}
		}
	}
	return failures == 0 ? 0 : 1;
}
