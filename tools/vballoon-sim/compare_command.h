// SPDX-License-Identifier: GPL-2.0
//
// `vballoon-sim compare`: live migration of one simulated guest under every strategy side
// by side (none, zero-detect, hint, report and the two combinations), for each workload
// (the presets fresh, freed, busy, and one users describe: workload_file.h), on a fresh
// machine per run. Prints a table per workload and writes JSON, CSV and a plot on request.
#ifndef VBALLOON_TOOLS_COMPARE_COMMAND_H
#define VBALLOON_TOOLS_COMPARE_COMMAND_H

#include <CLI/CLI.hpp>

namespace vbsim
{

// Adds the subcommand to `app`; when it is chosen, its callback runs the comparison and
// stores the exit status in *exit_status (0: every run verified; 1: a run failed or an
// output could not be written; 2: bad arguments found after parsing).
void add_compare_command(CLI::App& app, int* exit_status);

} // namespace vbsim

#endif
