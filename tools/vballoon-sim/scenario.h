// SPDX-License-Identifier: GPL-2.0
//
// The inflate-then-deflate scenario of `vballoon-sim inflate`: build a guest and a device,
// dirty guest memory, let the driver inflate to a target and deflate back (the run itself is
// device-sim/machine/inflate_then_deflate.h, shared with bench/inflate), and record what both
// sides saw.
#ifndef VBALLOON_TOOLS_SCENARIO_H
#define VBALLOON_TOOLS_SCENARIO_H

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "balloon/page_discarder.h"
#include "memory/guest_memory.h"

namespace vbsim {

struct ScenarioOptions {
	uint32_t ram_mib = 2048;
	uint32_t balloon_mib = 0;
	uint32_t dirty_mib = 0;
	std::string profile = "qemu-7.2";
	DiscardMode discard_mode = DiscardMode::kMergeRuns;
	PageBacking backing = PageBacking::kTransparentHugePages;
	unsigned max_chunk_order = 9;
	bool chunked = false;
};

struct PhaseResult {
	double ms = 0;
	uint64_t resident_mib_after = 0;
	uint64_t actual_wire_pages = 0;
	uint64_t device_requests = 0;
	uint64_t device_pages = 0;
	uint64_t wire_pages_discarded = 0;
	uint64_t discard_calls = 0;
	uint64_t kicks = 0;
	uint64_t interrupts = 0;
	uint64_t driver_messages = 0;
};

struct ScenarioResult {
	uint64_t negotiated_features = 0;
	uint64_t resident_mib_before = 0;
	double dirty_ms = 0;
	PhaseResult inflate;
	PhaseResult deflate;
	uint64_t zero_check_pages = 0; // deflated pages read back
	uint64_t zero_check_failures = 0;
	uint64_t rejected_inputs = 0;
	std::vector<std::string> problems; // invariant violations; empty on success
};

// Returns an empty string on success, or why the scenario could not run.
std::string run_inflate_deflate(const ScenarioOptions& options, ScenarioResult* result);
nlohmann::json to_json(const ScenarioOptions& options, const ScenarioResult& result);
std::string to_text(const ScenarioOptions& options, const ScenarioResult& result);

} // namespace vbsim

#endif
