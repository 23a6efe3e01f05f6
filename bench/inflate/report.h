// SPDX-License-Identifier: GPL-2.0
//
// The benchmark's results, per mode over every repetition, printed as tables and as JSON.
// Ratios are between modes measured in the same run, never against fixed numbers.
#ifndef VBALLOON_BENCH_INFLATE_REPORT_H
#define VBALLOON_BENCH_INFLATE_REPORT_H

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inflate_run.h"
#include "machine_info.h"
#include "modes.h"

namespace vbbench
{

struct ModeResults {
	Mode mode;
	std::vector<RunSample> runs; // one per repetition, in run order
};

struct Report {
	BenchConfig config;
	unsigned reps = 0;
	PopulateMethod populate_method = PopulateMethod::kPopulateWrite;
	MachineInfo machine;
	std::string load_before;
	std::string load_after;
	double run_seconds = 0;
	std::vector<ModeResults> modes;
};

// How the run was set up: sizes, backing, repetitions, machine. Printed before the runs.
std::string header_text(const Report& report);
// The tables and the comparisons, after the runs.
std::string results_text(const Report& report);
nlohmann::json to_json(const Report& report);
// Every problem of every run, "mode rep N: what".
std::vector<std::string> all_problems(const Report& report);

} // namespace vbbench

#endif
