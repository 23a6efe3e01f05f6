// SPDX-License-Identifier: GPL-2.0
//
// vballoon-bench-inflate: the VIRTIO_BALLOON_F_SG thread's experiment (virtio-dev, July 2017;
// docs/references.md) in the simulator. An 8 GiB guest with its RAM resident inflates 7 GiB
// and deflates back, once per mode (modes.h) and repetition, next to the machine's limit;
// prints how it ran, the tables and the ratios, and the JSON.
#include <CLI/CLI.hpp>
#include <fmt/core.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>

#include "balloon/balloon_profile.h"
#include "inflate_run.h"
#include "machine_info.h"
#include "modes.h"
#include "report.h"
#include "sweep.h"

namespace
{

using namespace vbbench;

constexpr uint64_t kGib = 1ull << 30;
constexpr uint64_t kHugePageBytes = 2ull << 20;
// What the guest keeps outside the balloon at least: its kernel area and some memory to run.
constexpr uint64_t kGuestReserveBytes = 64ull << 20;
// What this process needs beside guest RAM, and what the rest of the machine keeps.
constexpr uint64_t kHostMarginBytes = 1ull << 30;
constexpr unsigned kMaxReps = 100;

// A size in GiB, as bytes, when it is a positive whole number of 2 MiB pages.
std::optional<uint64_t> gib_to_bytes(double gib)
{
	if (!(gib > 0) || gib > 16384)
		return std::nullopt;
	const double huge_pages = gib * static_cast<double>(kGib / kHugePageBytes);
	if (std::fabs(huge_pages - std::round(huge_pages)) > 1e-6)
		return std::nullopt;
	return static_cast<uint64_t>(std::llround(huge_pages)) * kHugePageBytes;
}

int usage_error(const std::string& message)
{
	fmt::print(stderr, "vballoon-bench-inflate: {}\n", message);
	return 2;
}

// --sweep: every size in turn, each point skipped when its guest does not fit.
int run_sweep_command(std::vector<uint64_t> sizes_gib, unsigned reps, const BenchConfig& config,
		      const std::string& modes_list, const std::vector<Mode>& modes,
		      const std::string& json_path)
{
	std::sort(sizes_gib.begin(), sizes_gib.end());
	if (sizes_gib.front() == 0 || sizes_gib.back() > 1024)
		return usage_error("--sweep sizes are whole GiB from 1 to 1024");
	SweepOptions options;
	options.ram_gib = sizes_gib;
	options.reps = reps;
	options.host_margin_bytes = kHostMarginBytes;
	options.base = config;
	options.base.populate_threads = std::max(1u, read_machine_info().cpus);
	std::string error;
	options.modes = modes_list == "all" ? *parse_modes("pfn-merged,chunked,limit", &error) : modes;
	fmt::print("vballoon-bench-inflate --sweep: guests of {} GiB, balloon 7/8 of RAM, {} reps "
		   "({} from {} GiB on), backing {}, profile {}{}; load average before: {}\n",
		   fmt::join(sizes_gib, ", "), reps, std::max(1u, reps - 1),
		   options.fewer_reps_from_gib,
		   config.backing == vbsim::PageBacking::kTransparentHugePages ? "thp" : "small",
		   config.profile, config.pin_threads ? ", threads pinned (--pin-threads)" : "",
		   load_average());
	std::fflush(stdout);
	SweepResult result;
	try {
		result = run_sweep(options);
	} catch (const std::exception& e) {
		fmt::print(stderr, "vballoon-bench-inflate: {}\n", e.what());
		return 1;
	}
	fmt::print("{}load average after: {}\n", sweep_text(result), load_average());
	if (!json_path.empty()) {
		std::ofstream json_file(json_path);
		json_file << sweep_json(result).dump(2) << "\n";
		if (!json_file)
			return usage_error(fmt::format("--json {}: writing failed", json_path));
	}
	for (const SweepPoint& point : result.points)
		if (!point.problems.empty())
			return 1;
	return 0;
}

} // namespace

int main(int argc, char** argv)
{
	double ram_gib = 8;
	double balloon_gib = 7;
	unsigned reps = 3;
	std::string modes_list = "all";
	std::string backing = "thp";
	std::string profile = "qemu-7.2";
	std::string json_path;
	bool track_huge_pages = false;
	bool pin_threads = false;

	CLI::App app{"Inflate a simulated guest's balloon in every mode side by side, next to the "
		     "machine's limit (the 2017 VIRTIO_BALLOON_F_SG experiment)."};
	app.add_option("--ram-gib", ram_gib, "Guest RAM in GiB (a multiple of 2 MiB)")
		->capture_default_str();
	app.add_option("--balloon-gib", balloon_gib,
		       "How much to inflate, in GiB (a multiple of 2 MiB)")
		->capture_default_str();
	app.add_option("--reps", reps, "Repetitions of every mode (min and median are printed)")
		->capture_default_str();
	app.add_option(
		   "--modes", modes_list,
		   "Comma-separated modes, or all: pfn-per-page, pfn-merged, chunked, each also "
		   "with +guest-zero and +host-init, and limit")
		->capture_default_str();
	app.add_option("--backing", backing, "Guest RAM backing: thp or small (4 KiB pages)")
		->capture_default_str();
	app.add_option("--profile", profile,
		       "Device profile for every mode: qemu-7.2, firecracker, cloud-hypervisor, "
		       "full")
		->capture_default_str();
	app.add_flag("--track-huge-pages", track_huge_pages,
		     "The device discards a 2 MiB host page only once all of it is ballooned "
		     "(default: it discards what each request names, as QEMU and Firecracker do)");
	app.add_flag("--pin-threads", pin_threads,
		     "Keep the guest's worker on CPU 0 and the device thread on CPU 1, as a vCPU "
		     "and a host thread on CPUs of their own (default: the scheduler places them)");
	app.add_option("--json", json_path, "Also write the results as JSON to this file");
	std::vector<uint64_t> sweep_gib;
	app.add_option("--sweep", sweep_gib,
		       "Scale sweep instead: these guest sizes in GiB (e.g. 1,2,4,8,16), the "
		       "balloon 7/8 of each; modes default to pfn-merged,chunked,limit")
		->delimiter(',');
	CLI11_PARSE(app, argc, argv);

	BenchConfig config;
	const std::optional<uint64_t> ram_bytes = gib_to_bytes(ram_gib);
	if (!ram_bytes)
		return usage_error(fmt::format("--ram-gib {} is not a positive multiple of 2 MiB "
					       "(1/512 GiB)",
					       ram_gib));
	const std::optional<uint64_t> balloon_bytes = gib_to_bytes(balloon_gib);
	if (!balloon_bytes)
		return usage_error(
			fmt::format("--balloon-gib {} is not a positive multiple of 2 MiB "
				    "(1/512 GiB)",
				    balloon_gib));
	config.ram_bytes = *ram_bytes;
	config.balloon_bytes = *balloon_bytes;
	if (config.balloon_bytes + kGuestReserveBytes > config.ram_bytes)
		return usage_error(fmt::format("--balloon-gib {} leaves the {} GiB guest less than "
					       "{} MiB outside the balloon",
					       balloon_gib, ram_gib, kGuestReserveBytes >> 20));
	if ((config.balloon_bytes >> 12) > UINT32_MAX)
		return usage_error("--balloon-gib is beyond what the 32-bit num_pages can ask for");
	if (reps < 1 || reps > kMaxReps)
		return usage_error(
			fmt::format("--reps {} is not between 1 and {}", reps, kMaxReps));
	if (backing == "thp")
		config.backing = vbsim::PageBacking::kTransparentHugePages;
	else if (backing == "small")
		config.backing = vbsim::PageBacking::kSmallPages;
	else
		return usage_error(fmt::format("--backing {} is neither thp nor small", backing));
	if (!vbsim::profile_by_name(profile))
		return usage_error(fmt::format("--profile {} is not one of qemu-7.2, firecracker, "
					       "cloud-hypervisor, full",
					       profile));
	config.profile = profile;
	if (track_huge_pages)
		config.host_page_bytes = kHugePageBytes;
	if (pin_threads && read_machine_info().cpus < 2)
		return usage_error("--pin-threads needs at least 2 CPUs");
	config.pin_threads = pin_threads;
	std::string error;
	const std::optional<std::vector<Mode>> modes = parse_modes(modes_list, &error);
	if (!modes)
		return usage_error("--modes: " + error);
	if (!sweep_gib.empty())
		return run_sweep_command(sweep_gib, reps, config, modes_list, *modes, json_path);
	const uint64_t available = mem_available_bytes();
	if (available && config.ram_bytes + kHostMarginBytes > available)
		return usage_error(fmt::format(
			"a {} GiB guest needs {:.1f} GiB free, this machine has "
			"{:.1f} GiB available",
			ram_gib, static_cast<double>(config.ram_bytes + kHostMarginBytes) / kGib,
			static_cast<double>(available) / kGib));
	std::ofstream json_file;
	if (!json_path.empty()) {
		json_file.open(json_path);
		if (!json_file)
			return usage_error(
				fmt::format("--json {}: cannot open for writing", json_path));
	}

	Report report;
	report.config = config;
	report.reps = reps;
	report.populate_method = detect_populate_method();
	report.machine = read_machine_info();
	// Population is faulting, which scales over CPUs; the run itself is what it is.
	config.populate_threads = std::max(1u, report.machine.cpus);
	report.config.populate_threads = config.populate_threads;
	report.load_before = load_average();
	for (const Mode& mode : *modes)
		report.modes.push_back({mode, {}});
	fmt::print("{}", header_text(report));
	std::fflush(stdout);

	const auto start = std::chrono::steady_clock::now();
	const size_t count = report.modes.size();
	try {
		for (unsigned rep = 0; rep < reps; rep++) {
			for (size_t i = 0; i < count; i++) {
				ModeResults& results = report.modes[(i + rep) % count];
				RunSample sample = run_mode(config, results.mode);
				fmt::print(stderr,
					   "[rep {}/{}, {:>2}/{}] {:<23} populate {:>6.0f} ms, "
					   "inflate "
					   "{:>8.1f} ms, deflate {:>8.1f} ms{}\n",
					   rep + 1, reps, i + 1, count, results.mode.name,
					   sample.populate_ms, sample.inflate.ms, sample.deflate.ms,
					   sample.problems.empty()
						   ? ""
						   : "  (PROBLEMS, listed at the end)");
				results.runs.push_back(std::move(sample));
			}
		}
	} catch (const std::exception& e) {
		fmt::print(stderr, "vballoon-bench-inflate: {}\n", e.what());
		return 1;
	}
	report.run_seconds =
		std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	report.load_after = load_average();

	fmt::print("{}", results_text(report));
	if (json_file.is_open()) {
		json_file << to_json(report).dump(2) << "\n";
		if (!json_file)
			fmt::print(stderr, "vballoon-bench-inflate: writing {} failed\n",
				   json_path);
		else
			fmt::print("JSON written to {}\n", json_path);
	}
	// Timing never fails the run; a mode that did not do what it claims to does.
	return all_problems(report).empty() ? 0 : 1;
}
