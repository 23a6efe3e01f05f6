// SPDX-License-Identifier: GPL-2.0
#include "compare_command.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "comparison_report.h"
#include "comparison_run.h"
#include "migration/host_profile.h"
#include "progress_bar.h"
#include "workload_file.h"

extern char** environ;

namespace vbsim
{

namespace
{

constexpr const char* kDebianPython = "/usr/bin/python3";

// 256 GiB, twice the seeds' 128 GB: the largest guest every default strategy was run at
// (docs/migration-model.md, "Large guests"). Memory does not set it: guest RAM is a
// MAP_NORESERVE mapping that costs what the workload writes, and per guest GiB the host pays
// about 4.5 MiB (the simulated guest's page frames, 15 bytes a page, the residency snapshot,
// the bitmaps), so fresh at 1 TiB needs 4.9 GB. Time does: at 1 TiB the guest's free page
// reporting does not settle within compare's 60 s wait, and a zero-detect run takes minutes.
// freed holds what it wrote (0.76 GiB per guest GiB), so on a 24 GiB host it stops near
// 30 GiB, whatever this limit says.
constexpr uint32_t kLargestGuestMib = 256 * 1024;

struct CompareArguments {
	uint32_t ram_mib = 8192;
	std::vector<std::string> workloads = {"fresh", "freed", "busy"};
	std::vector<std::string> strategies;
	std::string host = "qemu-7.2";
	// 10 Gbit/s: the link most hosts migrate over (10 GbE is still the common server and
	// migration network; 25 GbE newer racks, shown on the crossover line).
	std::string link_gbit = "10";
	// None: libvirt's default (QEMU's own is 128 MiB/s, which libvirt lifts).
	std::string max_bandwidth_gbit = "unlimited";
	unsigned threads = 0; // the host profile's
	unsigned multifd_channels = 0;	 // 0: not asked (multifd with --threads >= 2)
	std::string zero_page_detection; // empty: the host's
	std::string stream_to;		 // empty: the host's single stream
	double downtime_ms = 300; // QEMU's downtime-limit default
	std::string untouched = "populated";
	unsigned repeat = 3;
	bool shuffle_free_list = false;
	bool pre_5_10_free_order = false;
	std::string json_path;
	std::string csv_path;
	std::string plot_path;
	// A described workload: a file, then settings over it.
	std::string workload_file;
	std::vector<std::string> workload_settings;
	// Another host's per-page costs: "ZERO_NS,SEND_NS", or a JSON file with them.
	std::string host_costs;
	std::string host_costs_file;
	bool workloads_given = false; // --workload on the command line
	bool ram_given = false;	      // --ram-mib on the command line
};

constexpr uint32_t kSmallestGuestMib = 64;

// Opens an output before the runs start, so a bad path costs nothing but the message.
bool open_output(const std::string& path, std::ofstream& out)
{
	if (path.empty())
		return true;
	out.open(path, std::ios::out | std::ios::trunc);
	if (!out) {
		fmt::print(stderr, "vballoon-sim compare: cannot write {}: {}\n", path, std::strerror(errno));
		return false;
	}
	return true;
}

bool finish_output(const std::string& path, std::ofstream& out, const std::string& text)
{
	if (path.empty())
		return true;
	out << text;
	out.close();
	if (!out) {
		fmt::print(stderr, "vballoon-sim compare: writing {} failed\n", path);
		return false;
	}
	return true;
}

// tools/plot_comparison.py on the JSON results; false (and why on stderr) when it fails.
bool plot(const std::string& json_path, const std::string& plot_path)
{
	const std::string script = VB_PLOT_SCRIPT;
	// matplotlib comes from Debian (python3-matplotlib): Debian's interpreter has it, one
	// earlier on PATH (a virtualenv, pyenv) may not.
	const char* python = access(kDebianPython, X_OK) == 0 ? kDebianPython : "python3";
	std::vector<std::string> args = {python, script, json_path, plot_path};
	std::vector<char*> argv;
	for (std::string& arg : args)
		argv.push_back(arg.data());
	argv.push_back(nullptr);
	pid_t pid = 0;
	int error = posix_spawnp(&pid, python, nullptr, nullptr, argv.data(), environ);
	if (error != 0) {
		fmt::print(stderr, "vballoon-sim compare: cannot run python3 for the plot: {}\n",
			   std::strerror(error));
		return false;
	}
	int status = 0;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
	}
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fmt::print(stderr, "vballoon-sim compare: {} failed; is python3-matplotlib installed "
				   "(ci/install-deps.sh)?\n", script);
		return false;
	}
	return true;
}

// "unlimited" or Gbit/s (the validator accepted it).
double parse_link(const std::string& text)
{
	if (text == "unlimited")
		return migration::kUnlimitedLink;
	return std::stod(text) * 1e9 / 8;
}

std::string check_link(const std::string& text)
{
	if (text == "unlimited")
		return "";
	try {
		size_t used = 0;
		const double gbit = std::stod(text, &used);
		if (used == text.size() && gbit >= 0.01 && gbit <= 10000)
			return "";
	} catch (const std::exception&) {
	}
	return "a bandwidth must be a number of Gbit/s between 0.01 and 10000, or unlimited (got " +
	       text + ")";
}

// The workloads to run: the presets asked for, then the described one. Returns "" or why
// not (a bad description: nothing runs). A description's ram_mib sets the guest's RAM
// unless --ram-mib does.
std::string workloads_to_run(CompareArguments& args,
			     std::vector<migration::WorkloadConfig>& workloads)
{
	const bool described = !args.workload_file.empty() || !args.workload_settings.empty();
	WorkloadDescription description;
	if (!args.workload_file.empty())
		if (std::string error = read_workload_file(args.workload_file, kSmallestGuestMib,
							   kLargestGuestMib, description);
		    !error.empty())
			return error;
	for (const std::string& setting : args.workload_settings)
		if (std::string error = apply_workload_setting(setting, description);
		    !error.empty())
			return "--workload-set " + error;
	if (described && description.ram_mib && !args.ram_given)
		args.ram_mib = *description.ram_mib;
	const uint64_t ram_bytes = uint64_t{args.ram_mib} << 20;
	// Described alone, unless --workload asked for presets too.
	if (!described || args.workloads_given)
		for (const std::string& name : args.workloads)
			workloads.push_back(migration::workload_for_ram(
				*migration::parse_workload(name), ram_bytes));
	if (described) {
		if (std::string error = check_workload(description, args.ram_mib); !error.empty())
			return error;
		for (const migration::WorkloadConfig& preset : workloads)
			if (preset.name == description.name)
				return fmt::format(
					"workload {}: a described workload needs a name of its own",
					description.name);
		workloads.push_back(migration::described_workload(description.name,
								  description.params, ram_bytes));
	}
	return "";
}

// A per-page cost in ns: a finite number above 0 and at most a millisecond.
bool plausible_cost(double ns)
{
	return std::isfinite(ns) && ns > 0 && ns <= 1e6;
}

// The host costs asked for (--host-costs or --host-costs-file), or none. Returns "" or why
// not: nothing runs then.
std::string host_costs_to_use(const CompareArguments& args, std::optional<HostCosts>& costs,
			      std::string& from)
{
	if (!args.host_costs.empty()) {
		HostCosts c;
		char tail = 0;
		if (std::sscanf(args.host_costs.c_str(), "%lf,%lf%c", &c.zero_check_ns_per_page,
				&c.send_ns_per_page, &tail) != 2 ||
		    !plausible_cost(c.zero_check_ns_per_page) ||
		    !plausible_cost(c.send_ns_per_page))
			return "--host-costs: ZERO_NS,SEND_NS, two numbers of ns above 0 and at "
			       "most "
			       "1000000 (got " +
			       args.host_costs + ")";
		costs = c;
		from = "--host-costs";
		return "";
	}
	if (args.host_costs_file.empty())
		return "";
	std::ifstream in(args.host_costs_file);
	if (!in)
		return fmt::format("--host-costs-file {}: {}", args.host_costs_file,
				   std::strerror(errno));
	const nlohmann::json doc = nlohmann::json::parse(in, nullptr, false);
	if (doc.is_discarded() || !doc.is_object())
		return fmt::format("--host-costs-file {}: not a JSON object", args.host_costs_file);
	// compare's own --json: its first workload's measured costs.
	const nlohmann::json* entry = &doc;
	from = args.host_costs_file;
	if (doc.contains("costs")) {
		if (!doc["costs"].is_array() || doc["costs"].empty() ||
		    !doc["costs"][0].is_object())
			return fmt::format("--host-costs-file {}: its \"costs\" has no entry",
					   args.host_costs_file);
		entry = &doc["costs"][0];
		if (entry->contains("workload") && (*entry)["workload"].is_string())
			from += fmt::format(" (workload {})",
					    (*entry)["workload"].get<std::string>());
	}
	HostCosts c;
	for (auto [key, value] : {std::pair{"zero_check_ns_per_page", &c.zero_check_ns_per_page},
				  std::pair{"send_ns_per_page", &c.send_ns_per_page}}) {
		if (!entry->contains(key) || !(*entry)[key].is_number() ||
		    !plausible_cost((*entry)[key].get<double>()))
			return fmt::format(
				"--host-costs-file {}: \"{}\" must be a number of ns above 0 "
				"and at most 1000000",
				args.host_costs_file, key);
		*value = (*entry)[key].get<double>();
	}
	costs = c;
	return "";
}

// How the channels go, for the report's first line.
std::string channels_text(const migration::MigrationConfig& config,
			  const migration::HostChoices& choices)
{
	const char* stream = config.stream == migration::ChannelStream::kPipe  ? "exec:cat's pipe"
			     : config.stream == migration::ChannelStream::kTcp ? "loopback TCP"
									       : "a socket pair";
	if (!choices.multifd && config.sender_threads == 1)
		return stream;
	return fmt::format("multifd over {}, zero-page-detection {}", stream,
			   config.zero_detection_place ==
					   migration::ZeroDetectionPlace::kMigrationThread
				   ? "legacy"
				   : "multifd");
}

int run_compare(CompareArguments& args)
{
	std::vector<migration::WorkloadConfig> workloads;
	if (std::string error = workloads_to_run(args, workloads); !error.empty()) {
		fmt::print(stderr, "vballoon-sim compare: {}\n", error);
		return 2;
	}
	std::optional<HostCosts> host_costs;
	std::string host_costs_from;
	if (std::string error = host_costs_to_use(args, host_costs, host_costs_from);
	    !error.empty()) {
		fmt::print(stderr, "vballoon-sim compare: {}\n", error);
		return 2;
	}

	std::ofstream json_out, csv_out, plot_out;
	if (!open_output(args.json_path, json_out) || !open_output(args.csv_path, csv_out) ||
	    !open_output(args.plot_path, plot_out))
		return 2;
	plot_out.close(); // only proves the path is writable; the script writes it

	const uint64_t ram_bytes = uint64_t{args.ram_mib} << 20;
	const migration::HostProfile& host = *migration::find_host_profile(args.host); // validated
	std::vector<migration::Strategy> strategies;
	if (args.strategies.empty()) {
		strategies = migration::strategies_of(host);
	} else if (std::find(args.strategies.begin(), args.strategies.end(), "all") !=
		   args.strategies.end()) {
		strategies.assign(migration::all_strategies().begin(),
				  migration::all_strategies().end());
	} else {
		for (const std::string& name : args.strategies)
			if (std::find(strategies.begin(), strategies.end(),
				      *migration::parse_strategy(name)) == strategies.end())
				strategies.push_back(*migration::parse_strategy(name));
	}
	migration::HostChoices choices;
	choices.threads = args.multifd_channels ? args.multifd_channels : args.threads;
	choices.multifd = args.multifd_channels != 0;
	if (!args.zero_page_detection.empty()) {
		if (!host.zero_detection_optional) {
			fmt::print(stderr,
				   "vballoon-sim compare: --zero-page-detection: host {} has no "
				   "such parameter (QEMU 9.0 brought it)\n",
				   host.name);
			return 2;
		}
		choices.multifd_zero_detection =
			args.zero_page_detection == "legacy"
				? migration::ZeroDetectionPlace::kMigrationThread
				: migration::ZeroDetectionPlace::kSenderThreads;
	}
	if (!args.stream_to.empty())
		choices.single_stream = args.stream_to == "tcp" ? migration::ChannelStream::kTcp
								: migration::ChannelStream::kPipe;
	migration::MigrationConfig config;
	migration::apply_host_profile(host, choices, config);
	config.link_bytes_per_second = parse_link(args.link_gbit);
	config.max_bandwidth_bytes_per_second = parse_link(args.max_bandwidth_gbit);
	config.downtime_limit_ms = args.downtime_ms;
	config.untouched_page_reads = args.untouched == "shared-zero"
					      ? migration::UntouchedPageReads::kSharedZeroPage
					      : migration::UntouchedPageReads::kPopulatedMemory;
	ComparisonSetup setup{args.ram_mib,
			      host.name,
			      host.models,
			      config.link_bytes_per_second,
			      config.sender_threads,
			      channels_text(config, choices),
			      config.downtime_limit_ms,
			      args.untouched,
			      args.repeat};
	setup.max_bandwidth_bytes_per_second = config.max_bandwidth_bytes_per_second;
	setup.max_rounds = config.max_rounds;
	setup.host_costs = host_costs;
	setup.host_costs_from = host_costs_from;
	// Every strategy runs --repeat times: each table row is a median, and the summary pairs
	// run i of zero-detect with run i of hint+zero-detect.
	const size_t runs_per_workload = strategies.size() * args.repeat;
	std::vector<ComparisonRow> rows;
	{
		ProgressBar progress(workloads.size() * runs_per_workload,
				     ProgressBar::stderr_is_terminal());
		for (const migration::WorkloadConfig& workload : workloads) {
			// Strategies that need the same device share one prepared guest.
			std::vector<std::vector<migration::Strategy>> groups;
			for (migration::Strategy strategy : strategies) {
				auto same_device = [&](const std::vector<migration::Strategy>& group) {
					return migration::uses_hints(group.front()) == migration::uses_hints(strategy) &&
					       migration::uses_reports(group.front()) == migration::uses_reports(strategy);
				};
				auto group = std::find_if(groups.begin(), groups.end(), same_device);
				if (group == groups.end())
					groups.push_back({strategy});
				else
					group->push_back(strategy);
			}
			std::vector<ComparisonRow> workload_rows;
			for (const auto& group : groups) {
				bool running = false;
				std::vector<ComparisonRow> runs = run_migrations(
					ram_bytes, workload, group, config, args.repeat,
					[&](migration::Strategy strategy, unsigned run) {
						if (running)
							progress.run_finished();
						running = true;
						progress.start_run(fmt::format(
							"{} / {} / run {}", workload.name,
							migration::strategy_name(strategy),
							run + 1));
					},
					[&progress](const migration::RoundProgress& round) {
						progress.round_finished(round);
					},
					args.shuffle_free_list, args.pre_5_10_free_order);
				if (running)
					progress.run_finished();
				workload_rows.insert(workload_rows.end(), runs.begin(), runs.end());
			}
			// Back in the order asked for, runs in order.
			auto position = [&](const ComparisonRow& row) {
				return std::find(strategies.begin(), strategies.end(), row.result.strategy) - strategies.begin();
			};
			std::stable_sort(workload_rows.begin(), workload_rows.end(),
					 [&](const ComparisonRow& a, const ComparisonRow& b) {
						 return std::pair(position(a), a.run) < std::pair(position(b), b.run);
					 });
			rows.insert(rows.end(), workload_rows.begin(), workload_rows.end());
		}
	}

	fmt::print("{}", comparison_tables(setup, rows));
	bool ok = true;
	for (const ComparisonRow& row : rows)
		ok = ok && row.result.verified;
	const std::string json = comparison_json(setup, rows).dump(2) + "\n";
	ok = finish_output(args.json_path, json_out, json) && ok;
	ok = finish_output(args.csv_path, csv_out, comparison_csv(rows)) && ok;
	if (!args.plot_path.empty()) {
		std::string json_path = args.json_path;
		char scratch[] = "/tmp/vballoon-compare-XXXXXX.json";
		if (json_path.empty()) {
			int fd = mkstemps(scratch, 5);
			if (fd < 0 || write(fd, json.data(), json.size()) != static_cast<ssize_t>(json.size())) {
				fmt::print(stderr, "vballoon-sim compare: cannot write a scratch file for the plot\n");
				ok = false;
			} else {
				json_path = scratch;
			}
			if (fd >= 0)
				close(fd);
		}
		if (!json_path.empty())
			ok = plot(json_path, args.plot_path) && ok;
		if (args.json_path.empty())
			unlink(scratch);
	}
	return ok ? 0 : 1;
}

std::vector<std::string> strategy_names()
{
	std::vector<std::string> names;
	for (migration::Strategy strategy : migration::all_strategies())
		names.push_back(migration::strategy_name(strategy));
	return names;
}

} // namespace

void add_compare_command(CLI::App& app, int* exit_status)
{
	auto args = std::make_shared<CompareArguments>();
	CLI::App* cmd = app.add_subcommand(
		"compare",
		"Live-migrate a simulated guest with every strategy its host can run side "
		"by side and print what each cost, per workload, then hint+zero-detect "
		"against zero-detect (time, host CPU, bytes over --repeat runs) and where "
		"hints pay: that time ratio at 1, 10, 25, 100 Gbit/s and unlimited (each "
		"run's measured bytes and CPU per round, paced again at each link).");
	const std::string ram_help = fmt::format("Guest RAM in MiB, {} to {} (256 GiB); default "
						 "8192, or a described workload's ram_mib. "
						 "Host memory: 0.5-0.8 GiB plus 4.5 MiB per guest "
						 "GiB for fresh and busy; freed holds "
						 "what it wrote, 0.76 GiB per guest GiB",
						 kSmallestGuestMib, kLargestGuestMib);
	cmd->add_option("--ram-mib", args->ram_mib, ram_help)
		->check(CLI::Range(kSmallestGuestMib, kLargestGuestMib));
	cmd->add_option(
		   "--workload", args->workloads,
		   "Workloads to run, comma-separated: the presets fresh (mostly untouched RAM), "
		   "freed "
		   "(most of RAM written and freed), busy (a compile-like loop while migrating). "
		   "Default: all three, or only the described one when --workload-file or "
		   "--workload-set is given")
		->delimiter(',')
		->check(CLI::IsMember({"fresh", "freed", "busy"}))
		->capture_default_str();
	std::string keys;
	for (unsigned i = 0; vbw_key(i); i++)
		keys += fmt::format("{}{}", i ? ", " : "", vbw_key(i));
	cmd->add_option(
		   "--workload-file", args->workload_file,
		   "A workload described in a JSON file, run beside (or, without --workload, "
		   "instead "
		   "of) the presets: a flat object of the keys " +
			   keys +
			   ", and name, ram_mib, comment (docs/migration-model.md, \"Described "
			   "workloads\"; tools/vballoon-sim/examples/). Sizes in MiB (arena_kib in "
			   "KiB), rates in MiB/s; a key not given is 0 (warmup_ms 5000, seed 1, "
			   "random_frees true). An unknown key or a value out of range is an error "
			   "and nothing runs")
		->check(CLI::ExistingFile);
	cmd->add_option(
		   "--workload-set", args->workload_settings,
		   "KEY=VALUE of a described workload, over --workload-file's (or describing one "
		   "without a file), comma-separated or repeated: e.g. "
		   "--workload-set hot_mib=256,hot_mib_s=512")
		->delimiter(',');
	std::vector<std::string> strategy_choices = strategy_names();
	strategy_choices.push_back("all");
	cmd->add_option("--strategy", args->strategies,
			"Strategies to run, comma-separated, or all: " +
				fmt::format("{}", fmt::join(strategy_names(), ", ")) +
				". Default: those the host can run (qemu-7.2 checks every "
				"page for zero, so zero-detect, hint+zero-detect, "
				"report+zero-detect; qemu-10 and ideal: all)")
		->delimiter(',')
		->check(CLI::IsMember(strategy_choices));
	std::string hosts_help = "Host profile, what the migrating host is:";
	for (const migration::HostProfile& profile : migration::all_host_profiles())
		hosts_help += fmt::format("\n  {}: {}", profile.name, profile.models);
	hosts_help += "\n  qemu-9: the same as qemu-10";
	std::vector<std::string> host_names;
	for (std::string_view name : migration::host_profile_names())
		host_names.emplace_back(name);
	cmd->add_option("--host", args->host, hosts_help)->check(CLI::IsMember(host_names))->capture_default_str();
	cmd->add_option("--link-gbit", args->link_gbit,
			"Link bandwidth in Gbit/s, or unlimited. A rate on model time, never a sleep. "
			"Default 10: the link most hosts migrate over (10 GbE; the crossover line shows "
			"1, 10, 25, 100 Gbit/s and unlimited)")
		->check(CLI::Validator(check_link, "GBIT|unlimited"))
		->capture_default_str();
	cmd->add_option(
		   "--max-bandwidth-gbit", args->max_bandwidth_gbit,
		   "QEMU's max-bandwidth in Gbit/s, or unlimited: a rate limit the source keeps "
		   "while the guest runs and lifts for stop-and-copy, which then goes at the "
		   "link's speed. Default unlimited, as libvirt sets it")
		->check(CLI::Validator(check_link, "GBIT|unlimited"))
		->capture_default_str();
	cmd->add_option(
		   "--threads", args->threads,
		   "Sender channels (socket + sender thread + receiver thread each); default: the "
		   "host's (qemu-7.2 and qemu-10: 1, the migration thread's own stream; ideal: 2 "
		   "multifd channels)")
		->check(CLI::Range(1u, 64u));
	cmd->add_option("--multifd-channels", args->multifd_channels,
			"QEMU's multifd capability with this many channels (1 included), each a "
			"sender thread and its stream; instead of --threads")
		->check(CLI::Range(1u, 64u))
		->excludes("--threads");
	cmd->add_option(
		   "--zero-page-detection", args->zero_page_detection,
		   "With multifd on a host that has the parameter (qemu-10, ideal): where pages "
		   "are checked for zero: multifd (the channels' threads, QEMU's default) or "
		   "legacy (the migration thread, a fill byte per zero page). Without zero "
		   "detection (QEMU's none) is the strategies without zero-detect")
		->check(CLI::IsMember({"legacy", "multifd"}));
	cmd->add_option(
		   "--stream-to", args->stream_to,
		   "The single stream's kind (multifd off): cat (exec:cat > /dev/null, a 64 KiB "
		   "pipe: the calibration's and the seeds') or tcp (a destination over "
		   "loopback TCP). Default: the host's (cat)")
		->check(CLI::IsMember({"cat", "tcp"}));
	cmd->add_option("--downtime-ms", args->downtime_ms, "Downtime limit in ms (QEMU's default: 300)")
		->check(CLI::Range(1.0, 600000.0))
		->capture_default_str();
	cmd->add_option("--untouched", args->untouched,
			"How never-touched guest RAM reads on the source: populated (at memory speed, "
			"a host whose guest RAM is backed) or shared-zero (one cache-hot zero page)")
		->check(CLI::IsMember({"populated", "shared-zero"}))
		->capture_default_str();
	cmd->add_flag("--shuffle-free-list", args->shuffle_free_list,
		      "The guest boots with its free lists shuffled (Linux page_alloc.shuffle=1): its "
		      "working set and free memory lie all over RAM, so what a hint landing after the "
		      "bulk pass started saves depends on where the pass is");
	cmd->add_flag("--guest-kernel-pre-5.10", args->pre_5_10_free_order,
		      "The guest's kernel predates Linux 5.10 (the 2018 guests of the free page hinting threads): it takes free "
		      "memory from the top of RAM, so its untouched memory lies where the bulk pass "
		      "starts. Default: Linux 6.1's order (Debian 12), from the bottom up");
	cmd->add_option("--repeat", args->repeat,
			"Runs per workload of each strategy (the table shows each "
			"strategy's median run; the summary pairs zero-detect's and "
			"hint+zero-detect's runs one by one: median and min-max). Runs of "
			"one device share one prepared guest")
		->check(CLI::Range(1u, 50u))
		->capture_default_str();
	auto* costs_option = cmd->add_option(
		"--host-costs", args->host_costs,
		"ZERO_NS,SEND_NS: another host's per-page costs (the zero check per page checked, "
		"the rest of the sending CPU per page sent, as the costs line under each table "
		"measures them here), to answer for that host too: each run's rounds are re-paced "
		"with them and the hinted time ratio printed for it");
	cmd->add_option("--host-costs-file", args->host_costs_file,
			"The same from a JSON file: an object with zero_check_ns_per_page and "
			"send_ns_per_page, or compare's own --json from that host (its first "
			"workload's costs)")
		->excludes(costs_option);
	cmd->add_option("--json", args->json_path, "Write the results as JSON to FILE");
	cmd->add_option("--csv", args->csv_path, "Write the results as CSV to FILE");
	cmd->add_option("--plot", args->plot_path,
			"Plot the results and the crossover into FILE.png or FILE.svg "
			"(tools/plot_comparison.py)")
		->check(
			[](const std::string& path) -> std::string {
				auto ends_with = [&path](const std::string& suffix) {
					return path.size() > suffix.size() &&
					       path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
				};
				return ends_with(".png") || ends_with(".svg")
					       ? std::string()
					       : "the plot's file name must end in .png or .svg";
			},
			"FILE.png|FILE.svg");
	cmd->callback([cmd, args, exit_status] {
		args->ram_given = cmd->count("--ram-mib") > 0;
		args->workloads_given = cmd->count("--workload") > 0;
		*exit_status = run_compare(*args);
	});
}

} // namespace vbsim
