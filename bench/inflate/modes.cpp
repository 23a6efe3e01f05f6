// SPDX-License-Identifier: GPL-2.0
#include "modes.h"

#include <fmt/core.h>

#include <algorithm>

namespace vbbench
{

namespace
{

constexpr Transfer kTransfers[] = {Transfer::kPfnPerPage, Transfer::kPfnMerged, Transfer::kChunked};
constexpr Zeroing kZeroings[] = {Zeroing::kNone, Zeroing::kGuest, Zeroing::kHost};

std::string_view trim(std::string_view text)
{
	while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
		text.remove_prefix(1);
	while (!text.empty() && (text.back() == ' ' || text.back() == '\t'))
		text.remove_suffix(1);
	return text;
}

std::string names_of(const std::vector<Mode>& modes)
{
	std::string names;
	for (const Mode& mode : modes)
		names += (names.empty() ? "" : ", ") + mode.name;
	return names;
}

} // namespace

std::string_view Mode::transfer_name() const
{
	switch (transfer) {
	case Transfer::kPfnPerPage:
		return "pfn-per-page";
	case Transfer::kPfnMerged:
		return "pfn-merged";
	case Transfer::kChunked:
		return "chunked";
	case Transfer::kLimit:
		return "limit";
	}
	return "?";
}

std::string_view Mode::zeroing_name() const
{
	switch (zeroing) {
	case Zeroing::kNone:
		return "none";
	case Zeroing::kGuest:
		return "guest";
	case Zeroing::kHost:
		return "host";
	}
	return "?";
}

std::string Mode::description() const
{
	if (is_limit())
		return "one madvise(MADV_DONTNEED) over the populated range the balloon would take";
	std::string text;
	switch (transfer) {
	case Transfer::kPfnPerPage:
		text = "4 KiB PFN arrays, driver allocates a page at a time, host discards per PFN";
		break;
	case Transfer::kPfnMerged:
		text = "PFN arrays, driver allocates 2 MiB blocks, host merges runs per request";
		break;
	case Transfer::kChunked:
		text = "VB_F_X_CHUNKED: a descriptor per run, 2 MiB blocks, host discards per run";
		break;
	case Transfer::kLimit:
		break;
	}
	if (zeroing == Zeroing::kGuest)
		text += "; guest zeroes pages going in (and coming back: init_on_free)";
	else if (zeroing == Zeroing::kHost)
		text += "; as +guest-zero, but VB_F_X_INIT_ON_INFLATE: the host's discard zeroes";
	return text;
}

std::vector<Mode> all_modes()
{
	std::vector<Mode> modes;
	for (const Zeroing zeroing : kZeroings) {
		for (const Transfer transfer : kTransfers) {
			Mode mode;
			mode.transfer = transfer;
			mode.zeroing = zeroing;
			mode.name = std::string(mode.transfer_name());
			if (zeroing == Zeroing::kGuest)
				mode.name += "+guest-zero";
			else if (zeroing == Zeroing::kHost)
				mode.name += "+host-init";
			modes.push_back(mode);
		}
	}
	Mode limit;
	limit.name = "limit";
	limit.transfer = Transfer::kLimit;
	modes.push_back(limit);
	return modes;
}

std::optional<std::vector<Mode>> parse_modes(std::string_view list, std::string* error)
{
	const std::vector<Mode> known = all_modes();
	std::vector<bool> chosen(known.size(), false);
	bool any = false;

	while (true) {
		const size_t comma = list.find(',');
		const std::string_view name = trim(list.substr(0, comma));
		if (name == "all") {
			std::fill(chosen.begin(), chosen.end(), true);
			any = true;
		} else {
			auto it = std::find_if(known.begin(), known.end(),
					       [&](const Mode& mode) { return mode.name == name; });
			if (it == known.end()) {
				*error = name.empty()
						 ? std::string("an empty name in the mode list")
						 : fmt::format("unknown mode '{}'", name);
				*error += fmt::format(" (known: {}, or all)", names_of(known));
				return std::nullopt;
			}
			const size_t index = static_cast<size_t>(it - known.begin());
			if (chosen[index]) {
				*error = fmt::format("mode '{}' is listed twice", name);
				return std::nullopt;
			}
			chosen[index] = true;
			any = true;
		}
		if (comma == std::string_view::npos)
			break;
		list.remove_prefix(comma + 1);
	}
	if (!any) {
		*error = "no modes given";
		return std::nullopt;
	}
	std::vector<Mode> modes;
	for (size_t i = 0; i < known.size(); i++) {
		if (chosen[i])
			modes.push_back(known[i]);
	}
	return modes;
}

} // namespace vbbench
