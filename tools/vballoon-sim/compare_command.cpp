// SPDX-License-Identifier: GPL-2.0
#include "compare_command.h"

#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "comparison_report.h"
#include "comparison_run.h"
#include "progress_bar.h"

extern char** environ;

namespace vbsim
{

namespace
{

constexpr const char* kDebianPython = "/usr/bin/python3";

struct CompareArguments {
	uint32_t ram_mib = 8192;
	std::vector<std::string> workloads = {"fresh", "freed", "busy"};
	std::vector<std::string> strategies;
	std::string json_path;
	std::string csv_path;
	std::string plot_path;
};

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

int run_compare(const CompareArguments& args)
{
	std::vector<migration::WorkloadKind> workloads;
	for (const std::string& name : args.workloads)
		workloads.push_back(*migration::parse_workload(name)); // the validator checked it
	std::vector<migration::Strategy> strategies;
	if (args.strategies.empty()) {
		for (migration::Strategy strategy : migration::all_strategies())
			strategies.push_back(strategy);
	} else {
		for (const std::string& name : args.strategies)
			strategies.push_back(*migration::parse_strategy(name));
	}

	std::ofstream json_out, csv_out, plot_out;
	if (!open_output(args.json_path, json_out) || !open_output(args.csv_path, csv_out) ||
	    !open_output(args.plot_path, plot_out))
		return 2;
	plot_out.close(); // only proves the path is writable; the script writes it

	const uint64_t ram_bytes = uint64_t{args.ram_mib} << 20;
	migration::MigrationConfig config;
	ComparisonSetup setup{args.ram_mib, config.link_bytes_per_second, config.sender_threads,
			      config.downtime_limit_ms};
	std::vector<ComparisonRow> rows;
	{
		ProgressBar progress(workloads.size() * strategies.size(),
				     ProgressBar::stderr_is_terminal());
		for (migration::WorkloadKind workload : workloads) {
			for (migration::Strategy strategy : strategies) {
				config.strategy = strategy;
				progress.start_run(fmt::format("{} / {}", migration::workload_name(workload),
							       migration::strategy_name(strategy)));
				rows.push_back(run_one_migration(
					ram_bytes, workload, config,
					[&progress](const migration::RoundProgress& round) {
						progress.round_finished(round);
					}));
				progress.run_finished();
			}
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
		"compare", "Live-migrate a simulated guest with every strategy side by side and print "
			   "what each cost, per workload.");
	cmd->add_option("--ram-mib", args->ram_mib, "Guest RAM in MiB")
		->check(CLI::Range(64u, 65536u))
		->capture_default_str();
	cmd->add_option("--workload", args->workloads,
			"Workloads to run, comma-separated: fresh (mostly untouched RAM), freed "
			"(most of RAM written and freed), busy (a compile-like loop while migrating)")
		->delimiter(',')
		->check(CLI::IsMember({"fresh", "freed", "busy"}))
		->capture_default_str();
	cmd->add_option("--strategy", args->strategies,
			"Strategies to run, comma-separated (default: all): " +
				fmt::format("{}", fmt::join(strategy_names(), ", ")))
		->delimiter(',')
		->check(CLI::IsMember(strategy_names()));
	cmd->add_option("--json", args->json_path, "Write the results as JSON to FILE");
	cmd->add_option("--csv", args->csv_path, "Write the results as CSV to FILE");
	cmd->add_option("--plot", args->plot_path,
			"Plot the results into FILE.png or FILE.svg (tools/plot_comparison.py)")
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
	cmd->callback([args, exit_status] { *exit_status = run_compare(*args); });
}

} // namespace vbsim
