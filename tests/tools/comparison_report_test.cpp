// SPDX-License-Identifier: GPL-2.0
//
// What `vballoon-sim compare` prints and writes, on results built here: the JSON's shape and
// field order, CSV lines matching it, one table per workload with ratios against `none`, or
// against `zero-detect` where `none` did not run (a QEMU 7.2 host's default set).
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "comparison_report.h"
#include "crossover.h"

namespace vbsim
{
namespace
{

ComparisonRow row(const std::string& workload, const std::string& strategy, uint64_t pages,
		  uint64_t bytes, double total_ms, bool verified = true)
{
	ComparisonRow r;
	r.workload = workload;
	r.strategy = strategy;
	r.result.pages_sent = pages;
	r.result.bytes_sent = bytes;
	r.result.host_cpu_ms = 12.5;
	r.result.zero_scan_cpu_ms = 7.25;
	r.result.hint_cpu_ms = 1.5;
	r.result.guest_cpu_ms = 3.0;
	r.result.rounds = 4;
	r.result.bitmap_syncs = 7;
	r.result.converged = true;
	r.result.total_ms = total_ms;
	r.result.downtime_ms = 20.5;
	r.result.setup_ms = 0.25;
	r.result.sync_ms = 0.75;
	r.result.vm_stop_ms = 0.5;
	r.result.verified = verified;
	if (!verified)
		r.result.error = "3 pages differ";
	return r;
}

std::vector<ComparisonRow> sample_rows()
{
	return {row("fresh", "none", 1000, 4096008000, 400),
		row("fresh", "zero-detect", 10, 41000, 100),
		row("freed", "none", 2000, 8192016000, 800),
		row("freed", "hint", 500, 2048004000, 200, false)};
}

const ComparisonSetup kSetup{512, "qemu-7.2", "Debian 12's QEMU", 1e9, 2, "", 300, "populated", 1};

TEST(ComparisonReport, JsonHasOneResultPerRowWithTheDocumentedFieldsInOrder)
{
	const nlohmann::ordered_json json = comparison_json(kSetup, sample_rows());
	ASSERT_TRUE(json.contains("results"));
	ASSERT_EQ(json["results"].size(), 4u);
	const std::vector<std::string> fields = {"workload",
						 "strategy",
						 "run",
						 "bytes_sent",
						 "pages_sent",
						 "zero_pages",
						 "host_cpu_ms",
						 "zero_scan_cpu_ms",
						 "hint_cpu_ms",
						 "guest_cpu_ms",
						 "receiver_cpu_ms",
						 "reader_copy_ms",
						 "handoff_ms",
						 "rounds",
						 "bitmap_syncs",
						 "converged",
						 "dirty_bytes_per_second",
						 "pending_bytes",
						 "threshold_bytes",
						 "sent_bytes_per_second",
						 "total_ms",
						 "downtime_ms",
						 "fixed_ms",
						 "first_hint_ms",
						 "hinted_pages_after_stop",
						 "hinted_pages_released_early",
						 "verified"};
	for (const auto& result : json["results"]) {
		std::vector<std::string> keys;
		for (auto it = result.begin(); it != result.end(); ++it)
			keys.push_back(it.key());
		EXPECT_EQ(keys, fields);
	}
	const auto& freed_hint = json["results"][3];
	EXPECT_EQ(freed_hint["workload"], "freed");
	EXPECT_EQ(freed_hint["strategy"], "hint");
	EXPECT_EQ(freed_hint["bytes_sent"], 2048004000u);
	EXPECT_EQ(freed_hint["pages_sent"], 500u);
	EXPECT_DOUBLE_EQ(freed_hint["host_cpu_ms"].get<double>(), 12.5);
	EXPECT_DOUBLE_EQ(freed_hint["guest_cpu_ms"].get<double>(), 3.0);
	EXPECT_EQ(freed_hint["rounds"], 4u);
	EXPECT_EQ(freed_hint["bitmap_syncs"], 7u);
	EXPECT_DOUBLE_EQ(freed_hint["total_ms"].get<double>(), 200);
	EXPECT_DOUBLE_EQ(freed_hint["downtime_ms"].get<double>(), 20.5);
	EXPECT_EQ(freed_hint["verified"], false);
	EXPECT_EQ(json["results"][0]["verified"], true);
	EXPECT_EQ(json["setup"]["ram_mib"], 512u);
}

TEST(ComparisonReport, CsvHasAHeaderAndOneLineMatchingEachRow)
{
	std::istringstream csv(comparison_csv(sample_rows()));
	std::string line;
	ASSERT_TRUE(std::getline(csv, line));
	EXPECT_EQ(line, "workload,strategy,run,bytes_sent,pages_sent,zero_pages,host_cpu_ms,guest_cpu_ms,"
			"rounds,total_ms,downtime_ms,fixed_ms,verified");
	std::vector<std::string> lines;
	while (std::getline(csv, line))
		lines.push_back(line);
	ASSERT_EQ(lines.size(), 4u);
	EXPECT_EQ(lines[1], "fresh,zero-detect,0,41000,10,0,12.500,3.000,4,100.000,20.500,1.500,true");
	EXPECT_EQ(lines[3], "freed,hint,0,2048004000,500,0,12.500,3.000,4,200.000,20.500,1.500,false");
}

TEST(ComparisonReport, TablesComeOnePerWorkloadWithRatiosAgainstNone)
{
	const std::string text = comparison_tables(kSetup, sample_rows());
	const size_t fresh = text.find("workload fresh");
	const size_t freed = text.find("workload freed");
	ASSERT_NE(fresh, std::string::npos);
	ASSERT_NE(freed, std::string::npos);
	EXPECT_LT(fresh, freed);
	EXPECT_EQ(text.find("workload busy"), std::string::npos);
	EXPECT_NE(text.find("512 MiB guest"), std::string::npos);

	// zero-detect sent 41000 of none's 4096008000 bytes in 100 of its 400 ms.
	const std::string zero_line = text.substr(text.find("zero-detect", fresh));
	EXPECT_NE(zero_line.find("0.000x"), std::string::npos) << zero_line;
	EXPECT_NE(zero_line.find("0.250x"), std::string::npos) << zero_line;
	// A failed run says so, with the reason, and shows no figure.
	const std::string hint_line = text.substr(text.find("hint ", freed));
	EXPECT_NE(hint_line.find("NO: 3 pages differ"), std::string::npos) << hint_line;
	EXPECT_EQ(hint_line.find("0.250x"), std::string::npos) << hint_line;
	EXPECT_EQ(hint_line.find("500"), std::string::npos) << hint_line;
}

TEST(ComparisonReport, WithoutNoneTheRatiosAreAgainstZeroDetect)
{
	const std::string text =
		comparison_tables(kSetup, {row("fresh", "zero-detect", 10, 40000, 200),
					   row("fresh", "hint+zero-detect", 5, 10000, 50)});
	const size_t fresh = text.find("workload fresh (base: zero-detect)");
	ASSERT_NE(fresh, std::string::npos) << text;
	// 10000 of zero-detect's 40000 bytes in 50 of its 200 ms.
	const std::string hint_line = text.substr(text.find("hint+zero-detect ", fresh));
	EXPECT_NE(hint_line.find("0.250x"), std::string::npos) << hint_line;
	const std::string zero_line = text.substr(text.find("zero-detect ", fresh));
	EXPECT_NE(zero_line.find("1.000x"), std::string::npos) << zero_line;
}

TEST(ComparisonReport, NoneIsTheBaseWhereItRan)
{
	const std::string text = comparison_tables(kSetup, sample_rows());
	EXPECT_NE(text.find("workload fresh (base: none)"), std::string::npos) << text;
	EXPECT_NE(text.find("workload freed (base: none)"), std::string::npos) << text;
}

TEST(ComparisonReport, RowsWithoutABaselineShowNoRatio)
{
	const std::string text = comparison_tables(kSetup, {row("busy", "hint", 5, 20480, 50)});
	const std::string hint_line = text.substr(text.find("hint ", text.find("workload busy")));
	EXPECT_EQ(hint_line.find('x'), std::string::npos) << hint_line;
}

TEST(ComparisonReport, CostsMeasuredHereArePerPageOfTheBaseAndWhenHintsLandedInTheHintedRun)
{
	ComparisonRow base = row("fresh", "zero-detect", 1000, 4096000, 400);
	base.result.zero_pages = 3000;
	base.result.zero_scan_cpu_ms = 7.2; // over 4000 pages checked: 1800 ns each
	base.result.handoff_ms = 2.0;	    // over 1000 pages sent: 2000 ns each,
	base.result.reader_copy_ms = 1.0;   // of which the reader's copy 1000
	ComparisonRow hinted = row("fresh", "hint+zero-detect", 200, 819200, 100);
	migration::RoundProgress bulk;
	bulk.elapsed_ms = 80;
	bulk.pages_skipped_hinted = 2500;
	hinted.result.round_log = {bulk};
	hinted.result.hint_landings_ms = {50.0, 70.0};
	const std::vector<ComparisonRow> rows = {base, hinted};

	const MeasuredCosts c = measured_costs(rows, "fresh");
	EXPECT_EQ(c.base, "zero-detect");
	EXPECT_EQ(c.pages_checked, 4000u);
	EXPECT_DOUBLE_EQ(c.zero_check_ns_per_page, 1800);
	// host CPU 12.5 less the zero checks 7.2 and hints 1.5, with the hand-off 2.0, over
	// 1000 pages sent.
	EXPECT_NEAR(c.send_ns_per_page, 5800, 1e-6);
	EXPECT_DOUBLE_EQ(c.handoff_ns_per_page, 2000);
	EXPECT_DOUBLE_EQ(c.reader_copy_ns_per_page, 1000);
	EXPECT_DOUBLE_EQ(c.fixed_ms, 1.5);
	EXPECT_TRUE(c.hinted);
	EXPECT_DOUBLE_EQ(c.first_hint_ms, 50);
	EXPECT_DOUBLE_EQ(c.bulk_pass_end_ms, 80);
	EXPECT_EQ(c.bulk_pass_pages_hinted, 2500u);

	const std::string text = comparison_tables(kSetup, rows);
	EXPECT_NE(
		text.find(
			"costs measured here (zero-detect's median run): zero check 1800 ns a page "
			"(4.0 k pages), sending and bitmap work 5800 ns a page sent (the hand-off "
			"to the stream's reader 2000 of it, the reader's copy 1000), fixed 1.5 ms; "
			"hint+zero-detect: first hints "
			"landed at 50.0 ms, the bulk pass ended at 80.0 ms having skipped 2.5 k "
			"hinted pages"),
		std::string::npos)
		<< text;
	const nlohmann::ordered_json json = comparison_json(kSetup, rows);
	ASSERT_EQ(json["costs"].size(), 1u);
	EXPECT_EQ(json["costs"][0]["workload"], "fresh");
	EXPECT_DOUBLE_EQ(json["costs"][0]["zero_check_ns_per_page"].get<double>(), 1800);
	EXPECT_DOUBLE_EQ(json["costs"][0]["first_hint_ms"].get<double>(), 50);
}

TEST(ComparisonReport, CostsAreLeftOutWithoutAVerifiedBaseAndSayWhenNoHintLanded)
{
	EXPECT_TRUE(measured_costs({row("freed", "zero-detect", 10, 40960, 5, false)}, "freed")
			    .base.empty());
	EXPECT_TRUE(measured_costs({row("freed", "hint", 10, 40960, 5)}, "freed").base.empty());
	ComparisonRow hinted = row("fresh", "hint+zero-detect", 20, 81920, 10);
	hinted.result.round_log = {migration::RoundProgress{}};
	const std::vector<ComparisonRow> rows = {row("fresh", "none", 100, 409600, 40), hinted};
	const MeasuredCosts c = measured_costs(rows, "fresh");
	EXPECT_EQ(c.base, "none");
	const std::string text = comparison_tables(kSetup, rows);
	EXPECT_NE(text.find("hint+zero-detect: no hint landed"), std::string::npos) << text;
	EXPECT_EQ(comparison_json(kSetup, rows)["costs"][0]["first_hint_ms"], nullptr);
}

// A run's rounds: bytes sent and CPU critical path; total = setup + rounds + stop.
migration::MigrationResult paced_run(std::vector<std::pair<uint64_t, double>> rounds, double link)
{
	migration::MigrationResult r;
	r.verified = true;
	r.converged = true;
	r.setup_ms = 1;
	r.total_ms = 1;
	for (auto [bytes, cpu] : rounds) {
		migration::RoundProgress p;
		p.bytes_sent = bytes;
		p.critical_cpu_ms = cpu;
		p.network_ms = migration::link_ms(bytes, link);
		p.sync_ms = 0.5;
		p.round_ms = std::max(p.network_ms, cpu) + p.sync_ms;
		r.total_ms += p.round_ms;
		r.bytes_sent += bytes;
		r.round_log.push_back(p);
	}
	r.host_cpu_ms = 10;
	return r;
}

TEST(Crossover, ATotalAtAnotherLinkRepacesEachRoundAndKeepsTheRest)
{
	const double gbit = 1e9 / 8;
	// 125 MB over 1 Gbit/s: 1000 ms on the wire, 50 ms of CPU; then 1.25 MB, 2 ms of CPU.
	const auto r = paced_run({{125000000, 50}, {1250000, 2}}, gbit);
	EXPECT_DOUBLE_EQ(r.total_ms, 1 + 1000.5 + 10.5);
	EXPECT_DOUBLE_EQ(total_ms_at_link(r, gbit), r.total_ms);
	// At 10 Gbit/s: 100 ms and 1 ms on the wire; the second round is CPU bound.
	EXPECT_DOUBLE_EQ(total_ms_at_link(r, 10 * gbit), 1 + 100.5 + 2.5);
	// Unlimited: the CPU path alone.
	EXPECT_DOUBLE_EQ(total_ms_at_link(r, migration::kUnlimitedLink), 1 + 50.5 + 2.5);
}

// One with zero checks: 4000 pages checked (10 us each, 40 ms), 1000 sent (20 us each of the
// rest, 20 ms); round 1 checks 3800 and sends 800 of them (54 ms of CPU), round 2 200 and 200
// (6 ms).
migration::MigrationResult run_with_page_counts(uint64_t round1_bytes)
{
	auto r = paced_run({{round1_bytes, 54}, {819200, 6}}, migration::kUnlimitedLink);
	r.round_log[0].pages_sent = 800;
	r.round_log[0].zero_pages = 3000;
	r.round_log[1].pages_sent = 200;
	r.pages_sent = 1000;
	r.zero_pages = 3000;
	r.zero_scan_cpu_ms = 40;
	r.host_cpu_ms = 60;
	return r;
}

TEST(Crossover, AnotherHostsCostsScaleEachRoundsCpuPathByWhatItsPagesCostThere)
{
	const auto r = run_with_page_counts(1250000);
	EXPECT_DOUBLE_EQ(r.total_ms, 1 + 54.5 + 6.5);
	// The run's own costs give the run's own time.
	EXPECT_NEAR(total_ms_with_costs(r, {10000, 20000}, migration::kUnlimitedLink), r.total_ms,
		    1e-9);
	// Half the zero check, half the send: round 1 19 + 8 ms, round 2 1 + 2 ms.
	EXPECT_NEAR(total_ms_with_costs(r, {5000, 10000}, migration::kUnlimitedLink),
		    1 + 27.5 + 3.5, 1e-9);
	// A run that checked nothing for zero pays only for what it sent.
	auto unchecked = r;
	unchecked.zero_scan_cpu_ms = 0;
	unchecked.host_cpu_ms = 20;
	unchecked.round_log[0].critical_cpu_ms = 16;
	unchecked.round_log[1].critical_cpu_ms = 4;
	unchecked.total_ms = 1 + 16.5 + 4.5;
	EXPECT_NEAR(total_ms_with_costs(unchecked, {1, 40000}, migration::kUnlimitedLink),
		    1 + 32.5 + 8.5, 1e-9);
	// On a slow link the wire sets both rounds: 125 MB and 819200 bytes at 1 Gbit/s.
	const auto wide = run_with_page_counts(125000000);
	EXPECT_NEAR(total_ms_with_costs(wide, {5000, 10000}, 1e9 / 8), 1 + 1000.5 + 6.5536 + 0.5,
		    1e-9);
}

TEST(ComparisonReport, AnotherHostsCostsGiveTheHintedRatioForThatHost)
{
	auto base = run_with_page_counts(1250000);
	auto hinted = paced_run({{409600, 6}}, migration::kUnlimitedLink);
	hinted.round_log[0].pages_sent = 100;
	hinted.round_log[0].zero_pages = 200;
	hinted.pages_sent = 100;
	hinted.zero_pages = 200;
	hinted.zero_scan_cpu_ms = 3;
	hinted.host_cpu_ms = 6;
	ComparisonSetup setup = kSetup;
	setup.link_bytes_per_second = migration::kUnlimitedLink;
	setup.host_costs = HostCosts{5000, 10000};
	setup.host_costs_from = "--host-costs";
	const std::vector<ComparisonRow> rows = {{"fresh", "zero-detect", 0, base},
						 {"fresh", "hint+zero-detect", 0, hinted}};
	// Hinted: 300 checked at 10 us, 100 sent at 30 us = 6 ms; there 1.5 + 1 = 2.5 ms.
	// (1 + 3) / (1 + 27.5 + 3.5) = 0.125.
	const std::string text = comparison_tables(setup, rows);
	EXPECT_NE(
		text.find(
			"on the host of --host-costs (zero check 5000 ns, sending 10000 ns a page "
			"sent), at unlimited: time 0.125x"),
		std::string::npos)
		<< text;
	const nlohmann::ordered_json json = comparison_json(setup, rows);
	EXPECT_DOUBLE_EQ(json["summary"][0]["time_ratio_with_host_costs"]["median"].get<double>(),
			 0.125);
	EXPECT_EQ(json["setup"]["host_costs"]["from"], "--host-costs");
	EXPECT_TRUE(comparison_json(kSetup, rows)["setup"]["host_costs"].is_null());
}

TEST(Crossover, MaxBandwidthPacesTheLiveRoundsAtEachLinkAndNotStopAndCopy)
{
	const double gbit = 1e9 / 8;
	auto r = paced_run({{125000000, 50}, {12500000, 2}}, gbit);
	r.round_log.back().stop_and_copy = true;
	// Under max-bandwidth 1 Gbit/s on an unlimited link: the bulk pass 1000 ms on the wire,
	// stop-and-copy its CPU path alone.
	EXPECT_DOUBLE_EQ(total_ms_at_link(r, migration::kUnlimitedLink, gbit), 1 + 1000.5 + 2.5);
	// On a 10 Gbit/s link: the bulk pass still at the limit, stop-and-copy at the link.
	EXPECT_DOUBLE_EQ(total_ms_at_link(r, 10 * gbit, gbit), 1 + 1000.5 + 10.5);
	// A limit above the link changes nothing.
	EXPECT_DOUBLE_EQ(total_ms_at_link(r, gbit, 10 * gbit), total_ms_at_link(r, gbit));
}

TEST(Crossover, SpreadIsMedianMinMax)
{
	const Spread odd = spread_of({3, 1, 2});
	EXPECT_EQ(odd.median, 2);
	EXPECT_EQ(odd.min, 1);
	EXPECT_EQ(odd.max, 3);
	EXPECT_EQ(spread_of({4, 1, 2, 3}).median, 2.5);
	EXPECT_EQ(spread_of({}).count, 0u);
}

TEST(ComparisonReport, HintedAgainstZeroDetectIsPairedRunByRunWithItsCrossover)
{
	const double gbit = 1e9 / 8;
	std::vector<ComparisonRow> rows;
	// zero-detect: CPU-bound (400 ms), few bytes; hinted: 40 ms of CPU, same bytes.
	for (unsigned run = 0; run < 3; run++) {
		ComparisonRow base{"fresh", "zero-detect", run, paced_run({{125000000, 400.0 + run}}, 10 * gbit)};
		ComparisonRow hinted{"fresh", "hint+zero-detect", run, paced_run({{125000000, 40}}, 10 * gbit)};
		rows.push_back(base);
		rows.push_back(hinted);
	}
	const std::string text = comparison_tables(kSetup, rows);
	// At 10 Gbit/s (the runs' own link): 101.5 / 402.5 (median run) = 0.252x.
	EXPECT_NE(text.find("hint+zero-detect against zero-detect (3 run(s), median (min-max)): time 0.252x"),
		  std::string::npos)
		<< text;
	// At 1 Gbit/s both take 1000 ms on the wire: 1001.5 / 1001.5.
	EXPECT_NE(text.find("crossover, time ratio by link: 1 Gbit/s 1.000x"), std::string::npos) << text;
	const nlohmann::ordered_json json = comparison_json(kSetup, rows);
	ASSERT_EQ(json["summary"].size(), 1u);
	const auto& summary = json["summary"][0];
	EXPECT_EQ(summary["runs"], 3u);
	EXPECT_DOUBLE_EQ(summary["bytes_ratio"]["median"].get<double>(), 1.0);
	ASSERT_EQ(summary["crossover"].size(), 5u);
	EXPECT_EQ(summary["crossover"][0]["link_gbit"], 1.0);
	EXPECT_TRUE(summary["crossover"][4]["link_gbit"].is_null());
	// Unlimited: 41.5 over 401.5..403.5.
	EXPECT_NEAR(summary["crossover"][4]["time_ratio"]["median"].get<double>(), 41.5 / 402.5, 1e-12);
	EXPECT_NEAR(summary["crossover"][4]["time_ratio"]["min"].get<double>(), 41.5 / 403.5, 1e-12);
}

// A migration that did not converge (the guest dirties faster than the link sends) says so in
// its cell, with the dirty rate against the rate sent, as QEMU's query-migrate would show
// them; its total is a lower bound (">"), it has no downtime and no ratio, and its workload
// no hint+zero-detect summary.
TEST(ComparisonReport, ARunThatDidNotConvergeSaysSoWithItsDirtyRateAgainstTheRateSent)
{
	std::vector<ComparisonRow> rows;
	for (unsigned run = 0; run < 2; run++) {
		ComparisonRow base = row("db", "zero-detect", 90000, 368640000, 30123.4);
		ComparisonRow hinted = row("db", "hint+zero-detect", 80000, 327680000, 29000);
		for (ComparisonRow* r : {&base, &hinted}) {
			r->run = run;
			r->result.converged = false;
			r->result.rounds = 31;
			r->result.dirty_bytes_per_second = 200.0 * (1 << 20);
			r->result.sent_bytes_per_second = 119.0 * (1 << 20);
			r->result.pending_bytes = 64.0 * (1 << 20);
			r->result.threshold_bytes = 35.0 * (1 << 20);
		}
		rows.push_back(base);
		rows.push_back(hinted);
	}
	ComparisonSetup setup = kSetup;
	setup.max_rounds = 30;
	const std::string text = comparison_tables(setup, rows);
	EXPECT_NE(text.find("yes; 2 of 2 runs did not converge: the guest dirtied 200.0 MiB/s "
			    "against 119.0 MiB/s "
			    "sent, 64.0 MiB dirty at the last sync where 300 ms of downtime let "
			    "35.0 MiB go; "
			    "stopped after 30 rounds"),
		  std::string::npos)
		<< text;
	EXPECT_NE(text.find(">30123.4"), std::string::npos) << text;
	EXPECT_NE(text.find("The model stops it after 30 rounds"), std::string::npos) << text;
	EXPECT_EQ(text.find("hint+zero-detect against zero-detect ("), std::string::npos) << text;
	const nlohmann::ordered_json json = comparison_json(setup, rows);
	EXPECT_FALSE(json["results"][0]["converged"].get<bool>());
	EXPECT_DOUBLE_EQ(json["results"][0]["dirty_bytes_per_second"].get<double>(),
			 200.0 * (1 << 20));
	EXPECT_DOUBLE_EQ(json["results"][0]["sent_bytes_per_second"].get<double>(),
			 119.0 * (1 << 20));
	EXPECT_EQ(json["setup"]["max_rounds"], 30u);
	EXPECT_TRUE(json["summary"].empty());
}

// The hint+zero-detect summary pairs only runs that both converged.
TEST(ComparisonReport, PairsWithARunThatDidNotConvergeAreLeftOutOfTheSummary)
{
	const double gbit = 1e9 / 8;
	std::vector<ComparisonRow> rows;
	for (unsigned run = 0; run < 3; run++) {
		ComparisonRow base{"busy", "zero-detect", run,
				   paced_run({{125000000, 400.0}}, 10 * gbit)};
		ComparisonRow hinted{"busy", "hint+zero-detect", run,
				     paced_run({{125000000, 40}}, 10 * gbit)};
		base.result.rounds = hinted.result.rounds = 2;
		if (run == 1) {
			base.result.converged = false;
			base.result.rounds = 31;
		}
		rows.push_back(base);
		rows.push_back(hinted);
	}
	const std::string text = comparison_tables(kSetup, rows);
	EXPECT_NE(text.find("did not converge: a guest that keeps"), std::string::npos) << text;
	// The median zero-detect run converged; its cell still says one of three did not.
	EXPECT_NE(text.find("yes; 1 of 3 runs did not converge: the guest dirtied"),
		  std::string::npos)
		<< text;
	EXPECT_NE(text.find("hint+zero-detect against zero-detect (2 run(s)"), std::string::npos)
		<< text;
	const nlohmann::ordered_json json = comparison_json(kSetup, rows);
	ASSERT_EQ(json["summary"].size(), 1u);
	EXPECT_EQ(json["summary"][0]["runs"], 2u);
}

} // namespace
} // namespace vbsim
