// SPDX-License-Identifier: GPL-2.0
#include "workload_file.h"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <fstream>

namespace vbsim
{

namespace
{

constexpr unsigned kErrorBytes = 256;

std::string set_key(vbw_params& params, const std::string& key, const std::string& value)
{
	char error[kErrorBytes];
	if (vbw_set_param(&params, key.c_str(), value.c_str(), error, sizeof(error)) != 0)
		return error;
	return "";
}

std::string known_keys()
{
	std::string keys = "name, ram_mib, comment";
	for (unsigned i = 0; vbw_key(i); i++)
		keys += fmt::format(", {}", vbw_key(i));
	return keys;
}

} // namespace

std::string apply_workload_json(const nlohmann::json& object, uint32_t min_ram_mib,
				uint32_t max_ram_mib, WorkloadDescription& description)
{
	if (!object.is_object())
		return "a workload description is a JSON object ({\"key\": value, ...})";
	WorkloadDescription d = description;
	for (const auto& [key, value] : object.items()) {
		if (key == "comment")
			continue;
		if (key == "name") {
			if (!value.is_string() || value.get<std::string>().empty())
				return "\"name\": must be a non-empty string";
			d.name = value.get<std::string>();
			continue;
		}
		if (key == "ram_mib") {
			if (!value.is_number_unsigned() || value.get<uint64_t>() < min_ram_mib ||
			    value.get<uint64_t>() > max_ram_mib)
				return fmt::format("\"ram_mib\": {} is out of range (a whole "
						   "number, {} to {})",
						   value.dump(), min_ram_mib, max_ram_mib);
			d.ram_mib = value.get<uint32_t>();
			continue;
		}
		bool known = false;
		for (unsigned i = 0; vbw_key(i) && !known; i++)
			known = key == vbw_key(i);
		if (!known)
			return fmt::format("unknown key \"{}\" (known: {})", key, known_keys());
		if (!value.is_number() && !value.is_boolean())
			return fmt::format("\"{}\": must be a number (got {})", key, value.dump());
		// The generator's key table reads the number (or true/false, for flags) from its text.
		const std::string text =
			value.is_boolean() ? (value.get<bool>() ? "true" : "false") : value.dump();
		if (std::string error = set_key(d.params, key, text); !error.empty()) {
			if (error.rfind("unknown key", 0) == 0)
				return error + " (known: " + known_keys() + ")";
			return error;
		}
	}
	description = d;
	return "";
}

std::string read_workload_file(const std::string& path, uint32_t min_ram_mib, uint32_t max_ram_mib,
			       WorkloadDescription& description)
{
	std::ifstream in(path);
	if (!in)
		return fmt::format("cannot read {}: {}", path, std::strerror(errno));
	nlohmann::json object;
	try {
		object = nlohmann::json::parse(in);
	} catch (const nlohmann::json::exception& error) {
		return fmt::format("{} is not JSON: {}", path, error.what());
	}
	if (std::string error = apply_workload_json(object, min_ram_mib, max_ram_mib, description);
	    !error.empty())
		return path + ": " + error;
	return "";
}

std::string apply_workload_setting(const std::string& setting, WorkloadDescription& description)
{
	const size_t eq = setting.find('=');
	if (eq == std::string::npos || eq == 0)
		return fmt::format("\"{}\": a setting is KEY=VALUE", setting);
	std::string error =
		set_key(description.params, setting.substr(0, eq), setting.substr(eq + 1));
	if (error.rfind("unknown key", 0) == 0)
		return error + " (known: " + known_keys() + "; name and ram_mib only in a file)";
	return error;
}

std::string check_workload(const WorkloadDescription& description, uint32_t ram_mib)
{
	char error[kErrorBytes];
	if (vbw_check_params(&description.params, uint64_t{ram_mib} << 20, error, sizeof(error)) !=
	    0)
		return fmt::format("workload {}: {}", description.name, error);
	if (description.ram_mib && *description.ram_mib != ram_mib)
		return fmt::format("workload {}: describes a {} MiB guest, not {} MiB (drop "
				   "--ram-mib or make them agree)",
				   description.name, *description.ram_mib, ram_mib);
	return "";
}

} // namespace vbsim
