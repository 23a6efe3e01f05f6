// SPDX-License-Identifier: GPL-2.0
#include <array>

#include "migration/migration.h"

namespace vbsim::migration
{

namespace
{

struct StrategyName {
	Strategy strategy;
	const char* name;
};

constexpr std::array<StrategyName, 6> kNames = {{
	{Strategy::kNone, "none"},
	{Strategy::kZeroDetect, "zero-detect"},
	{Strategy::kHint, "hint"},
	{Strategy::kReport, "report"},
	{Strategy::kHintZeroDetect, "hint+zero-detect"},
	{Strategy::kReportZeroDetect, "report+zero-detect"},
}};

constexpr std::array<Strategy, 6> kAll = {Strategy::kNone, Strategy::kZeroDetect, Strategy::kHint,
					  Strategy::kReport, Strategy::kHintZeroDetect,
					  Strategy::kReportZeroDetect};

} // namespace

std::span<const Strategy> all_strategies()
{
	return kAll;
}

const char* strategy_name(Strategy strategy)
{
	for (const StrategyName& entry : kNames)
		if (entry.strategy == strategy)
			return entry.name;
	return "?";
}

std::optional<Strategy> parse_strategy(std::string_view name)
{
	for (const StrategyName& entry : kNames)
		if (name == entry.name)
			return entry.strategy;
	return std::nullopt;
}

bool uses_zero_detection(Strategy strategy)
{
	return strategy == Strategy::kZeroDetect || strategy == Strategy::kHintZeroDetect ||
	       strategy == Strategy::kReportZeroDetect;
}

bool uses_hints(Strategy strategy)
{
	return strategy == Strategy::kHint || strategy == Strategy::kHintZeroDetect;
}

bool uses_reports(Strategy strategy)
{
	return strategy == Strategy::kReport || strategy == Strategy::kReportZeroDetect;
}

} // namespace vbsim::migration
