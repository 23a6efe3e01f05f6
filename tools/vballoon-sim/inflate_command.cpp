// SPDX-License-Identifier: GPL-2.0
#include "inflate_command.h"

#include <fmt/core.h>

#include <cstdio>
#include <memory>

#include "scenario.h"

namespace vbsim
{

namespace
{

struct InflateArguments {
	ScenarioOptions options;
	std::string discard = "merge";
	std::string backing = "thp";
	bool json = false;
};

int run_inflate(InflateArguments& args)
{
	ScenarioOptions& options = args.options;
	options.discard_mode = args.discard == "merge" ? DiscardMode::kMergeRuns : DiscardMode::kPerPage;
	options.backing = args.backing == "thp" ? PageBacking::kTransparentHugePages : PageBacking::kSmallPages;
	if (!options.balloon_mib)
		options.balloon_mib = options.ram_mib / 2;
	if (!options.dirty_mib)
		options.dirty_mib = options.ram_mib * 3 / 4;
	if (options.balloon_mib >= options.ram_mib || options.dirty_mib >= options.ram_mib) {
		fmt::print(stderr, "error: --balloon-mib and --dirty-mib must be below --ram-mib ({})\n",
			   options.ram_mib);
		return 2;
	}

	ScenarioResult result;
	std::string error = run_inflate_deflate(options, &result);
	if (!error.empty()) {
		fmt::print(stderr, "error: {}\n", error);
		return 1;
	}
	if (args.json)
		fmt::print("{}\n", to_json(options, result).dump(2));
	else
		fmt::print("{}", to_text(options, result));
	return result.problems.empty() ? 0 : 1;
}

} // namespace

void add_inflate_command(CLI::App& app, int* exit_status)
{
	// The subcommand's callback runs after parsing, while `app` (and so this) still lives.
	auto args = std::make_shared<InflateArguments>();
	CLI::App* cmd = app.add_subcommand(
		"inflate", "Inflate and deflate a simulated guest's balloon and report what the host saw.");
	ScenarioOptions& options = args->options;
	cmd->add_option("--ram-mib", options.ram_mib, "Guest RAM in MiB")
		->check(CLI::Range(64u, 65536u))
		->capture_default_str();
	cmd->add_option("--balloon-mib", options.balloon_mib,
			"Balloon target in MiB (default: half of RAM)")
		->check(CLI::Range(1u, 65536u));
	cmd->add_option("--dirty-mib", options.dirty_mib,
			"MiB the guest writes and frees before inflating (default: 3/4 of RAM)")
		->check(CLI::Range(0u, 65536u));
	cmd->add_option("--profile", options.profile, "Device profile")
		->check(CLI::IsMember({"qemu-7.2", "firecracker", "cloud-hypervisor", "full"}))
		->capture_default_str();
	cmd->add_option("--discard", args->discard, "How the device discards inflated pages")
		->check(CLI::IsMember({"merge", "per-page"}))
		->capture_default_str();
	cmd->add_option("--backing", args->backing, "Guest RAM backing")
		->check(CLI::IsMember({"thp", "small"}))
		->capture_default_str();
	cmd->add_option("--chunk-order", options.max_chunk_order,
			"Largest block the driver allocates (0: a page at a time, as Linux)")
		->check(CLI::Range(0u, 10u))
		->capture_default_str();
	cmd->add_flag("--chunked", options.chunked, "Offer and use chunk descriptors (VB_F_X_CHUNKED)");
	cmd->add_flag("--json", args->json, "Print the result as JSON");
	cmd->callback([args, exit_status] { *exit_status = run_inflate(*args); });
}

} // namespace vbsim
