// SPDX-License-Identifier: GPL-2.0
//
// vballoon-bench-dirty-log: what marking a page dirty costs, by method and write pattern,
// and what a harvest costs, swap against get-and-clear. Ratios are printed against the
// per-page atomic OR (marking) and get-and-clear (harvest), measured in the same run.
//
// Marking methods:
//   plain     non-atomic OR (loses bits with two writers: the floor, not an option)
//   atomic    one atomic fetch_or per page (the baseline every writer can use)
//   batched   the vhost dirty-log thread's shape (DPDK, 2018; docs/references.md): a
//             32-entry cache of (word, mask) searched linearly,
//             one atomic OR per cached word on flush
//   adaptive  DirtyMarker: a one-word cache that steps aside when writes have no locality
//   range     DirtyLog::mark_range over a whole run (one atomic OR per word)
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "migration/dirty_log.h"

using vbsim::DirtyLog;
using vbsim::DirtyMarker;

namespace
{

constexpr uint64_t kPages = 2ull << 20; // an 8 GiB guest
constexpr uint64_t kMarksPerIteration = 1 << 16;

enum Pattern { kSequential, kStrided, kRandom };
const char* const kPatternNames[] = {"sequential", "strided", "random"};

std::vector<uint64_t> make_pages(Pattern pattern)
{
	std::vector<uint64_t> pages(kMarksPerIteration);
	std::mt19937_64 random(42);
	for (uint64_t i = 0; i < kMarksPerIteration; i++) {
		switch (pattern) {
		case kSequential: pages[i] = i; break;
		case kStrided: pages[i] = (i * 9) % kPages; break; // 7 pages per bitmap word
		case kRandom: pages[i] = random() % kPages; break;
		}
	}
	return pages;
}

// The vhost dirty-log thread's cache: up to 32 (word, mask) entries, searched linearly on
// every mark.
class SearchedCache
{
public:
	explicit SearchedCache(std::atomic<uint64_t>* bitmap) : bitmap_(bitmap) {}
	void mark(uint64_t page)
	{
		const uint64_t word = page / 64;
		const uint64_t bit = uint64_t{1} << (page % 64);
		for (unsigned i = 0; i < used_; i++)
			if (words_[i] == word) {
				masks_[i] |= bit;
				return;
			}
		if (used_ == kEntries)
			flush();
		words_[used_] = word;
		masks_[used_] = bit;
		used_++;
	}
	void flush()
	{
		for (unsigned i = 0; i < used_; i++)
			bitmap_[words_[i]].fetch_or(masks_[i], std::memory_order_release);
		used_ = 0;
	}

private:
	static constexpr unsigned kEntries = 32;
	std::atomic<uint64_t>* bitmap_;
	uint64_t words_[kEntries];
	uint64_t masks_[kEntries];
	unsigned used_ = 0;
};

void BM_MarkPlain(benchmark::State& state)
{
	const auto pages = make_pages(Pattern(state.range(0)));
	std::vector<uint64_t> bitmap(kPages / 64);
	for (auto _ : state) {
		for (uint64_t page : pages)
			bitmap[page / 64] |= uint64_t{1} << (page % 64);
		benchmark::ClobberMemory();
	}
	state.SetItemsProcessed(state.iterations() * kMarksPerIteration);
}

void BM_MarkAtomic(benchmark::State& state)
{
	const auto pages = make_pages(Pattern(state.range(0)));
	std::unique_ptr<std::atomic<uint64_t>[]> bitmap(new std::atomic<uint64_t>[kPages / 64]());
	for (auto _ : state)
		for (uint64_t page : pages)
			bitmap[page / 64].fetch_or(uint64_t{1} << (page % 64), std::memory_order_release);
	state.SetItemsProcessed(state.iterations() * kMarksPerIteration);
}

void BM_MarkBatched(benchmark::State& state)
{
	const auto pages = make_pages(Pattern(state.range(0)));
	std::unique_ptr<std::atomic<uint64_t>[]> bitmap(new std::atomic<uint64_t>[kPages / 64]());
	for (auto _ : state) {
		SearchedCache cache(bitmap.get());
		for (uint64_t page : pages)
			cache.mark(page);
		cache.flush();
	}
	state.SetItemsProcessed(state.iterations() * kMarksPerIteration);
}

void BM_MarkAdaptive(benchmark::State& state)
{
	const auto pages = make_pages(Pattern(state.range(0)));
	DirtyLog log(kPages);
	for (auto _ : state) {
		DirtyMarker marker(&log);
		for (uint64_t page : pages)
			marker.mark(page);
	}
	state.SetItemsProcessed(state.iterations() * kMarksPerIteration);
}

void BM_MarkDirtyLogPage(benchmark::State& state)
{
	const auto pages = make_pages(Pattern(state.range(0)));
	DirtyLog log(kPages);
	for (auto _ : state)
		for (uint64_t page : pages)
			log.mark_page(page);
	state.SetItemsProcessed(state.iterations() * kMarksPerIteration);
}

// Marking a 2 MiB run (a workload's allocation) as a range: one atomic per 64 pages.
void BM_MarkRange(benchmark::State& state)
{
	DirtyLog log(kPages);
	for (auto _ : state)
		for (uint64_t first = 0; first < kMarksPerIteration; first += 512)
			log.mark_range(first, 512);
	state.SetItemsProcessed(state.iterations() * kMarksPerIteration);
}

// Harvest of an 8 GiB guest's log with state.range(0) per mille of pages dirty.
template <bool kSwap> void BM_Harvest(benchmark::State& state)
{
	DirtyLog log(kPages);
	std::mt19937_64 random(7);
	std::vector<uint64_t> dirty(kPages * uint64_t(state.range(0)) / 1000);
	for (uint64_t& page : dirty)
		page = random() % kPages;
	std::vector<uint64_t> into(log.words());
	for (auto _ : state) {
		state.PauseTiming();
		for (uint64_t page : dirty)
			log.mark_page(page);
		std::fill(into.begin(), into.end(), 0);
		state.ResumeTiming();
		benchmark::DoNotOptimize(kSwap ? log.harvest(into.data()) : log.harvest_get_and_clear(into.data()));
	}
}

// The same harvest while another thread keeps marking random pages, as vCPUs and devices
// do during a real harvest: get-and-clear takes words the writer is writing, swap scans a
// bitmap nobody writes.
template <bool kSwap> void BM_HarvestWhileWriting(benchmark::State& state)
{
	DirtyLog log(kPages);
	std::atomic<bool> stop{false};
	std::thread writer([&] {
		std::mt19937_64 random(3);
		while (!stop.load(std::memory_order_relaxed))
			for (int i = 0; i < 1024; i++)
				log.mark_page(random() % kPages);
	});
	std::vector<uint64_t> into(log.words());
	for (auto _ : state) {
		benchmark::DoNotOptimize(kSwap ? log.harvest(into.data()) : log.harvest_get_and_clear(into.data()));
		state.PauseTiming();
		std::fill(into.begin(), into.end(), 0);
		state.ResumeTiming();
	}
	stop = true;
	writer.join();
}

BENCHMARK(BM_MarkPlain)->DenseRange(0, 2);
BENCHMARK(BM_MarkAtomic)->DenseRange(0, 2);
BENCHMARK(BM_MarkBatched)->DenseRange(0, 2);
BENCHMARK(BM_MarkAdaptive)->DenseRange(0, 2);
BENCHMARK(BM_MarkDirtyLogPage)->DenseRange(0, 2);
BENCHMARK(BM_MarkRange);
BENCHMARK(BM_Harvest<false>)->Arg(0)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Harvest<true>)->Arg(0)->Arg(10)->Arg(100)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HarvestWhileWriting<false>)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_HarvestWhileWriting<true>)->Unit(benchmark::kMicrosecond);

// Whether a run measured nothing (it failed or was skipped). Google Benchmark 1.8 replaced
// Run::error_occurred (Debian 12 has 1.7) with Run::skipped (Debian 13 has 1.9), whose zero
// is NotSkipped; this builds against both.
template <typename BenchmarkRun> bool measured_nothing(const BenchmarkRun& run)
{
	if constexpr (requires { run.skipped; })
		return run.skipped != decltype(run.skipped){};
	else
		return run.error_occurred;
}

// Keeps every run's CPU time per item (per iteration for harvests) to print the ratios at
// the end. CPU time, not wall time: the machine is shared, and wall time counts the rest.
class RatioReporter : public benchmark::ConsoleReporter
{
public:
	void ReportRuns(const std::vector<Run>& runs) override
	{
		for (const Run& run : runs)
			if (run.run_type == Run::RT_Iteration && !measured_nothing(run))
				ns_[run.benchmark_name()] = run.GetAdjustedCPUTime() /
							    benchmark::GetTimeUnitMultiplier(run.time_unit) * 1e9 /
							    (run.benchmark_name().find("Harvest") == std::string::npos
								     ? double(kMarksPerIteration)
								     : 1.0);
		ConsoleReporter::ReportRuns(runs);
	}

	void print_ratios() const
	{
		std::printf("\nMarking, ns per page and ratio to the per-page atomic (lower is better)\n");
		std::printf("%-12s %18s %18s %18s\n", "method", kPatternNames[0], kPatternNames[1], kPatternNames[2]);
		const char* methods[][2] = {{"plain", "BM_MarkPlain"},
					    {"atomic", "BM_MarkAtomic"},
					    {"batched", "BM_MarkBatched"},
					    {"adaptive", "BM_MarkAdaptive"},
					    {"log.mark", "BM_MarkDirtyLogPage"}};
		for (auto& method : methods) {
			std::printf("%-12s", method[0]);
			for (int p = 0; p < 3; p++) {
				const double ns = get(std::string(method[1]) + "/" + std::to_string(p));
				const double base = get("BM_MarkAtomic/" + std::to_string(p));
				std::printf(" %7.2f ns %5.2fx", ns, base > 0 ? ns / base : 0);
			}
			std::printf("\n");
		}
		std::printf("%-12s %7.2f ns per page as 2 MiB runs (one atomic OR per 64 pages)\n", "range",
			    get("BM_MarkRange"));
		std::printf("\nHarvest of 2M pages, us, swap against get-and-clear\n");
		for (int per_mille : {0, 10, 100}) {
			const double clear = get("BM_Harvest<false>/" + std::to_string(per_mille)) / 1e3;
			const double swap = get("BM_Harvest<true>/" + std::to_string(per_mille)) / 1e3;
			std::printf("%5.1f%% dirty: get-and-clear %8.1f us, swap %8.1f us, ratio %.2fx\n",
				    per_mille / 10.0, clear, swap, clear > 0 ? swap / clear : 0);
		}
		const double clear = get("BM_HarvestWhileWriting<false>") / 1e3;
		const double swap = get("BM_HarvestWhileWriting<true>") / 1e3;
		std::printf("with a writer: get-and-clear %8.1f us, swap %8.1f us, ratio %.2fx\n", clear, swap,
			    clear > 0 ? swap / clear : 0);
	}

private:
	double get(const std::string& name) const
	{
		auto it = ns_.find(name);
		return it == ns_.end() ? 0 : it->second;
	}
	std::map<std::string, double> ns_;
};

} // namespace

int main(int argc, char** argv)
{
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 1;
	RatioReporter reporter;
	benchmark::RunSpecifiedBenchmarks(&reporter);
	reporter.print_ratios();
	benchmark::Shutdown();
	return 0;
}
