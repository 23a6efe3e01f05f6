// SPDX-License-Identifier: GPL-2.0
//
// vballoon-sim: the driver core in a simulated guest against the simulated host device.
//   compare  live migration with every strategy side by side (the main job)
//   inflate  inflate and deflate the balloon and print what the host saw
//   squeeze  a workload squeezed past its working set, the pressure governor off and on
#include <CLI/CLI.hpp>

#include "compare_command.h"
#include "inflate_command.h"
#include "squeeze_command.h"

int main(int argc, char** argv)
{
	int exit_status = 0;
	CLI::App app{"The vballoon driver core in a simulated guest against a simulated host."};
	app.require_subcommand(1);
	vbsim::add_compare_command(app, &exit_status);
	vbsim::add_inflate_command(app, &exit_status);
	vbsim::add_squeeze_command(app, &exit_status);
	CLI11_PARSE(app, argc, argv);
	return exit_status;
}
