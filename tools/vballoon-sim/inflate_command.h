// SPDX-License-Identifier: GPL-2.0
//
// `vballoon-sim inflate`: the inflate-then-deflate scenario (scenario.h) from the command line.
#ifndef VBALLOON_TOOLS_INFLATE_COMMAND_H
#define VBALLOON_TOOLS_INFLATE_COMMAND_H

#include <CLI/CLI.hpp>

namespace vbsim
{

// Adds the subcommand to `app`; when it is chosen, its callback runs the scenario and
// stores the exit status in *exit_status.
void add_inflate_command(CLI::App& app, int* exit_status);

} // namespace vbsim

#endif
