// SPDX-License-Identifier: GPL-2.0
#include "squeeze_command.h"

#include <fmt/core.h>

#include <cstdio>
#include <memory>
#include <string>

#include "machine/squeeze.h"

namespace vbsim
{

namespace
{

struct SqueezeArguments {
	SqueezeOptions options;
	std::string governor = "both";
	bool every_second = false;
};

struct Summary {
	uint64_t refaults = 0;
	uint64_t throughput_permille = 0;
};

Summary summarise(const SqueezeResult& result, size_t from, size_t to)
{
	Summary summary;
	if (to <= from)
		return summary;
	for (size_t i = from; i < to; i++) {
		summary.refaults += result.seconds[i].refaults;
		summary.throughput_permille += result.seconds[i].throughput_permille;
	}
	summary.throughput_permille /= to - from;
	return summary;
}

int run_squeeze_command(SqueezeArguments& args)
{
	const SqueezeOptions& base = args.options;
	fmt::print("squeeze: {} MiB guest (min watermark as Linux 6.1), workload {} MiB anonymous "
		   "+ {} MiB file "
		   "working set ({}), {} MiB cold cache; a refault costs {} page touches; "
		   "DEFLATE_ON_OOM {}\n",
		   base.ram_mib, base.anon_mib, base.file_mib, base.mapped_file ? "mapped" : "read",
		   base.cold_cache_mib, base.refault_cost, base.deflate_on_oom ? "on" : "off");
	std::string targets;
	for (uint64_t t : base.target_mib)
		targets += (targets.empty() ? "" : ", ") + std::to_string(t);
	fmt::print("targets (MiB): {}, {} simulated seconds each, after {} seconds of baseline\n\n",
		   targets, base.step_seconds, base.baseline_seconds);

	int status = 0;
	for (bool governor : {false, true}) {
		if ((governor && args.governor == "off") || (!governor && args.governor == "on"))
			continue;
		SqueezeOptions options = base;
		options.governor = governor;
		SqueezeResult result;
		std::string error = run_squeeze(options, &result);
		if (!error.empty()) {
			fmt::print(stderr, "error: {}\n", error);
			return 1;
		}
		fmt::print("governor {}\n", governor ? "on" : "off");
		fmt::print("{:>10} {:>9} {:>13} {:>14} {:>13}\n", "target MiB", "seconds",
			   "balloon MiB", "refaults/s", "throughput");
		const Summary baseline = summarise(result, 0, base.baseline_seconds);
		fmt::print("{:>10} {:>9} {:>13} {:>14} {:>12.1f}%\n", "baseline",
			   base.baseline_seconds, 0,
			   baseline.refaults / (base.baseline_seconds ? base.baseline_seconds : 1),
			   baseline.throughput_permille / 10.0);
		for (size_t step = 0; step < base.target_mib.size(); step++) {
			const size_t from = base.baseline_seconds + step * base.step_seconds;
			const size_t to = from + base.step_seconds;
			const Summary summary = summarise(result, from, to);
			fmt::print("{:>10} {:>9} {:>13.1f} {:>14} {:>12.1f}%\n",
				   base.target_mib[step], base.step_seconds,
				   result.seconds[to - 1].balloon_pages / 256.0,
				   summary.refaults / base.step_seconds,
				   summary.throughput_permille / 10.0);
		}
		if (args.every_second) {
			fmt::print("\n{:>7} {:>10} {:>13} {:>10} {:>8} {:>11}\n", "second",
				   "target", "balloon MiB", "refaults", "stalls", "throughput");
			for (const SqueezeSecond& s : result.seconds)
				fmt::print("{:>7} {:>10} {:>13.1f} {:>10} {:>8} {:>10.1f}%\n",
					   s.second, s.target_mib, s.balloon_pages / 256.0,
					   s.refaults, s.alloc_stalls,
					   s.throughput_permille / 10.0);
		}
		fmt::print("actual {:.1f} MiB of a {:.1f} MiB target; direction changes {}; given "
			   "back {:.1f} MiB; "
			   "held steps {}; floor {:.1f} MiB; OOM notifications {}\n\n",
			   result.actual_pages / 256.0, result.target_pages / 256.0,
			   result.direction_changes, result.give_back_wire_pages / 256.0,
			   result.held_steps, result.floor_pages / 256.0, result.oom_notifications);
		for (const std::string& problem : result.problems) {
			fmt::print(stderr, "problem: {}\n", problem);
			status = 1;
		}
	}
	return status;
}

} // namespace

void add_squeeze_command(CLI::App& app, int* exit_status)
{
	auto args = std::make_shared<SqueezeArguments>();
	CLI::App* cmd = app.add_subcommand(
		"squeeze", "Step a guest's balloon target past its workload's working set, the "
			   "pressure governor "
			   "off and on, and print the workload's throughput and refaults.");
	SqueezeOptions& options = args->options;
	cmd->add_option("--ram-mib", options.ram_mib, "Guest RAM in MiB")
		->check(CLI::Range(128u, 16384u))
		->capture_default_str();
	cmd->add_option("--anon-mib", options.anon_mib, "The workload's anonymous memory")
		->capture_default_str();
	cmd->add_option("--file-mib", options.file_mib,
			"The workload's file working set, read every second")
		->capture_default_str();
	cmd->add_option("--cold-cache-mib", options.cold_cache_mib,
			"Page cache read at boot, never again")
		->capture_default_str();
	cmd->add_option("--refault-cost", options.refault_cost,
			"Page touches of work one refault costs")
		->capture_default_str();
	cmd->add_flag("--mapped-file", options.mapped_file,
		      "The workload maps its file working set (mmap) instead of reading it");
	cmd->add_option("--targets-mib", options.target_mib, "Balloon targets, one after the other")
		->capture_default_str();
	cmd->add_option("--step-seconds", options.step_seconds, "Simulated seconds per target")
		->check(CLI::Range(1u, 3600u))
		->capture_default_str();
	cmd->add_option("--floor-mib", options.floor_mib,
			"The governor's policy floor (0: derived)")
		->capture_default_str();
	cmd->add_option("--governor", args->governor,
			"Run with the pressure governor off, on, or both")
		->check(CLI::IsMember({"off", "on", "both"}))
		->capture_default_str();
	cmd->add_flag("!--no-deflate-on-oom", options.deflate_on_oom,
		      "The device does not offer DEFLATE_ON_OOM (no give-back)");
	cmd->add_flag("--every-second", args->every_second, "Print every simulated second");
	cmd->callback([args, exit_status] { *exit_status = run_squeeze_command(*args); });
}

} // namespace vbsim
