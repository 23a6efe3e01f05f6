// SPDX-License-Identifier: GPL-2.0
#include "report.h"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>

namespace vbbench
{

namespace
{

// The VIRTIO_BALLOON_F_SG thread (virtio-dev, July 2017; docs/references.md): inflating
// 7 GiB of an 8 GiB idle guest.
constexpr double kSeedPfnMs = 4126;
constexpr double kSeedSgMs = 491;
constexpr double kSeedSgGuestZeroMs = 2800;
// The goals for this benchmark, printed beside the measured ratios (never checked): at
// least 20x pfn-per-page, within 1.2x of the limit.
constexpr double kGoalSpeedupOverPfn = 20;
constexpr double kGoalTimesLimit = 1.2;

struct Stats {
	double min = 0;
	double median = 0;
	double max = 0;
};

Stats stats_of(std::vector<double> values)
{
	if (values.empty())
		return {};
	std::sort(values.begin(), values.end());
	const size_t n = values.size();
	const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
	return {values.front(), median, values.back()};
}

std::vector<double> collect(const ModeResults& results,
			    const std::function<double(const RunSample&)>& value)
{
	std::vector<double> values;
	for (const RunSample& run : results.runs)
		values.push_back(value(run));
	return values;
}

double inflate_ms(const RunSample& run)
{
	return run.inflate.ms;
}

double deflate_ms(const RunSample& run)
{
	return run.deflate.ms;
}

// The run whose time is nearest the median: its phases are printed, so they add up.
const RunSample& representative(const ModeResults& results,
				const std::function<double(const RunSample&)>& value)
{
	const double median = stats_of(collect(results, value)).median;
	const RunSample* best = &results.runs.front();
	for (const RunSample& run : results.runs) {
		if (std::fabs(value(run) - median) < std::fabs(value(*best) - median))
			best = &run;
	}
	return *best;
}

const ModeResults* find_mode(const Report& report, std::string_view name)
{
	for (const ModeResults& results : report.modes) {
		if (results.mode.name == name && !results.runs.empty())
			return &results;
	}
	return nullptr;
}

std::string gib(uint64_t bytes)
{
	if (bytes % (1ull << 30) == 0)
		return fmt::format("{} GiB", bytes >> 30);
	return fmt::format("{:.3f} GiB", static_cast<double>(bytes) / (1ull << 30));
}

std::string backing_name(vbsim::PageBacking backing)
{
	return backing == vbsim::PageBacking::kTransparentHugePages ? "thp" : "small";
}

// pfn-per-page's time over this mode's: how many times faster this mode is.
std::optional<Stats> speedup_over_pfn(const Report& report, const ModeResults& results,
				      const std::function<double(const RunSample&)>& value)
{
	const ModeResults* pfn = find_mode(report, "pfn-per-page");
	if (!pfn)
		return std::nullopt;
	const Stats reference = stats_of(collect(*pfn, value));
	const Stats mine = stats_of(collect(results, value));
	return Stats{reference.min / mine.min, reference.median / mine.median, 0};
}

// This mode's inflate time over the limit's: 1.0 is as fast as the machine allows.
std::optional<Stats> times_limit(const Report& report, const ModeResults& results)
{
	const ModeResults* limit = find_mode(report, "limit");
	if (!limit)
		return std::nullopt;
	const Stats reference = stats_of(collect(*limit, inflate_ms));
	const Stats mine = stats_of(collect(results, inflate_ms));
	return Stats{mine.min / reference.min, mine.median / reference.median, 0};
}

std::string ratio_text(const std::optional<Stats>& ratio)
{
	if (!ratio)
		return "-";
	const double value = ratio->median;
	if (value >= 100)
		return fmt::format("{:.0f}x", value);
	return value >= 1 ? fmt::format("{:.1f}x", value) : fmt::format("{:.2f}x", value);
}

nlohmann::json ratio_json(const std::optional<Stats>& ratio)
{
	if (!ratio)
		return nullptr;
	return {{"min", ratio->min}, {"median", ratio->median}};
}

nlohmann::json stats_json(const Stats& stats, const std::vector<double>& samples)
{
	return {{"min", stats.min},
		{"median", stats.median},
		{"max", stats.max},
		{"samples", samples}};
}

nlohmann::json phase_json(const PhaseSample& phase)
{
	return {{"ms", phase.ms},
		{"phases_ms",
		 {{"allocate", phase.phase_ms(phase.alloc_ns)},
		  {"transfer", phase.transfer_ms()},
		  {"translate", phase.phase_ms(phase.translate_ns)},
		  {"interrupt", phase.phase_ms(phase.interrupt_ns)},
		  {"discard", phase.phase_ms(phase.discard_ns)},
		  {"zero", phase.phase_ms(phase.zero_ns)}}},
		{"kicks", phase.kicks},
		{"interrupts", phase.interrupts},
		{"chains", phase.chains},
		{"driver_messages", phase.driver_messages},
		{"discard_calls", phase.discard_calls},
		{"pages_discarded", phase.wire_pages_discarded},
		{"pages_moved", phase.pages_moved},
		{"pages_zeroed_by_guest", phase.pages_zeroed},
		{"pages_zeroing_skipped", phase.pages_zero_skipped},
		{"pages_device_initialised", phase.wire_pages_device_initialised}};
}

nlohmann::json direction_json(const Report& report, const ModeResults& results,
			      const std::function<double(const RunSample&)>& value,
			      const std::function<const PhaseSample&(const RunSample&)>& phase)
{
	const std::vector<double> samples = collect(results, value);
	nlohmann::json json = {
		{"ms", stats_json(stats_of(samples), samples)},
		{"median_run", phase_json(phase(representative(results, value)))},
		{"speedup_vs_pfn_per_page", ratio_json(speedup_over_pfn(report, results, value))}};
	nlohmann::json runs = nlohmann::json::array();
	for (const RunSample& run : results.runs)
		runs.push_back(phase_json(phase(run)));
	json["runs"] = runs;
	return json;
}

void append_inflate_table(std::string& out, const Report& report)
{
	out += fmt::format(
		"\ninflate {} (ms: min and median of {} runs; the phases are those of the "
		"run nearest the median;\nirq: the device sending interrupts (the eventfd "
		"write that wakes the waiting guest);\ntransfer = total - allocate - translate - "
		"irq - discard - zero: ring, kicks, waiting for the other\nthread or a CPU, and "
		"the guest's balloon-list bookkeeping)\n",
		gib(report.config.balloon_bytes), report.reps);
	out += fmt::format(
		"{:<23} {:>9} {:>9} | {:>8} {:>8} {:>9} {:>6} {:>8} {:>8} | {:>7} {:>7} {:>7} "
		"{:>8} | {:>9} {:>7}\n",
		"mode", "min", "median", "allocate", "transfer", "translate", "irq", "discard",
		"zero", "kicks", "irqs", "chains", "discards", "vs pfn-pp", "x limit");
	for (const ModeResults& results : report.modes) {
		const Stats ms = stats_of(collect(results, inflate_ms));
		const PhaseSample& p = representative(results, inflate_ms).inflate;
		out += fmt::format("{:<23} {:>9.1f} {:>9.1f} | {:>8.1f} {:>8.1f} {:>9.1f} {:>6.1f} "
				   "{:>8.1f} {:>8.1f} | {:>7} {:>7} {:>7} {:>8} | {:>9} {:>7}\n",
				   results.mode.name, ms.min, ms.median, p.phase_ms(p.alloc_ns),
				   p.transfer_ms(), p.phase_ms(p.translate_ns),
				   p.phase_ms(p.interrupt_ns), p.phase_ms(p.discard_ns),
				   p.phase_ms(p.zero_ns), p.kicks, p.interrupts, p.chains,
				   p.discard_calls,
				   ratio_text(speedup_over_pfn(report, results, inflate_ms)),
				   ratio_text(times_limit(report, results)));
	}
	out += "vs pfn-pp: pfn-per-page's median over this mode's (times faster); x limit: this "
	       "mode's median over the limit's.\nkicks, irqs and chains are on inflateq; a chain is one "
	       "request (PFN mode: one array of up to 256 PFNs; chunked: up to 32 chunk "
	       "descriptors).\n";
}

void append_deflate_table(std::string& out, const Report& report)
{
	out += fmt::format("\ndeflate back to 0 (ms: min and median of {} runs; phases of the run "
			   "nearest the median)\n",
			   report.reps);
	out += fmt::format("{:<23} {:>9} {:>9} | {:>8} {:>6} {:>8} | {:>7} {:>7} {:>7} | {:>8} | "
			   "{:>9}\n",
			   "mode", "min", "median", "zero", "irq", "transfer", "kicks", "irqs",
			   "chains", "skipped", "vs pfn-pp");
	for (const ModeResults& results : report.modes) {
		if (results.mode.is_limit())
			continue;
		const Stats ms = stats_of(collect(results, deflate_ms));
		const PhaseSample& p = representative(results, deflate_ms).deflate;
		const std::string skipped =
			results.mode.zeroing == Zeroing::kNone || !p.pages_moved
				? std::string("-")
				: fmt::format("{:.0f}%",
					      100.0 * static_cast<double>(p.pages_zero_skipped) /
						      static_cast<double>(p.pages_moved));
		out += fmt::format(
			"{:<23} {:>9.1f} {:>9.1f} | {:>8.1f} {:>6.1f} {:>8.1f} | {:>7} {:>7} {:>7} | "
			"{:>8} | {:>9}\n",
			results.mode.name, ms.min, ms.median, p.phase_ms(p.zero_ns),
			p.phase_ms(p.interrupt_ns), p.transfer_ms(), p.kicks, p.interrupts,
			p.chains, skipped,
			ratio_text(speedup_over_pfn(report, results, deflate_ms)));
	}
	out += "zero: the guest zeroing pages it got back (init_on_free), which first faults the "
	       "discarded memory back in;\nskipped: pages it did not zero because the device had "
	       "initialised them; transfer: the rest (the\ndevice times only inflate requests, so "
	       "its deflate work is in here).\n";
}

void append_memory_table(std::string& out, const Report& report)
{
	out += "\nhost memory per run (MiB, medians over the runs): THP = AnonHugePages, memory "
	       "mapped as whole 2 MiB pages,\nafter populating, inflating and deflating; res = "
	       "resident guest RAM (mincore) after inflating and deflating\n";
	out += fmt::format("{:<23} {:>11} | {:>10} {:>10} {:>10} | {:>10} {:>10} | {:>11}\n",
			   "mode", "populate ms", "THP filled", "inflated", "deflated", "res infl.",
			   "res defl.", "pages/chain");
	for (const ModeResults& results : report.modes) {
		auto median_of = [&](const std::function<double(const RunSample&)>& value) {
			return stats_of(collect(results, value)).median;
		};
		const PhaseSample& p = representative(results, inflate_ms).inflate;
		const std::string per_chain =
			p.chains ? fmt::format("{:.0f}", static_cast<double>(p.pages_moved) /
								 static_cast<double>(p.chains))
				 : "-";
		out += fmt::format(
			"{:<23} {:>11.0f} | {:>10.0f} {:>10.0f} {:>10.0f} | {:>10.0f} {:>10.0f} | "
			"{:>11}\n",
			results.mode.name,
			median_of([](const RunSample& r) { return r.populate_ms; }),
			median_of([](const RunSample& r) { return double(r.huge_mib_populated); }),
			median_of([](const RunSample& r) {
				return double(r.huge_mib_after_inflate);
			}),
			median_of([](const RunSample& r) {
				return double(r.huge_mib_after_deflate);
			}),
			median_of([](const RunSample& r) {
				return double(r.resident_mib_after_inflate);
			}),
			median_of([](const RunSample& r) {
				return double(r.resident_mib_after_deflate);
			}),
			per_chain);
	}
	out += "A discard of one 4 KiB page splits the 2 MiB page around it: memory that per-page "
	       "modes discarded comes\nback as 4 KiB pages (see THP deflated with guest zeroing), "
	       "which also makes faulting it back slower.\n";
}

void append_comparisons(std::string& out, const Report& report)
{
	const ModeResults* pfn = find_mode(report, "pfn-per-page");
	const ModeResults* chunked = find_mode(report, "chunked");
	const ModeResults* limit = find_mode(report, "limit");
	const ModeResults* chunked_zero = find_mode(report, "chunked+guest-zero");
	const ModeResults* chunked_host = find_mode(report, "chunked+host-init");
	auto median = [](const ModeResults& results) {
		return stats_of(collect(results, inflate_ms)).median;
	};
	auto min = [](const ModeResults& results) {
		return stats_of(collect(results, inflate_ms)).min;
	};

	out += "\ncomparisons (inflate; measured in this run, median and in brackets min):\n";
	if (pfn && chunked)
		out += fmt::format("  chunked vs pfn-per-page: {:.1f}x faster ({:.1f}x)   "
				   "goal: at least {:.0f}x\n",
				   median(*pfn) / median(*chunked), min(*pfn) / min(*chunked),
				   kGoalSpeedupOverPfn);
	if (chunked && limit)
		out += fmt::format("  chunked vs limit: {:.2f}x the limit ({:.2f}x)   goal: "
				   "within {:.1f}x\n",
				   median(*chunked) / median(*limit), min(*chunked) / min(*limit),
				   kGoalTimesLimit);
	if (chunked_zero && chunked_host)
		out += fmt::format(
			"  chunked+host-init vs chunked+guest-zero: {:.1f}x faster ({:.1f}x)"
			"\n",
			median(*chunked_zero) / median(*chunked_host),
			min(*chunked_zero) / min(*chunked_host));
	out += fmt::format("  VIRTIO_BALLOON_F_SG thread (2017 hardware): PFN arrays {:.0f} ms, "
			   "scatter-gather {:.0f} ms ({:.1f}x), scatter-gather with guest zeroing "
			   "{:.0f} ms\n",
			   kSeedPfnMs, kSeedSgMs, kSeedPfnMs / kSeedSgMs, kSeedSgGuestZeroMs);
	if (pfn && chunked) {
		std::string here = fmt::format("  here: pfn-per-page {:.0f} ms, chunked {:.0f} ms "
					       "({:.1f}x)",
					       median(*pfn), median(*chunked),
					       median(*pfn) / median(*chunked));
		if (chunked_zero)
			here += fmt::format(", chunked+guest-zero {:.0f} ms",
					    median(*chunked_zero));
		out += here + "\n";
	}
}

} // namespace

std::string header_text(const Report& report)
{
	const BenchConfig& config = report.config;
	const MachineInfo& machine = report.machine;
	std::string out;
	out += fmt::format(
		"vballoon-bench-inflate: the 2017 VIRTIO_BALLOON_F_SG experiment in the simulator: "
		"inflate {} of a guest "
		"with {} of RAM, all of it resident\n",
		gib(config.balloon_bytes), gib(config.ram_bytes));
	out += fmt::format("guest:    {} RAM ({} pages), balloon target {} ({} pages), device "
			   "profile {}\n",
			   gib(config.ram_bytes), config.ram_bytes >> 12, gib(config.balloon_bytes),
			   config.balloon_bytes >> 12, config.profile);
	out += fmt::format(
		"device:   {}\n",
		config.host_page_bytes > 4096
			? fmt::format("tracks {} KiB host pages, discards one only when all "
				      "of it is ballooned (--track-huge-pages)",
				      config.host_page_bytes >> 10)
			: std::string("discards what each request names (4 KiB host "
				      "pages, as QEMU and Firecracker on THP)"));
	out += fmt::format("backing:  {}; host THP: enabled '{}', defrag '{}'\n",
			   config.backing == vbsim::PageBacking::kTransparentHugePages
				   ? "transparent huge pages (MADV_HUGEPAGE on guest RAM)"
				   : "4 KiB pages (MADV_NOHUGEPAGE on guest RAM)",
			   machine.thp_enabled, machine.thp_defrag);
	out += fmt::format("populate: before every run, a fresh mapping, all {} made resident with "
			   "{} in {} threads (timed below)\n",
			   gib(config.ram_bytes), to_string(report.populate_method),
			   config.populate_threads);
	out += fmt::format("threads:  {}\n",
			   config.pin_threads ? "guest worker on CPU 0, device thread on CPU 1 (--pin-threads)"
					      : "placed by the scheduler");
	out += fmt::format(
		"runs:     {} repetitions of {} modes, interleaved (every repetition runs "
		"each mode once, the first mode rotating);\n          each run builds a new "
		"machine, populates, inflates, then deflates back to 0\n",
		report.reps, report.modes.size());
	out += fmt::format("machine:  {} CPUs ({}), kernel {}, {:.1f} GiB RAM ({:.1f} GiB "
			   "available), load average before: {}\n",
			   machine.cpus, machine.cpu_model, machine.kernel,
			   static_cast<double>(machine.mem_total_bytes) / (1ull << 30),
			   static_cast<double>(machine.mem_available_bytes) / (1ull << 30),
			   report.load_before);
	out += fmt::format("build:    {}, {}\n", machine.compiler, machine.build_type);
	out += "modes:\n";
	for (const ModeResults& results : report.modes)
		out += fmt::format("  {:<23} {}\n", results.mode.name, results.mode.description());
	return out;
}

std::string results_text(const Report& report)
{
	std::string out;
	std::vector<double> populate;
	std::vector<double> huge;
	for (const ModeResults& results : report.modes) {
		for (const RunSample& run : results.runs) {
			populate.push_back(run.populate_ms);
			huge.push_back(static_cast<double>(run.huge_mib_populated));
		}
	}
	const Stats populate_ms = stats_of(populate);
	const Stats huge_mib = stats_of(huge);
	out += fmt::format(
		"\npopulation: {} runs, {} each with {}: min {:.0f} ms, median {:.0f} ms, "
		"max {:.0f} ms ({:.2f} GiB/s at the median);\n            AnonHugePages "
		"after populating: min {:.0f} MiB, median {:.0f} MiB of {} MiB\n",
		populate.size(), gib(report.config.ram_bytes), to_string(report.populate_method),
		populate_ms.min, populate_ms.median, populate_ms.max,
		populate_ms.median > 0 ? static_cast<double>(report.config.ram_bytes) /
						 (1ull << 30) / (populate_ms.median / 1000)
				       : 0.0,
		huge_mib.min, huge_mib.median, report.config.ram_bytes >> 20);
	append_inflate_table(out, report);
	append_deflate_table(out, report);
	append_memory_table(out, report);
	append_comparisons(out, report);
	out += fmt::format("\nload average after: {}; the whole run took {:.0f} s\n",
			   report.load_after, report.run_seconds);
	const std::vector<std::string> problems = all_problems(report);
	for (const std::string& problem : problems)
		out += "PROBLEM: " + problem + "\n";
	return out;
}

std::vector<std::string> all_problems(const Report& report)
{
	std::vector<std::string> problems;
	for (const ModeResults& results : report.modes) {
		for (size_t rep = 0; rep < results.runs.size(); rep++) {
			for (const std::string& problem : results.runs[rep].problems)
				problems.push_back(fmt::format("{} rep {}: {}", results.mode.name,
							       rep + 1, problem));
		}
	}
	return problems;
}

nlohmann::json to_json(const Report& report)
{
	const BenchConfig& config = report.config;
	nlohmann::json modes = nlohmann::json::array();
	for (const ModeResults& results : report.modes) {
		const Mode& mode = results.mode;
		nlohmann::json json = {
			{"name", mode.name},
			{"transfer", mode.transfer_name()},
			{"zeroing", mode.zeroing_name()},
			{"description", mode.description()},
			{"inflate", direction_json(report, results, inflate_ms,
						   [](const RunSample& r) -> const PhaseSample& {
							   return r.inflate;
						   })},
			{"times_limit", ratio_json(times_limit(report, results))},
		};
		if (!mode.is_limit()) {
			json["max_chunk_order"] = mode.max_chunk_order();
			json["discard_mode"] = mode.discard_mode() == vbsim::DiscardMode::kPerPage
						       ? "per-page"
						       : "merge-runs";
			json["negotiated_features"] =
				fmt::format("{:#x}", results.runs.front().negotiated_features);
			json["deflate"] = direction_json(
				report, results, deflate_ms,
				[](const RunSample& r) -> const PhaseSample& { return r.deflate; });
		}
		nlohmann::json memory = nlohmann::json::array();
		for (const RunSample& run : results.runs)
			memory.push_back(
				{{"populate_ms", run.populate_ms},
				 {"huge_mib_populated", run.huge_mib_populated},
				 {"huge_mib_after_inflate", run.huge_mib_after_inflate},
				 {"huge_mib_after_deflate", run.huge_mib_after_deflate},
				 {"resident_mib_populated", run.resident_mib_populated},
				 {"resident_mib_after_inflate", run.resident_mib_after_inflate},
				 {"resident_mib_after_deflate", run.resident_mib_after_deflate},
				 {"problems", run.problems}});
		json["memory"] = memory;
		modes.push_back(json);
	}

	nlohmann::json goals = nlohmann::json::object();
	const ModeResults* pfn = find_mode(report, "pfn-per-page");
	const ModeResults* chunked = find_mode(report, "chunked");
	if (pfn && chunked)
		goals["chunked_speedup_vs_pfn_per_page"] = {
			{"measured", ratio_json(speedup_over_pfn(report, *chunked, inflate_ms))},
			{"goal_at_least", kGoalSpeedupOverPfn}};
	if (chunked && find_mode(report, "limit"))
		goals["chunked_times_limit"] = {
			{"measured", ratio_json(times_limit(report, *chunked))},
			{"goal_within", kGoalTimesLimit}};

	std::vector<std::string> mode_names;
	for (const ModeResults& results : report.modes)
		mode_names.push_back(results.mode.name);
	return {{"benchmark", "vballoon-bench-inflate"},
		{"config",
		 {{"ram_bytes", config.ram_bytes},
		  {"balloon_bytes", config.balloon_bytes},
		  {"balloon_pages", config.balloon_bytes >> 12},
		  {"backing", backing_name(config.backing)},
		  {"profile", config.profile},
		  {"host_page_bytes", config.host_page_bytes},
		  {"reps", report.reps},
		  {"modes", mode_names},
		  {"populate_method", to_string(report.populate_method)},
		  {"populate_threads", config.populate_threads},
		  {"pin_threads", config.pin_threads}}},
		{"machine", to_json(report.machine)},
		{"load_average_before", report.load_before},
		{"load_average_after", report.load_after},
		{"run_seconds", report.run_seconds},
		{"seed_004_ms",
		 {{"pfn_arrays", kSeedPfnMs},
		  {"scatter_gather", kSeedSgMs},
		  {"scatter_gather_guest_zeroing", kSeedSgGuestZeroMs}}},
		{"modes", modes},
		{"goals", goals},
		{"problems", all_problems(report)}};
}

} // namespace vbbench
