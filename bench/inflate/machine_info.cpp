// SPDX-License-Identifier: GPL-2.0
#include "machine_info.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#ifndef VB_BENCH_BUILD_TYPE
#define VB_BENCH_BUILD_TYPE "unknown"
#endif

namespace vbbench
{

namespace
{

std::string first_line(const char* path)
{
	std::ifstream file(path);
	std::string line;
	if (!std::getline(file, line))
		return "unknown";
	return line;
}

// "Key: value" files (/proc/meminfo, /proc/cpuinfo): the value of the first line with key.
std::string field(const char* path, const std::string& key)
{
	std::ifstream file(path);
	std::string line;
	while (std::getline(file, line)) {
		if (line.compare(0, key.size(), key) != 0)
			continue;
		const size_t colon = line.find(':');
		if (colon == std::string::npos)
			continue;
		const size_t value = line.find_first_not_of(" \t", colon + 1);
		return value == std::string::npos ? "" : line.substr(value);
	}
	return "unknown";
}

uint64_t meminfo_bytes(const std::string& key)
{
	std::istringstream value(field("/proc/meminfo", key));
	uint64_t kib = 0;
	value >> kib;
	return kib << 10;
}

} // namespace

std::string load_average()
{
	std::istringstream line(first_line("/proc/loadavg"));
	std::string one, five, fifteen;
	line >> one >> five >> fifteen;
	return one + " " + five + " " + fifteen;
}

uint64_t mem_available_bytes()
{
	return meminfo_bytes("MemAvailable");
}

MachineInfo read_machine_info()
{
	MachineInfo info;
	const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	info.cpus = cpus > 0 ? static_cast<unsigned>(cpus) : 0;
	info.cpu_model = field("/proc/cpuinfo", "model name");
	struct utsname name;
	info.kernel = uname(&name) == 0 ? std::string(name.release) : "unknown";
	info.thp_enabled = first_line("/sys/kernel/mm/transparent_hugepage/enabled");
	info.thp_defrag = first_line("/sys/kernel/mm/transparent_hugepage/defrag");
	info.mem_total_bytes = meminfo_bytes("MemTotal");
	info.mem_available_bytes = mem_available_bytes();
#if defined(__clang__)
	info.compiler = "clang " __clang_version__;
#elif defined(__GNUC__)
	info.compiler = "g++ " __VERSION__;
#else
	info.compiler = "unknown";
#endif
	info.build_type = VB_BENCH_BUILD_TYPE;
	return info;
}

nlohmann::json to_json(const MachineInfo& info)
{
	return {{"cpus", info.cpus},
		{"cpu_model", info.cpu_model},
		{"kernel", info.kernel},
		{"thp_enabled", info.thp_enabled},
		{"thp_defrag", info.thp_defrag},
		{"mem_total_bytes", info.mem_total_bytes},
		{"mem_available_bytes", info.mem_available_bytes},
		{"compiler", info.compiler},
		{"build_type", info.build_type}};
}

} // namespace vbbench
