// SPDX-License-Identifier: GPL-2.0
//
// The squeeze (issue 30): a guest with a page cache and a workload (pressure_model.h) whose
// balloon target is stepped up past what its working set leaves, second by second, with
// the pressure governor off or on. What `vballoon-sim squeeze` prints and the system tests
// check: the workload's throughput and refaults, and the balloon's size, per second.
#ifndef VBSIM_MACHINE_SQUEEZE_H
#define VBSIM_MACHINE_SQUEEZE_H

#include <cstdint>
#include <string>
#include <vector>

namespace vbsim
{

struct SqueezeOptions {
	uint64_t ram_mib = 512;
	uint64_t anon_mib = 64;	      // the workload's anonymous memory
	uint64_t file_mib = 160;      // its working set's page cache, read every second
	uint64_t cold_cache_mib = 96; // page cache read at boot, never again
	uint64_t refault_cost = 20;   // page touches of work one refault costs
	bool mapped_file = false;     // the working set's file is mapped (mmap), not read()
	// The balloon targets, one after the other, each held `step_seconds`.
	std::vector<uint64_t> target_mib = {128, 256, 384, 450};
	unsigned step_seconds = 30;
	unsigned baseline_seconds = 3; // the workload alone, before the first target
	bool governor = true;
	bool deflate_on_oom = true;
	uint64_t floor_mib = 0; // PressurePolicy::floor_pages, in MiB
};

struct SqueezeSecond {
	unsigned second = 0;
	uint64_t target_mib = 0;
	uint64_t balloon_pages = 0; // 4 KiB wire pages, after the second
	uint64_t refaults = 0;
	uint64_t alloc_stalls = 0;
	uint64_t throughput_permille = 0;
	bool oom = false;
};

struct SqueezeResult {
	std::vector<SqueezeSecond> seconds; // the baseline's first
	uint64_t baseline_refaults = 0;	    // over the baseline seconds
	// Times the balloon changed direction (growing, then shrinking, or back).
	unsigned direction_changes = 0;
	uint64_t give_back_wire_pages = 0;
	uint64_t held_steps = 0;
	uint64_t oom_notifications = 0;
	uint64_t floor_pages = 0;
	uint64_t actual_pages = 0;
	uint64_t target_pages = 0;
	std::vector<std::string> problems; // the machine's accounting, after the run
};

// Empty on success, else why the run could not be made.
std::string run_squeeze(const SqueezeOptions& options, SqueezeResult* result);

} // namespace vbsim

#endif
