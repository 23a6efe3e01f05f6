// SPDX-License-Identifier: GPL-2.0
//
// The workload generator's description (workload_generator.h): its keys as vbw_set_param
// parses them for compare's JSON files and vbwork's KEY=VALUE arguments (every error names
// its key), the checks of a whole description, and the presets: fresh, freed and busy are
// descriptions that do exactly what the three fixed workloads did.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "migration/workload_generator.h"

namespace
{

constexpr uint64_t kMib = 1ull << 20;

// Every call the generator makes, hashed (FNV-1a over each argument), with the stats.
struct Recorder {
	uint64_t hash = 1469598103934665603ull;
	std::vector<uint32_t> released;

	void mix(uint64_t v)
	{
		for (int i = 0; i < 8; i++) {
			hash ^= (v >> (8 * i)) & 0xff;
			hash *= 1099511628211ull;
		}
	}
	static uint64_t allocate(void* ctx, uint32_t region, uint64_t pages)
	{
		auto* r = static_cast<Recorder*>(ctx);
		r->mix(1);
		r->mix(region);
		r->mix(pages);
		return pages;
	}
	static void write(void* ctx, uint32_t region, uint64_t first, uint64_t count,
			  uint64_t stamp, vbw_path path)
	{
		auto* r = static_cast<Recorder*>(ctx);
		for (uint64_t v :
		     {uint64_t{2}, uint64_t{region}, first, count, stamp, uint64_t(path)})
			r->mix(v);
	}
	static void release(void* ctx, uint32_t region)
	{
		auto* r = static_cast<Recorder*>(ctx);
		r->mix(3);
		r->mix(region);
		r->released.push_back(region);
	}
};

struct GeneratorRun {
	vbw_stats stats;
	uint64_t hash;
	std::vector<uint32_t> released;
};

// prepare, then 2 s of the clock in 1 ms steps, as the harness the expectations came from.
GeneratorRun run(const vbw_params& params, uint64_t ram_bytes)
{
	Recorder recorder;
	const vbw_ops ops = {&recorder, &Recorder::allocate, &Recorder::write, &Recorder::release};
	auto state = std::make_unique<vbw_state>();
	vbw_init(state.get(), &params, ram_bytes, &ops);
	vbw_prepare(state.get());
	vbw_start(state.get(), 0);
	for (double t = 0; t <= 2000; t += 1)
		while (vbw_step(state.get(), t, 256) != 0) {
		}
	return {state->stats, recorder.hash, recorder.released};
}

// Field by field (a memcmp would compare padding too).
bool same(const vbw_params& a, const vbw_params& b)
{
	return a.working_set_bytes == b.working_set_bytes && a.freed_bytes == b.freed_bytes &&
	       a.freed_fraction == b.freed_fraction && a.hot_bytes == b.hot_bytes &&
	       a.hot_bytes_per_second == b.hot_bytes_per_second && a.cache_bytes == b.cache_bytes &&
	       a.cache_bytes_per_second == b.cache_bytes_per_second &&
	       a.arena_bytes == b.arena_bytes && a.live_bytes == b.live_bytes &&
	       a.churn_bytes_per_second == b.churn_bytes_per_second &&
	       a.random_frees == b.random_frees && a.warmup_ms == b.warmup_ms && a.seed == b.seed &&
	       a.init_on_free == b.init_on_free && a.init_on_alloc == b.init_on_alloc;
}

std::string set(vbw_params& p, const char* key, const char* value)
{
	char error[256] = "";
	return vbw_set_param(&p, key, value, error, sizeof(error)) == 0 ? "" : error;
}

std::string check(const vbw_params& p, uint64_t ram_bytes)
{
	char error[256] = "";
	return vbw_check_params(&p, ram_bytes, error, sizeof(error)) == 0 ? "" : error;
}

// What the three fixed workloads of 0f650ea (vbw_init(kind, vbw_default_params())) did
// under this harness: every allocation, write (region, pages, stamp, path) and release in
// order, hashed, and the stats. The presets must do the same calls in the same order.
struct Before {
	vbw_kind kind;
	uint64_t ram_mib;
	uint64_t written, freed, allocations, hot, cache, arena;
	uint64_t hash;
};
const Before kBefore[] = {
	{VBW_FRESH, 64, 32768, 0, 1, 0, 0, 0, 0x9067afb7166ecb81ull},
	{VBW_FRESH, 2048, 32768, 0, 1, 0, 0, 0, 0x9067afb7166ecb81ull},
	{VBW_FREED, 64, 32768, 0, 2, 0, 0, 0, 0x7c3185dd72139e63ull},
	{VBW_FREED, 2048, 401408, 368640, 2, 0, 0, 0, 0x3e8f496308133452ull},
	{VBW_BUSY, 64, 169984, 16384, 163, 32768, 2048, 81920, 0x370c9a60582b3a84ull},
	{VBW_BUSY, 2048, 169984, 16384, 163, 32768, 2048, 81920, 0x370c9a60582b3a84ull},
};

TEST(WorkloadPresets, DoWhatTheFixedWorkloadsDidCallForCall)
{
	for (const Before& b : kBefore) {
		const GeneratorRun r = run(vbw_preset(b.kind), b.ram_mib * kMib);
		const std::string what = std::string(vbw_kind_name(b.kind)) + " at " +
					 std::to_string(b.ram_mib) + " MiB";
		EXPECT_EQ(r.stats.pages_written, b.written) << what;
		EXPECT_EQ(r.stats.pages_freed, b.freed) << what;
		EXPECT_EQ(r.stats.allocations, b.allocations) << what;
		EXPECT_EQ(r.stats.hot_pages_written, b.hot) << what;
		EXPECT_EQ(r.stats.cache_pages_written, b.cache) << what;
		EXPECT_EQ(r.stats.arena_pages_written, b.arena) << what;
		EXPECT_EQ(r.hash, b.hash) << what;
	}
}

TEST(WorkloadPresets, OnlyBusyRunsWhileMigrating)
{
	const vbw_params fresh = vbw_preset(VBW_FRESH), freed = vbw_preset(VBW_FREED),
			 busy = vbw_preset(VBW_BUSY);
	const vbw_params empty = vbw_empty_params();
	EXPECT_FALSE(vbw_runs_while_migrating(&fresh));
	EXPECT_FALSE(vbw_runs_while_migrating(&freed));
	EXPECT_TRUE(vbw_runs_while_migrating(&busy));
	EXPECT_FALSE(vbw_runs_while_migrating(&empty));
}

// A description set key by key from vbw_describe's text is the description it came from.
TEST(WorkloadDescription, DescribeReadsBackToTheSameDescription)
{
	for (vbw_kind kind : {VBW_FRESH, VBW_FREED, VBW_BUSY}) {
		const vbw_params preset = vbw_preset(kind);
		char text[1024];
		vbw_describe(&preset, text, sizeof(text));
		vbw_params back = vbw_empty_params();
		std::string rest = text;
		while (!rest.empty()) {
			const size_t space = rest.find(' ');
			const std::string item = rest.substr(0, space);
			rest = space == std::string::npos ? "" : rest.substr(space + 1);
			const size_t eq = item.find('=');
			ASSERT_NE(eq, std::string::npos) << item;
			EXPECT_EQ(
				set(back, item.substr(0, eq).c_str(), item.substr(eq + 1).c_str()),
				"")
				<< item;
		}
		EXPECT_TRUE(same(back, preset)) << text;
	}
}

TEST(WorkloadDescription, KeysSetTheirFieldsInTheirUnits)
{
	vbw_params p = vbw_empty_params();
	EXPECT_EQ(set(p, "working_set_mib", "4096"), "");
	EXPECT_EQ(set(p, "freed_mib", "20480"), "");
	EXPECT_EQ(set(p, "hot_mib", "0.5"), "");
	EXPECT_EQ(set(p, "hot_mib_s", "1024"), "");
	EXPECT_EQ(set(p, "arena_kib", "2048"), "");
	EXPECT_EQ(set(p, "random_frees", "false"), "");
	EXPECT_EQ(set(p, "init_on_free", "1"), "");
	EXPECT_EQ(set(p, "init_on_alloc", "true"), "");
	EXPECT_EQ(set(p, "seed", "7"), "");
	EXPECT_EQ(p.working_set_bytes, 4096 * kMib);
	EXPECT_EQ(p.freed_bytes, 20480 * kMib);
	EXPECT_EQ(p.hot_bytes, kMib / 2);
	EXPECT_EQ(p.hot_bytes_per_second, 1024.0 * kMib);
	EXPECT_EQ(p.arena_bytes, 2 * kMib);
	EXPECT_EQ(p.random_frees, 0);
	EXPECT_EQ(p.init_on_free, 1);
	EXPECT_EQ(p.init_on_alloc, 1);
	EXPECT_EQ(p.seed, 7u);
	// Sizes are whole pages: 10 KiB of arena is two pages.
	EXPECT_EQ(set(p, "arena_kib", "10"), "");
	EXPECT_EQ(p.arena_bytes, 8192u);
	// Every key the table has can be set.
	for (unsigned i = 0; vbw_key(i); i++)
		EXPECT_EQ(set(p, vbw_key(i), "0"), "") << vbw_key(i);
}

// Unknown keys, text that is no number and values out of range fail, and the error names the
// key; the description is left as it was.
TEST(WorkloadDescription, BadKeysAndValuesAreRefusedNamingTheKey)
{
	struct Case {
		const char* key;
		const char* value;
		const char* says;
	};
	const Case cases[] = {
		{"hot_mb", "4096", "unknown key \"hot_mb\""},
		{"hot_mib", "four", "\"hot_mib\": not a number"},
		{"hot_mib", "", "\"hot_mib\": not a number"},
		{"hot_mib", "12x", "\"hot_mib\": not a number"},
		{"hot_mib", "-1", "\"hot_mib\": -1 is out of range"},
		{"hot_mib", "nan", "\"hot_mib\": nan is out of range"},
		{"hot_mib", "inf", "\"hot_mib\": inf is out of range"},
		{"working_set_mib", "1e9", "\"working_set_mib\": 1e9 is out of range"},
		{"hot_mib_s", "2e6", "\"hot_mib_s\": 2e6 is out of range"},
		{"freed_fraction", "1.5", "\"freed_fraction\": 1.5 is out of range (0 to 1)"},
		{"arena_kib", "2", "\"arena_kib\": 2 is out of range"},
		{"random_frees", "2", "\"random_frees\": 2 is out of range"},
		{"init_on_free", "yes", "\"init_on_free\": not a number"},
		{"seed", "1.5", "\"seed\": 1.5 is out of range"},
		{"warmup_ms", "-5", "\"warmup_ms\": -5 is out of range"},
	};
	for (const Case& c : cases) {
		vbw_params p = vbw_preset(VBW_BUSY);
		const vbw_params before = p;
		const std::string error = set(p, c.key, c.value);
		EXPECT_NE(error.find(c.says), std::string::npos)
			<< c.key << "=" << c.value << ": " << error;
		EXPECT_TRUE(same(p, before)) << c.key << "=" << c.value;
	}
}

TEST(WorkloadDescription, ADescriptionThatCannotRunIsRefusedNamingItsKeys)
{
	const uint64_t ram = 1024 * kMib;
	EXPECT_EQ(check(vbw_preset(VBW_BUSY), ram), "");
	struct Case {
		std::vector<std::pair<const char*, const char*>> settings;
		const char* says;
	};
	const Case cases[] = {
		{{{"freed_mib", "100"}, {"freed_fraction", "0.5"}},
		 "\"freed_mib\" and \"freed_fraction\" both given"},
		{{{"working_set_mib", "512"}, {"freed_mib", "600"}},
		 "\"working_set_mib\" + \"freed_mib\" (1112 MiB) exceed"},
		{{{"working_set_mib", "512"}, {"hot_mib", "600"}},
		 "\"working_set_mib\" + \"hot_mib\" + \"cache_mib\" + \"live_mib\" (1112 MiB) "
		 "exceed the guest's RAM (1024 MiB)"},
		{{{"churn_mib_s", "10"}},
		 "\"live_mib\" must hold at least one arena of \"arena_kib\""},
		{{{"live_mib", "1"}, {"arena_kib", "2048"}},
		 "\"live_mib\" must hold at least one arena"},
		{{{"live_mib", "900"}, {"arena_kib", "4"}},
		 "\"live_mib\" / \"arena_kib\": at most 4096 arenas alive"},
		{{{"hot_mib_s", "10"}},
		 "\"hot_mib_s\" rewrites a hot set: \"hot_mib\" must be at least 4 KiB"},
		{{{"cache_mib_s", "10"}},
		 "\"cache_mib_s\" rewrites a cache: \"cache_mib\" must be at least 4 KiB"},
	};
	for (const Case& c : cases) {
		vbw_params p = vbw_empty_params();
		for (const auto& [key, value] : c.settings)
			ASSERT_EQ(set(p, key, value), "") << key;
		const std::string error = check(p, ram);
		EXPECT_NE(error.find(c.says), std::string::npos) << error;
	}
}

// freed_mib frees that much, freed_fraction a share of what the working set leaves.
TEST(WorkloadDescription, FreedMemoryIsASizeOrAShare)
{
	vbw_params p = vbw_empty_params();
	ASSERT_EQ(set(p, "working_set_mib", "16"), "");
	ASSERT_EQ(set(p, "freed_mib", "20"), "");
	GeneratorRun r = run(p, 64 * kMib);
	EXPECT_EQ(r.stats.pages_freed, 20 * 256u);
	EXPECT_EQ(r.stats.pages_written, 36 * 256u);
	p.freed_bytes = 0;
	ASSERT_EQ(set(p, "freed_fraction", "0.5"), "");
	r = run(p, 64 * kMib);
	EXPECT_EQ(r.stats.pages_freed, 24 * 256u);
}

// At the live cap, random_frees=false frees the oldest arena: arenas go in the order made.
TEST(WorkloadDescription, WithoutRandomFreesTheOldestArenaGoesFirst)
{
	vbw_params p = vbw_empty_params();
	for (auto [key, value] : {std::pair{"arena_kib", "64"},
				  {"live_mib", "1"},
				  {"churn_mib_s", "8"},
				  {"random_frees", "0"}})
		ASSERT_EQ(set(p, key, value), "") << key;
	ASSERT_EQ(check(p, 64 * kMib), "");
	const GeneratorRun oldest = run(p, 64 * kMib);
	// 16 arenas alive (slots 0..15, made in slot order), 8 MiB/s of 64 KiB arenas for 2 s.
	ASSERT_GT(oldest.released.size(), 32u);
	for (size_t i = 0; i < oldest.released.size(); i++)
		EXPECT_EQ(oldest.released[i], VBW_REGION_ARENA0 + i % 16) << i;
	ASSERT_EQ(set(p, "random_frees", "1"), "");
	const GeneratorRun shuffled = run(p, 64 * kMib);
	EXPECT_NE(shuffled.released, oldest.released);
	EXPECT_EQ(shuffled.stats.arena_pages_written, oldest.stats.arena_pages_written);
}

} // namespace
