// SPDX-License-Identifier: GPL-2.0
//
// A workload users describe for `vballoon-sim compare`: a flat JSON object (--workload-file)
// and KEY=VALUE settings (--workload-set) onto the generator's description (vbw_params,
// device-sim/migration/workload_generator.h). The generator's own key table
// (vbw_set_param) sets and checks every key, the same one the guest binary vbwork parses
// its KEY=VALUE arguments with, so a description means the same in the model and in a real
// guest. Besides the generator's keys a file may give "name" (the tables' name for it),
// "ram_mib" (the guest it describes) and "comment" (ignored).
#ifndef VBALLOON_TOOLS_WORKLOAD_FILE_H
#define VBALLOON_TOOLS_WORKLOAD_FILE_H

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "migration/workload_generator.h"

namespace vbsim
{

struct WorkloadDescription {
	std::string name = "described";
	std::optional<uint32_t> ram_mib; // the guest's RAM, when the description says
	vbw_params params = vbw_empty_params();
};

// Each returns "" on success, or why not, naming the key (nothing is changed then).
// A JSON object: numbers (flags: also true/false), "name" a string, "ram_mib" a whole
// number of MiB within [min_ram_mib, max_ram_mib].
std::string apply_workload_json(const nlohmann::json& object, uint32_t min_ram_mib,
				uint32_t max_ram_mib, WorkloadDescription& description);
// A file holding such an object.
std::string read_workload_file(const std::string& path, uint32_t min_ram_mib, uint32_t max_ram_mib,
			       WorkloadDescription& description);
// "KEY=VALUE", one of the generator's keys (not name or ram_mib: those are options of their own).
std::string apply_workload_setting(const std::string& setting, WorkloadDescription& description);
// Whether the description can run in a guest of ram_mib ("" or why, naming the keys).
std::string check_workload(const WorkloadDescription& description, uint32_t ram_mib);

} // namespace vbsim

#endif
