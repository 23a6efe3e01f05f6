// SPDX-License-Identifier: GPL-2.0
#include "sweep.h"

#include <fmt/core.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <optional>

#include "machine_info.h"

namespace vbbench
{

namespace
{

constexpr double kGib = static_cast<double>(1ull << 30);

struct MinMedian {
	double min = 0;
	double median = 0;
};

std::optional<MinMedian> min_median(std::vector<double> values)
{
	if (values.empty())
		return std::nullopt;
	std::sort(values.begin(), values.end());
	const size_t n = values.size();
	return MinMedian{values.front(),
			 n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2};
}

double gib(uint64_t bytes)
{
	return static_cast<double>(bytes) / kGib;
}

// Least squares through (balloon GiB, median ms): ms = slope * GiB + intercept.
struct Line {
	double slope = 0;
	double intercept = 0;
};

std::optional<Line> fit(const std::vector<std::pair<double, double>>& points)
{
	if (points.size() < 2)
		return std::nullopt;
	double sx = 0, sy = 0, sxx = 0, sxy = 0;
	for (const auto& [x, y] : points) {
		sx += x;
		sy += y;
		sxx += x * x;
		sxy += x * y;
	}
	const double n = static_cast<double>(points.size());
	const double denominator = n * sxx - sx * sx;
	if (denominator == 0)
		return std::nullopt;
	const double slope = (n * sxy - sx * sy) / denominator;
	return Line{slope, (sy - slope * sx) / n};
}

std::optional<size_t> mode_index(const SweepOptions& options, Transfer transfer)
{
	for (size_t i = 0; i < options.modes.size(); i++)
		if (options.modes[i].transfer == transfer && options.modes[i].zeroing == Zeroing::kNone)
			return i;
	return std::nullopt;
}

// Median ms per GiB ballooned of one mode at one point.
std::optional<double> per_gib(const SweepPoint& point, size_t mode)
{
	const auto stats = min_median(point.inflate_ms[mode]);
	if (!stats)
		return std::nullopt;
	return stats->median / gib(point.balloon_bytes);
}

} // namespace

SweepResult run_sweep(const SweepOptions& options)
{
	SweepResult result;
	result.options = options;
	const auto start = std::chrono::steady_clock::now();
	for (const uint64_t ram_gib : options.ram_gib) {
		SweepPoint point;
		point.ram_bytes = ram_gib << 30;
		point.balloon_bytes = point.ram_bytes / 8 * 7;
		point.reps = ram_gib >= options.fewer_reps_from_gib ? std::max(1u, options.reps - 1)
								    : options.reps;
		point.inflate_ms.resize(options.modes.size());
		// Asked again before every point: others share this machine.
		const uint64_t available = mem_available_bytes();
		if (available && point.ram_bytes + options.host_margin_bytes > available) {
			point.skipped = fmt::format("needs {:.1f} GiB available, the machine had {:.1f} GiB",
						    gib(point.ram_bytes + options.host_margin_bytes),
						    gib(available));
			fmt::print(stderr, "[sweep {} GiB] skipped: {}\n", ram_gib, point.skipped);
			result.points.push_back(std::move(point));
			continue;
		}
		BenchConfig config = options.base;
		config.ram_bytes = point.ram_bytes;
		config.balloon_bytes = point.balloon_bytes;
		const size_t count = options.modes.size();
		for (unsigned rep = 0; rep < point.reps; rep++) {
			for (size_t i = 0; i < count; i++) {
				const size_t m = (i + rep) % count;
				RunSample sample = run_mode(config, options.modes[m]);
				fmt::print(stderr, "[sweep {} GiB, rep {}/{}] {:<12} inflate {:>8.1f} ms{}\n",
					   ram_gib, rep + 1, point.reps, options.modes[m].name,
					   sample.inflate.ms, sample.problems.empty() ? "" : "  (PROBLEMS)");
				point.inflate_ms[m].push_back(sample.inflate.ms);
				for (const std::string& problem : sample.problems)
					point.problems.push_back(fmt::format("{} GiB {} rep {}: {}", ram_gib,
									     options.modes[m].name,
									     rep + 1, problem));
			}
		}
		result.points.push_back(std::move(point));
	}
	result.run_seconds =
		std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
	return result;
}

std::string sweep_text(const SweepResult& result)
{
	const SweepOptions& options = result.options;
	const auto chunked = mode_index(options, Transfer::kChunked);
	const auto limit = mode_index(options, Transfer::kLimit);
	std::string out;
	out += "\nscale sweep: inflate 7/8 of RAM; ms per GiB ballooned, median over the reps "
	       "(min in brackets)\n";
	out += fmt::format("{:>7} {:>9} {:>4} |", "RAM", "balloon", "reps");
	for (const Mode& mode : options.modes)
		out += fmt::format(" {:>19}", mode.name);
	out += " | chunked x limit (min) | chunked vs first\n";

	std::optional<double> first_chunked;
	double chunked_low = 0, chunked_high = 0, worst_times_limit = 0;
	std::vector<std::vector<std::pair<double, double>>> lines(options.modes.size());
	for (const SweepPoint& point : result.points) {
		out += fmt::format("{:>3} GiB {:>5.3f} GiB {:>4} |", point.ram_bytes >> 30,
				   gib(point.balloon_bytes), point.reps);
		if (!point.skipped.empty()) {
			out += " skipped: " + point.skipped + "\n";
			continue;
		}
		for (size_t m = 0; m < options.modes.size(); m++) {
			const auto stats = min_median(point.inflate_ms[m]);
			const double g = gib(point.balloon_bytes);
			out += fmt::format(" {:>9.2f} ({:>7.2f})", stats->median / g, stats->min / g);
			lines[m].emplace_back(g, stats->median);
		}
		std::string times_limit = "-", vs_first = "-";
		if (chunked && limit) {
			const double ratio = *per_gib(point, *chunked) / *per_gib(point, *limit);
			const double min_ratio = min_median(point.inflate_ms[*chunked])->min /
						 min_median(point.inflate_ms[*limit])->min;
			worst_times_limit = std::max(worst_times_limit, ratio);
			times_limit = fmt::format("{:.2f}x ({:.2f}x)", ratio, min_ratio);
		}
		if (chunked) {
			const double cost = *per_gib(point, *chunked);
			if (!first_chunked) {
				first_chunked = cost;
				chunked_low = chunked_high = cost;
			}
			chunked_low = std::min(chunked_low, cost);
			chunked_high = std::max(chunked_high, cost);
			vs_first = fmt::format("{:.2f}", cost / *first_chunked);
		}
		out += fmt::format(" | {:>21} | {:>16}\n", times_limit, vs_first);
	}

	out += "least squares through (balloon GiB, median ms): slope = marginal ms per GiB, "
	       "intercept = fixed ms\n";
	for (size_t m = 0; m < options.modes.size(); m++) {
		const auto line = fit(lines[m]);
		if (line)
			out += fmt::format("  {:<12} slope {:>8.2f} ms/GiB   intercept {:>7.2f} ms\n",
					   options.modes[m].name, line->slope, line->intercept);
		else
			out += fmt::format("  {:<12} fewer than two sizes ran\n", options.modes[m].name);
	}
	if (chunked && first_chunked) {
		out += fmt::format("chunked cost per GiB: highest over lowest {:.2f} across sizes "
				   "(goal: flat within 10%)",
				   chunked_high / chunked_low);
		if (limit)
			out += fmt::format("; x limit at worst {:.2f}x (goal: within 1.2x at "
					   "every size)",
					   worst_times_limit);
		out += "\n";
	}
	for (const SweepPoint& point : result.points)
		for (const std::string& problem : point.problems)
			out += "PROBLEM: " + problem + "\n";
	out += fmt::format("the sweep took {:.0f} s\n", result.run_seconds);
	return out;
}

nlohmann::json sweep_json(const SweepResult& result)
{
	nlohmann::json points = nlohmann::json::array();
	for (const SweepPoint& point : result.points) {
		nlohmann::json modes = nlohmann::json::object();
		for (size_t m = 0; m < result.options.modes.size(); m++) {
			const auto stats = min_median(point.inflate_ms[m]);
			if (!stats)
				continue;
			modes[result.options.modes[m].name] = {
				{"inflate_ms", point.inflate_ms[m]},
				{"median_ms", stats->median},
				{"min_ms", stats->min},
				{"median_ms_per_gib", stats->median / gib(point.balloon_bytes)}};
		}
		points.push_back({{"ram_bytes", point.ram_bytes},
				  {"balloon_bytes", point.balloon_bytes},
				  {"reps", point.reps},
				  {"skipped", point.skipped},
				  {"modes", modes},
				  {"problems", point.problems}});
	}
	return {{"benchmark", "vballoon-bench-inflate sweep"},
		{"run_seconds", result.run_seconds},
		{"points", points}};
}

} // namespace vbbench
