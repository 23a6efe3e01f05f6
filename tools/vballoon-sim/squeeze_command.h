// SPDX-License-Identifier: GPL-2.0
//
// `vballoon-sim squeeze`: a guest with a workload squeezed by a balloon target stepped past
// its working set (device-sim/machine/squeeze.h), the pressure governor off and on, side
// by side.
#ifndef VBALLOON_TOOLS_SQUEEZE_COMMAND_H
#define VBALLOON_TOOLS_SQUEEZE_COMMAND_H

#include <CLI/CLI.hpp>

namespace vbsim
{

void add_squeeze_command(CLI::App& app, int* exit_status);

} // namespace vbsim

#endif
