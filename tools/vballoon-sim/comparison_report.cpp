// SPDX-License-Identifier: GPL-2.0
#include "comparison_report.h"

#include <fmt/core.h>

#include <algorithm>
#include <functional>
#include <map>

#include "crossover.h"

namespace vbsim
{

namespace
{

constexpr const char* kHinted = "hint+zero-detect";
constexpr const char* kBaseline = "zero-detect";

std::string human_bytes(uint64_t bytes)
{
	if (bytes >= (1ull << 30))
		return fmt::format("{:.2f} GiB", static_cast<double>(bytes) / (1ull << 30));
	if (bytes >= (1ull << 20))
		return fmt::format("{:.1f} MiB", static_cast<double>(bytes) / (1ull << 20));
	return fmt::format("{:.1f} KiB", static_cast<double>(bytes) / 1024);
}

std::string mib_per_second(double bytes_per_second)
{
	return fmt::format("{:.1f} MiB/s", bytes_per_second / (1 << 20));
}

// Why a run did not converge, as QEMU's query-migrate would show it: the guest's dirty rate
// against what the migration sent, and what was dirty at the last sync against what QEMU's
// rule let go (its bandwidth window x the downtime limit).
std::string not_converged(const migration::MigrationResult& r, double downtime_limit_ms)
{
	std::string why = fmt::format(
		"did not converge: the guest dirtied {} against {} sent, {} dirty at the last sync",
		mib_per_second(r.dirty_bytes_per_second), mib_per_second(r.sent_bytes_per_second),
		human_bytes(uint64_t(r.pending_bytes)));
	if (r.threshold_bytes > 0)
		why += fmt::format(" where {:.0f} ms of downtime let {} go", downtime_limit_ms,
				   human_bytes(uint64_t(r.threshold_bytes)));
	return why + fmt::format("; stopped after {} rounds", r.rounds > 0 ? r.rounds - 1 : 0);
}

std::string link_name(double link_bytes_per_second)
{
	if (link_bytes_per_second == migration::kUnlimitedLink)
		return "unlimited";
	return fmt::format("{:g} Gbit/s", link_bytes_per_second * 8 / 1e9);
}

// "0.25x" of the baseline; "-" without one (no `none` or `zero-detect` row, or a zero baseline).
std::string ratio(double value, const migration::MigrationResult* baseline, double base_value)
{
	if (!baseline || base_value <= 0)
		return "-";
	return fmt::format("{:.3f}x", value / base_value);
}

template <typename T>
std::vector<T> in_order(const std::vector<ComparisonRow>& rows, std::function<T(const ComparisonRow&)> key)
{
	std::vector<T> names;
	for (const ComparisonRow& row : rows) {
		T k = key(row);
		if (std::find(names.begin(), names.end(), k) == names.end())
			names.push_back(k);
	}
	return names;
}

std::vector<std::string> workloads_in_order(const std::vector<ComparisonRow>& rows)
{
	return in_order<std::string>(rows, [](const ComparisonRow& r) { return r.workload; });
}

double fixed_ms(const migration::MigrationResult& r)
{
	return r.setup_ms + r.sync_ms + r.vm_stop_ms;
}

// The runs of one workload and strategy, in run order.
std::vector<const ComparisonRow*> runs_of(const std::vector<ComparisonRow>& rows, const std::string& workload,
					  const std::string& strategy)
{
	std::vector<const ComparisonRow*> runs;
	for (const ComparisonRow& row : rows)
		if (row.workload == workload && row.strategy == strategy)
			runs.push_back(&row);
	return runs;
}

// The run whose total time is the median (the lower middle one for an even count), or the
// first failed run: a failure is never hidden behind a figure.
const ComparisonRow* median_run(std::vector<const ComparisonRow*> runs)
{
	for (const ComparisonRow* run : runs)
		if (!run->result.verified)
			return run;
	std::sort(runs.begin(), runs.end(),
		  [](const ComparisonRow* a, const ComparisonRow* b) { return a->result.total_ms < b->result.total_ms; });
	return runs.empty() ? nullptr : runs[(runs.size() - 1) / 2];
}

// hint+zero-detect against zero-detect, run i against run i; empty unless both ran and
// every run of both verified.
struct PairedRatios {
	std::vector<double> time, host_cpu, bytes;
	std::vector<std::vector<double>> time_at_link; // per crossover link
	std::vector<double> time_with_host_costs;      // setup.host_costs given
};

PairedRatios paired_ratios(const ComparisonSetup& setup, const std::vector<ComparisonRow>& rows,
			   const std::string& workload)
{
	PairedRatios out;
	const auto hinted = runs_of(rows, workload, kHinted);
	const auto base = runs_of(rows, workload, kBaseline);
	const std::vector<double> links = crossover_links();
	out.time_at_link.resize(links.size());
	for (const auto* r : hinted)
		if (!r->result.verified)
			return {};
	for (const auto* r : base)
		if (!r->result.verified)
			return {};
	for (size_t i = 0; i < std::min(hinted.size(), base.size()); i++) {
		const migration::MigrationResult& h = hinted[i]->result;
		const migration::MigrationResult& b = base[i]->result;
		// A run that did not converge has no time to compare (QEMU would still be
		// iterating): its pair is left out.
		if (b.total_ms <= 0 || b.host_cpu_ms <= 0 || b.bytes_sent == 0 || !h.converged ||
		    !b.converged)
			continue;
		out.time.push_back(h.total_ms / b.total_ms);
		out.host_cpu.push_back(h.host_cpu_ms / b.host_cpu_ms);
		out.bytes.push_back(double(h.bytes_sent) / double(b.bytes_sent));
		for (size_t l = 0; l < links.size(); l++)
			out.time_at_link[l].push_back(
				total_ms_at_link(h, links[l],
						 setup.max_bandwidth_bytes_per_second) /
				total_ms_at_link(b, links[l],
						 setup.max_bandwidth_bytes_per_second));
		if (setup.host_costs)
			out.time_with_host_costs.push_back(
				total_ms_with_costs(h, *setup.host_costs,
						    setup.link_bytes_per_second,
						    setup.max_bandwidth_bytes_per_second) /
				total_ms_with_costs(b, *setup.host_costs,
						    setup.link_bytes_per_second,
						    setup.max_bandwidth_bytes_per_second));
	}
	return out;
}

std::string spread_text(const Spread& s)
{
	if (s.count <= 1)
		return fmt::format("{:.3f}x", s.median);
	return fmt::format("{:.3f}x ({:.3f}-{:.3f})", s.median, s.min, s.max);
}

nlohmann::ordered_json spread_json(const Spread& s)
{
	return {{"median", s.median}, {"min", s.min}, {"max", s.max}};
}

// "1.36 M" pages: how many pages a cost was measured over.
std::string page_count(uint64_t pages)
{
	if (pages >= 1000000)
		return fmt::format("{:.2f} M", pages / 1e6);
	if (pages >= 1000)
		return fmt::format("{:.1f} k", pages / 1e3);
	return fmt::format("{}", pages);
}

std::string costs_text(const MeasuredCosts& c)
{
	std::string line = fmt::format("costs measured here ({}'s median run):", c.base);
	if (c.zero_check_ns_per_page > 0)
		line += fmt::format(" zero check {:.0f} ns a page ({} pages),",
				    c.zero_check_ns_per_page, page_count(c.pages_checked));
	line += fmt::format(" sending and bitmap work {:.0f} ns a page sent", c.send_ns_per_page);
	if (c.handoff_ns_per_page > 0)
		line += fmt::format(" (the hand-off to the stream's reader {:.0f} of it, the "
				    "reader's copy {:.0f})",
				    c.handoff_ns_per_page, c.reader_copy_ns_per_page);
	line += fmt::format(", fixed {:.1f} ms", c.fixed_ms);
	if (c.hinted) {
		if (c.first_hint_ms < 0)
			line += fmt::format("; {}: no hint landed", kHinted);
		else
			line += fmt::format("; {}: first hints landed at {:.1f} ms, the bulk pass "
					    "ended at {:.1f} ms having skipped {} hinted pages",
					    kHinted, c.first_hint_ms, c.bulk_pass_end_ms,
					    page_count(c.bulk_pass_pages_hinted));
	}
	return line + "\n";
}

} // namespace

MeasuredCosts measured_costs(const std::vector<ComparisonRow>& rows, const std::string& workload)
{
	MeasuredCosts c;
	const std::string base_name = runs_of(rows, workload, "none").empty() ? kBaseline : "none";
	const ComparisonRow* base = median_run(runs_of(rows, workload, base_name));
	if (!base || !base->result.verified || base->result.pages_sent == 0)
		return c;
	const migration::MigrationResult& b = base->result;
	c.base = base_name;
	c.pages_checked = b.zero_scan_cpu_ms > 0 ? b.pages_sent + b.zero_pages : 0;
	if (c.pages_checked)
		c.zero_check_ns_per_page = b.zero_scan_cpu_ms * 1e6 / double(c.pages_checked);
	const double rest_ms = std::max(0.0, b.host_cpu_ms - b.zero_scan_cpu_ms - b.hint_cpu_ms);
	c.send_ns_per_page = (rest_ms + b.handoff_ms) * 1e6 / double(b.pages_sent);
	c.handoff_ns_per_page = b.handoff_ms * 1e6 / double(b.pages_sent);
	c.reader_copy_ns_per_page = b.reader_copy_ms * 1e6 / double(b.pages_sent);
	c.fixed_ms = fixed_ms(b);
	const ComparisonRow* hinted = median_run(runs_of(rows, workload, kHinted));
	if (hinted && hinted->result.verified && !hinted->result.round_log.empty()) {
		const migration::MigrationResult& h = hinted->result;
		c.hinted = true;
		if (!h.hint_landings_ms.empty())
			c.first_hint_ms = h.hint_landings_ms.front();
		c.bulk_pass_end_ms = h.round_log.front().elapsed_ms;
		c.bulk_pass_pages_hinted = h.round_log.front().pages_skipped_hinted;
	}
	return c;
}

std::string comparison_tables(const ComparisonSetup& setup, const std::vector<ComparisonRow>& rows)
{
	std::string out = fmt::format("live migration of a {} MiB guest: link {}, {} sender "
				      "channel(s){}, downtime limit {:.0f} ms, "
				      "untouched RAM {}, {} run(s) per cell\n",
				      setup.ram_mib, link_name(setup.link_bytes_per_second),
				      setup.sender_threads,
				      setup.channels.empty() ? "" : " (" + setup.channels + ")",
				      setup.downtime_limit_ms, setup.untouched, setup.repeat);
	if (setup.max_bandwidth_bytes_per_second != migration::kUnlimitedLink)
		out += fmt::format(
			"max-bandwidth {} while the guest runs, lifted for stop-and-copy (as QEMU "
			"does)\n",
			link_name(setup.max_bandwidth_bytes_per_second));
	if (!setup.host.empty())
		out += fmt::format("host {}: {}\n", setup.host, setup.host_models);
	out += "host CPU: the source's zero scans, sends into the channel sockets, dirty bitmap work and "
	       "hint handling (device thread's free page queue included), thread CPU time; guest CPU: "
	       "hinting or reporting.\n";
	out += "fixed: setup (dirty log on, first sync), every bitmap sync and stopping the VM, measured "
	       "(device state is not modelled); downtime: VM stop, last sync, stop-and-copy.\n";
	out += "each row is the strategy's median run by total time; \"x base\" is against the "
	       "workload's "
	       "base in the same series: `none`, or `zero-detect` where `none` did not run (a QEMU "
	       "7.2 "
	       "host checks every page for zero: it has no `none`).\n";
	for (const std::string& workload : workloads_in_order(rows)) {
		const char* base_name =
			runs_of(rows, workload, "none").empty() ? kBaseline : "none";
		const ComparisonRow* base_row = median_run(runs_of(rows, workload, base_name));
		const migration::MigrationResult* baseline =
			base_row && base_row->result.verified ? &base_row->result : nullptr;
		out += fmt::format("\nworkload {}{}\n", workload,
				   base_row ? fmt::format(" (base: {})", base_name)
					    : std::string());
		out += fmt::format(
			"{:<19} {:>10} {:>10} {:>11} {:>8} {:>9} {:>9} {:>7} {:>9} {:>6} {:>9} "
			"{:>8} {:>9} {:>7}  {}\n",
			"strategy", "pages sent", "zero pages", "bytes sent", "x base", "host CPU",
			"zero scan", "hints", "guest CPU", "rounds", "total ms", "x base",
			"downtime", "fixed", "verified");
		for (const std::string& strategy : in_order<std::string>(rows, [&](const ComparisonRow& r) {
			     return r.workload == workload ? r.strategy : std::string();
		     })) {
			if (strategy.empty())
				continue;
			const ComparisonRow* row = median_run(runs_of(rows, workload, strategy));
			const migration::MigrationResult& r = row->result;
			if (!r.verified) {
				// A run that failed is an error, never a figure.
				out += fmt::format("{:<19} {:>10} {:>10} {:>11} {:>8} {:>9} {:>9} {:>7} {:>9} "
						   "{:>6} {:>9} {:>8} {:>9} {:>7}  NO: {}\n",
						   row->strategy, "-", "-", "-", "-", "-", "-", "-", "-", "-",
						   "-", "-", "-", "-", r.error);
				continue;
			}
			// One that did not converge has no end: its total is where the model stopped
			// it, and QEMU would not have stopped the VM.
			const bool ended = r.converged && baseline && baseline->converged;
			// The cell is the median run, but says so when any of its runs did not
			// converge (with that run's figures when the median converged).
			const std::vector<const ComparisonRow*> runs =
				runs_of(rows, workload, strategy);
			const migration::MigrationResult* stuck = r.converged ? nullptr : &r;
			unsigned stuck_runs = 0;
			for (const ComparisonRow* run : runs)
				if (!run->result.converged) {
					stuck_runs++;
					if (!stuck)
						stuck = &run->result;
				}
			std::string verdict = "yes";
			if (stuck)
				verdict += fmt::format(
					"; {}{}",
					runs.size() > 1 ? fmt::format("{} of {} runs ", stuck_runs,
								      runs.size())
							: std::string(),
					not_converged(*stuck, setup.downtime_limit_ms));
			out += fmt::format(
				"{:<19} {:>10} {:>10} {:>11} {:>8} {:>9.1f} {:>9.1f} {:>7.1f} "
				"{:>9.1f} {:>6} "
				"{:>9} {:>8} {:>9} {:>7.1f}  {}\n",
				row->strategy, r.pages_sent, r.zero_pages,
				human_bytes(r.bytes_sent),
				ratio(static_cast<double>(r.bytes_sent), baseline,
				      baseline ? static_cast<double>(baseline->bytes_sent) : 0),
				r.host_cpu_ms, r.zero_scan_cpu_ms, r.hint_cpu_ms, r.guest_cpu_ms,
				r.rounds,
				fmt::format("{}{:.1f}", r.converged ? "" : ">", r.total_ms),
				ended ? ratio(r.total_ms, baseline, baseline->total_ms) : "-",
				r.converged ? fmt::format("{:.1f}", r.downtime_ms) : "-",
				fixed_ms(r), verdict);
		}
		bool all_converged = true;
		for (const ComparisonRow& row : rows)
			if (row.workload == workload && row.result.verified &&
			    !row.result.converged)
				all_converged = false;
		if (!all_converged)
			out += fmt::format("did not converge: a guest that keeps more dirty at "
					   "each sync than the downtime limit "
					   "lets the link send never does; QEMU goes on iterating "
					   "(or throttles the guest, "
					   "auto-converge). The model stops it after {} rounds and "
					   "verifies what it sent; "
					   "total ms (\">\") is the time until then, no downtime "
					   "and no ratio are shown, and such runs are left out of "
					   "the pairs below.\n",
					   setup.max_rounds);
		const MeasuredCosts costs = measured_costs(rows, workload);
		if (!costs.base.empty())
			out += costs_text(costs);
		const PairedRatios pairs = paired_ratios(setup, rows, workload);
		if (pairs.time.empty())
			continue;
		out += fmt::format("{} against {} ({} run(s), median (min-max)): time {}, host CPU {}, bytes {}\n",
				   kHinted, kBaseline, pairs.time.size(), spread_text(spread_of(pairs.time)),
				   spread_text(spread_of(pairs.host_cpu)), spread_text(spread_of(pairs.bytes)));
		const std::vector<double> links = crossover_links();
		std::string line = "crossover, time ratio by link:";
		for (size_t l = 0; l < links.size(); l++)
			line += fmt::format("{} {} {}", l ? " |" : "", link_name(links[l]),
					    spread_text(spread_of(pairs.time_at_link[l])));
		out += line + "\n";
		if (setup.host_costs)
			out += fmt::format(
				"on the host of {} (zero check {:.0f} ns, sending {:.0f} ns a page "
				"sent), at {}: time {}\n",
				setup.host_costs_from, setup.host_costs->zero_check_ns_per_page,
				setup.host_costs->send_ns_per_page,
				link_name(setup.link_bytes_per_second),
				spread_text(spread_of(pairs.time_with_host_costs)));
	}
	out += "\ncrossover: each run's measured bytes and CPU per round, paced again at each link; an idle "
	       "guest's hints would land at other 50 ms boundaries and a busy guest dirty more or less at "
	       "another link, which this does not redo.\n";
	return out;
}

nlohmann::ordered_json comparison_json(const ComparisonSetup& setup,
				       const std::vector<ComparisonRow>& rows)
{
	nlohmann::ordered_json results = nlohmann::ordered_json::array();
	for (const ComparisonRow& row : rows) {
		const migration::MigrationResult& r = row.result;
		nlohmann::ordered_json first_hint = nullptr;
		if (!r.hint_landings_ms.empty())
			first_hint = r.hint_landings_ms.front();
		results.push_back({{"workload", row.workload},
				   {"strategy", row.strategy},
				   {"run", row.run},
				   {"bytes_sent", r.bytes_sent},
				   {"pages_sent", r.pages_sent},
				   {"zero_pages", r.zero_pages},
				   {"host_cpu_ms", r.host_cpu_ms},
				   {"zero_scan_cpu_ms", r.zero_scan_cpu_ms},
				   {"hint_cpu_ms", r.hint_cpu_ms},
				   {"guest_cpu_ms", r.guest_cpu_ms},
				   {"receiver_cpu_ms", r.receiver_cpu_ms},
				   {"reader_copy_ms", r.reader_copy_ms},
				   {"handoff_ms", r.handoff_ms},
				   {"rounds", r.rounds},
				   {"bitmap_syncs", r.bitmap_syncs},
				   {"converged", r.converged},
				   {"dirty_bytes_per_second", r.dirty_bytes_per_second},
				   {"pending_bytes", r.pending_bytes},
				   {"threshold_bytes", r.threshold_bytes},
				   {"sent_bytes_per_second", r.sent_bytes_per_second},
				   {"total_ms", r.total_ms},
				   {"downtime_ms", r.downtime_ms},
				   {"fixed_ms", fixed_ms(r)},
				   {"first_hint_ms", first_hint},
				   {"hinted_pages_after_stop", r.hinted_pages_after_stop},
				   {"hinted_pages_released_early", r.hinted_pages_released_early},
				   {"verified", r.verified}});
	}
	nlohmann::ordered_json summary = nlohmann::ordered_json::array();
	const std::vector<double> links = crossover_links();
	for (const std::string& workload : workloads_in_order(rows)) {
		const PairedRatios pairs = paired_ratios(setup, rows, workload);
		if (pairs.time.empty())
			continue;
		nlohmann::ordered_json crossover = nlohmann::ordered_json::array();
		for (size_t l = 0; l < links.size(); l++) {
			nlohmann::ordered_json gbit = nullptr;
			if (links[l] != migration::kUnlimitedLink)
				gbit = links[l] * 8 / 1e9;
			crossover.push_back({{"link_gbit", gbit}, {"time_ratio", spread_json(spread_of(pairs.time_at_link[l]))}});
		}
		nlohmann::ordered_json entry = {
			{"workload", workload},
			{"runs", pairs.time.size()},
			{"time_ratio", spread_json(spread_of(pairs.time))},
			{"host_cpu_ratio", spread_json(spread_of(pairs.host_cpu))},
			{"bytes_ratio", spread_json(spread_of(pairs.bytes))},
			{"crossover", crossover}};
		if (setup.host_costs)
			entry["time_ratio_with_host_costs"] =
				spread_json(spread_of(pairs.time_with_host_costs));
		summary.push_back(entry);
	}
	nlohmann::ordered_json costs = nlohmann::ordered_json::array();
	for (const std::string& workload : workloads_in_order(rows)) {
		const MeasuredCosts c = measured_costs(rows, workload);
		if (c.base.empty())
			continue;
		nlohmann::ordered_json first_hint = nullptr;
		if (c.first_hint_ms >= 0)
			first_hint = c.first_hint_ms;
		costs.push_back({{"workload", workload},
				 {"base", c.base},
				 {"pages_checked", c.pages_checked},
				 {"zero_check_ns_per_page", c.zero_check_ns_per_page},
				 {"send_ns_per_page", c.send_ns_per_page},
				 {"handoff_ns_per_page", c.handoff_ns_per_page},
				 {"reader_copy_ns_per_page", c.reader_copy_ns_per_page},
				 {"fixed_ms", c.fixed_ms},
				 {"hinted", c.hinted},
				 {"first_hint_ms", first_hint},
				 {"bulk_pass_end_ms", c.bulk_pass_end_ms},
				 {"bulk_pass_pages_hinted", c.bulk_pass_pages_hinted}});
	}
	nlohmann::ordered_json host_costs = nullptr;
	if (setup.host_costs)
		host_costs = {{"from", setup.host_costs_from},
			      {"zero_check_ns_per_page", setup.host_costs->zero_check_ns_per_page},
			      {"send_ns_per_page", setup.host_costs->send_ns_per_page}};
	nlohmann::ordered_json link = nullptr;
	if (setup.link_bytes_per_second != migration::kUnlimitedLink)
		link = setup.link_bytes_per_second;
	nlohmann::ordered_json max_bandwidth = nullptr;
	if (setup.max_bandwidth_bytes_per_second != migration::kUnlimitedLink)
		max_bandwidth = setup.max_bandwidth_bytes_per_second;
	return {{"setup",
		 {{"ram_mib", setup.ram_mib},
		  {"host", setup.host},
		  {"link_bytes_per_second", link},
		  {"max_bandwidth_bytes_per_second", max_bandwidth},
		  {"sender_threads", setup.sender_threads},
		  {"channels", setup.channels},
		  {"downtime_limit_ms", setup.downtime_limit_ms},
		  {"untouched", setup.untouched},
		  {"repeat", setup.repeat},
		  {"max_rounds", setup.max_rounds},
		  {"host_costs", host_costs}}},
		{"results", results},
		{"summary", summary},
		{"costs", costs}};
}

std::string comparison_csv(const std::vector<ComparisonRow>& rows)
{
	std::string out = "workload,strategy,run,bytes_sent,pages_sent,zero_pages,host_cpu_ms,guest_cpu_ms,"
			  "rounds,total_ms,downtime_ms,fixed_ms,verified\n";
	for (const ComparisonRow& row : rows) {
		const migration::MigrationResult& r = row.result;
		out += fmt::format("{},{},{},{},{},{},{:.3f},{:.3f},{},{:.3f},{:.3f},{:.3f},{}\n", row.workload,
				   row.strategy, row.run, r.bytes_sent, r.pages_sent, r.zero_pages, r.host_cpu_ms,
				   r.guest_cpu_ms, r.rounds, r.total_ms, r.downtime_ms, fixed_ms(r),
				   r.verified ? "true" : "false");
	}
	return out;
}

} // namespace vbsim
