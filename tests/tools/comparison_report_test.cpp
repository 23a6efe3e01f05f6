// SPDX-License-Identifier: GPL-2.0
//
// What `vballoon-sim compare` prints and writes, on results built here: the JSON's shape and
// field order, CSV lines matching it, one table per workload with ratios against `none`.
#include <gtest/gtest.h>

#include <sstream>
#include <string>
#include <vector>

#include "comparison_report.h"

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
	r.result.converged = true;
	r.result.total_ms = total_ms;
	r.result.downtime_ms = 20.5;
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

const ComparisonSetup kSetup{512, 1e9, 2, 300};

TEST(ComparisonReport, JsonHasOneResultPerRowWithTheDocumentedFieldsInOrder)
{
	const nlohmann::ordered_json json = comparison_json(kSetup, sample_rows());
	ASSERT_TRUE(json.contains("results"));
	ASSERT_EQ(json["results"].size(), 4u);
	const std::vector<std::string> fields = {"workload",	"strategy",	"bytes_sent",
						 "pages_sent",	"host_cpu_ms",	"guest_cpu_ms",
						 "rounds",	"total_ms",	"downtime_ms",
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
	EXPECT_EQ(line, "workload,strategy,bytes_sent,pages_sent,host_cpu_ms,guest_cpu_ms,rounds,"
			"total_ms,downtime_ms,verified");
	std::vector<std::string> lines;
	while (std::getline(csv, line))
		lines.push_back(line);
	ASSERT_EQ(lines.size(), 4u);
	EXPECT_EQ(lines[1], "fresh,zero-detect,41000,10,12.500,3.000,4,100.000,20.500,true");
	EXPECT_EQ(lines[3], "freed,hint,2048004000,500,12.500,3.000,4,200.000,20.500,false");
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

TEST(ComparisonReport, RowsWithoutABaselineShowNoRatio)
{
	const std::string text = comparison_tables(kSetup, {row("busy", "hint", 5, 20480, 50)});
	const std::string hint_line = text.substr(text.find("hint ", text.find("workload busy")));
	EXPECT_EQ(hint_line.find('x'), std::string::npos) << hint_line;
}

} // namespace
} // namespace vbsim
