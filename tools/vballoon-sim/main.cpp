// SPDX-License-Identifier: GPL-2.0
//
// vballoon-sim: the driver core in a simulated guest against the simulated host device.
// The default scenario inflates and deflates a 2 GiB guest and prints what the host saw.
#include <CLI/CLI.hpp>
#include <fmt/core.h>

#include <cstdio>
#include <nlohmann/json.hpp>

#include "scenario.h"

int main(int argc, char** argv)
{
	vbsim::ScenarioOptions options;
	std::string profile = "qemu-7.2";
	std::string discard = "merge";
	std::string backing = "thp";
	bool json = false;

	CLI::App app{"Inflate and deflate a simulated guest's balloon and report what the host saw."};
	app.add_option("--ram-mib", options.ram_mib, "Guest RAM in MiB")->check(CLI::Range(64u, 65536u));
	app.add_option("--balloon-mib", options.balloon_mib,
		       "Balloon target in MiB (default: half of RAM)")
		->check(CLI::Range(1u, 65536u));
	app.add_option("--dirty-mib", options.dirty_mib,
		       "MiB the guest writes and frees before inflating (default: 3/4 of RAM)")
		->check(CLI::Range(0u, 65536u));
	app.add_option("--profile", profile, "Device profile")
		->check(CLI::IsMember({"qemu-7.2", "firecracker", "cloud-hypervisor", "full"}));
	app.add_option("--discard", discard, "How the device discards inflated pages")
		->check(CLI::IsMember({"merge", "per-page"}));
	app.add_option("--backing", backing, "Guest RAM backing")->check(CLI::IsMember({"thp", "small"}));
	app.add_option("--chunk-order", options.max_chunk_order,
		       "Largest block the driver allocates (0: a page at a time, as Linux)")
		->check(CLI::Range(0u, 10u));
	app.add_flag("--chunked", options.chunked, "Offer and use chunk descriptors (VB_F_X_CHUNKED)");
	app.add_flag("--json", json, "Print the result as JSON");
	CLI11_PARSE(app, argc, argv);

	options.profile = profile;
	options.discard_mode = discard == "merge" ? vbsim::DiscardMode::kMergeRuns : vbsim::DiscardMode::kPerPage;
	options.backing = backing == "thp" ? vbsim::PageBacking::kTransparentHugePages : vbsim::PageBacking::kSmallPages;
	if (!options.balloon_mib)
		options.balloon_mib = options.ram_mib / 2;
	if (!options.dirty_mib)
		options.dirty_mib = options.ram_mib * 3 / 4;
	if (options.balloon_mib >= options.ram_mib || options.dirty_mib >= options.ram_mib) {
		fmt::print(stderr, "error: --balloon-mib and --dirty-mib must be below --ram-mib ({})\n",
			   options.ram_mib);
		return 2;
	}

	vbsim::ScenarioResult result;
	std::string error = vbsim::run_inflate_deflate(options, &result);
	if (!error.empty()) {
		fmt::print(stderr, "error: {}\n", error);
		return 1;
	}
	if (json)
		fmt::print("{}\n", vbsim::to_json(options, result).dump(2));
	else
		fmt::print("{}", vbsim::to_text(options, result));
	return result.problems.empty() ? 0 : 1;
}
