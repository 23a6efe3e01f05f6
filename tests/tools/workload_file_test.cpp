// SPDX-License-Identifier: GPL-2.0
//
// compare's described workloads (workload_file.h): JSON files and KEY=VALUE settings onto
// the generator's description; errors name the key and change nothing; the examples parse
// and fit their own guests.
#include "workload_file.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

namespace vbsim
{
namespace
{

constexpr uint32_t kMinRam = 64, kMaxRam = 256 * 1024;

std::string apply(const char* json, WorkloadDescription& d)
{
	return apply_workload_json(nlohmann::json::parse(json), kMinRam, kMaxRam, d);
}

TEST(WorkloadFile, AFlatObjectSetsTheDescription)
{
	WorkloadDescription d;
	ASSERT_EQ(
		apply(R"({"name": "db", "ram_mib": 4096, "comment": "anything", "working_set_mib": 1024,
			    "hot_mib": 256, "hot_mib_s": 300.5, "random_frees": false, "init_on_free": true})",
		      d),
		"");
	EXPECT_EQ(d.name, "db");
	ASSERT_TRUE(d.ram_mib);
	EXPECT_EQ(*d.ram_mib, 4096u);
	EXPECT_EQ(d.params.working_set_bytes, 1024ull << 20);
	EXPECT_EQ(d.params.hot_bytes, 256ull << 20);
	EXPECT_DOUBLE_EQ(d.params.hot_bytes_per_second, 300.5 * (1 << 20));
	EXPECT_EQ(d.params.random_frees, 0);
	EXPECT_EQ(d.params.init_on_free, 1);
	EXPECT_EQ(check_workload(d, 4096), "");
	// Keys not given keep the empty description's values.
	EXPECT_EQ(d.params.freed_bytes, 0u);
	EXPECT_EQ(d.params.seed, 1u);
}

TEST(WorkloadFile, ErrorsNameTheKeyAndChangeNothing)
{
	struct Case {
		const char* json;
		const char* says;
	};
	const Case cases[] = {
		{R"({"hot_mib": 1, "hot_mb": 2})",
		 "unknown key \"hot_mb\" (known: name, ram_mib, comment, working_set_mib"},
		{R"({"hot_mib": -4})", "\"hot_mib\": -4 is out of range"},
		{R"({"hot_mib": "4096"})", "\"hot_mib\": must be a number (got \"4096\")"},
		{R"({"hot_mib": true})", "\"hot_mib\": not a number: \"true\""},
		{R"({"hot_mib": [1]})", "\"hot_mib\": must be a number (got [1])"},
		{R"({"hot_mib": null})", "\"hot_mib\": must be a number (got null)"},
		{R"({"freed_fraction": 2})", "\"freed_fraction\": 2 is out of range (0 to 1)"},
		{R"({"ram_mib": 32})", "\"ram_mib\": 32 is out of range"},
		{R"({"ram_mib": 1024.5})", "\"ram_mib\": 1024.5 is out of range"},
		{R"({"name": ""})", "\"name\": must be a non-empty string"},
		{R"([1, 2])", "a workload description is a JSON object"},
	};
	for (const Case& c : cases) {
		WorkloadDescription d;
		d.params.hot_bytes = 1 << 20;
		const std::string error = apply(c.json, d);
		EXPECT_NE(error.find(c.says), std::string::npos) << c.json << ": " << error;
		EXPECT_EQ(d.params.hot_bytes, 1u << 20) << c.json;
		EXPECT_EQ(d.name, "described") << c.json;
	}
}

TEST(WorkloadFile, SettingsGoOverTheFile)
{
	WorkloadDescription d;
	ASSERT_EQ(apply(R"({"hot_mib": 64, "hot_mib_s": 100})", d), "");
	EXPECT_EQ(apply_workload_setting("hot_mib_s=512", d), "");
	EXPECT_DOUBLE_EQ(d.params.hot_bytes_per_second, 512.0 * (1 << 20));
	EXPECT_NE(apply_workload_setting("hot_mib_s", d).find("KEY=VALUE"), std::string::npos);
	EXPECT_NE(apply_workload_setting("name=x", d).find("unknown key \"name\""),
		  std::string::npos);
	EXPECT_NE(apply_workload_setting("hot_mib=abc", d).find("\"hot_mib\": not a number"),
		  std::string::npos);
	EXPECT_EQ(d.params.hot_bytes, 64u << 20);
}

TEST(WorkloadFile, AWholeDescriptionIsCheckedAgainstTheGuestsRam)
{
	WorkloadDescription d;
	ASSERT_EQ(
		apply(R"({"name": "big", "working_set_mib": 3000, "live_mib": 2000, "arena_kib": 2048})",
		      d),
		"");
	EXPECT_NE(check_workload(d, 4096).find(
			  "workload big: \"working_set_mib\" + \"hot_mib\" + \"cache_mib\" + "
			  "\"live_mib\" (5000 MiB) exceed the guest's RAM (4096 MiB)"),
		  std::string::npos)
		<< check_workload(d, 4096);
	EXPECT_EQ(check_workload(d, 8192), "");
	d.ram_mib = 16384;
	EXPECT_NE(check_workload(d, 8192).find("describes a 16384 MiB guest, not 8192 MiB"),
		  std::string::npos);
}

TEST(WorkloadFile, FilesThatCannotBeReadOrAreNotJsonSaySo)
{
	WorkloadDescription d;
	EXPECT_NE(read_workload_file("/nonexistent/w.json", kMinRam, kMaxRam, d)
			  .find("cannot read /nonexistent/w.json"),
		  std::string::npos);
	char path[] = "/tmp/vballoon-workload-test-XXXXXX";
	const int fd = mkstemp(path);
	ASSERT_GE(fd, 0);
	close(fd);
	std::ofstream(path) << "{\"hot_mib\": 1,}";
	EXPECT_NE(read_workload_file(path, kMinRam, kMaxRam, d).find("is not JSON"),
		  std::string::npos);
	std::ofstream(path) << "{\"hot_mib\": 1, \"cold_mib\": 2}";
	EXPECT_NE(read_workload_file(path, kMinRam, kMaxRam, d)
			  .find(std::string(path) + ": unknown key \"cold_mib\""),
		  std::string::npos);
	std::remove(path);
}

// The examples under tools/vballoon-sim/examples are descriptions that fit their guests.
TEST(WorkloadFile, TheExamplesParseAndFitTheirGuests)
{
	for (const char* name : {"database-64g.json", "database-8g.json"}) {
		WorkloadDescription d;
		const std::string path = std::string(VB_WORKLOAD_EXAMPLES) + "/" + name;
		ASSERT_EQ(read_workload_file(path, kMinRam, kMaxRam, d), "") << path;
		ASSERT_TRUE(d.ram_mib) << path;
		EXPECT_EQ(check_workload(d, *d.ram_mib), "") << path;
		EXPECT_TRUE(vbw_runs_while_migrating(&d.params)) << path;
	}
}

} // namespace
} // namespace vbsim
