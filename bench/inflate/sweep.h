// SPDX-License-Identifier: GPL-2.0
//
// The scale sweep: the same inflate on guests of several sizes (1 to 16 GiB by default),
// the balloon 7/8 of RAM each time, so that the cost per GiB of every mode can be compared
// across sizes. A mode that scales stays flat; the slope of a least-squares line through
// (balloon GiB, inflate ms) is its marginal cost per GiB, the intercept its fixed cost.
// Points whose guest does not fit in the machine's available memory are skipped and said so.
#ifndef VBALLOON_BENCH_INFLATE_SWEEP_H
#define VBALLOON_BENCH_INFLATE_SWEEP_H

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "inflate_run.h"
#include "modes.h"

namespace vbbench
{

struct SweepOptions {
	std::vector<uint64_t> ram_gib;	 // guest sizes, ascending
	unsigned reps = 3;		 // repetitions of every mode at each size...
	uint64_t fewer_reps_from_gib = 16; // ...and one fewer from this size on (at least 1)
	uint64_t host_margin_bytes = 1ull << 30; // what the machine keeps beside guest RAM
	BenchConfig base;		 // backing, profile, populate threads; sizes set per point
	std::vector<Mode> modes;
};

struct SweepPoint {
	uint64_t ram_bytes = 0;
	uint64_t balloon_bytes = 0;
	unsigned reps = 0;
	std::string skipped; // why the point did not run; empty when it did
	std::vector<std::vector<double>> inflate_ms; // per mode (SweepOptions::modes order)
	std::vector<std::string> problems;
};

struct SweepResult {
	SweepOptions options;
	std::vector<SweepPoint> points;
	double run_seconds = 0;
};

// Runs every point; progress goes to stderr. Throws what run_mode() throws.
SweepResult run_sweep(const SweepOptions& options);
std::string sweep_text(const SweepResult& result);
nlohmann::json sweep_json(const SweepResult& result);

} // namespace vbbench

#endif
