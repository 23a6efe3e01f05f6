// SPDX-License-Identifier: GPL-2.0
//
// How and where the benchmark ran, for its header: CPUs, kernel, THP settings, memory,
// load, compiler. Read from /proc and /sys; a field that cannot be read says "unknown".
#ifndef VBALLOON_BENCH_INFLATE_MACHINE_INFO_H
#define VBALLOON_BENCH_INFLATE_MACHINE_INFO_H

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace vbbench
{

struct MachineInfo {
	unsigned cpus = 0; // online, as nproc counts them
	std::string cpu_model;
	std::string kernel;
	std::string thp_enabled; // /sys/kernel/mm/transparent_hugepage/enabled, as written
	std::string thp_defrag;
	uint64_t mem_total_bytes = 0;
	uint64_t mem_available_bytes = 0;
	std::string compiler;
	std::string build_type;
};

MachineInfo read_machine_info();
// The three load averages of /proc/loadavg ("1.00 0.50 0.25").
std::string load_average();
// MemAvailable from /proc/meminfo, in bytes; 0 when unreadable.
uint64_t mem_available_bytes();
nlohmann::json to_json(const MachineInfo& info);

} // namespace vbbench

#endif
