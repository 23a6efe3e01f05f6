// SPDX-License-Identifier: GPL-2.0
//
// vballoon-sim: the driver core in a simulated guest against the simulated host device.
//   inflate  inflate and deflate the balloon and print what the host saw
#include <CLI/CLI.hpp>

#include "inflate_command.h"

int main(int argc, char** argv)
{
	int exit_status = 0;
	CLI::App app{"The vballoon driver core in a simulated guest against a simulated host."};
	app.require_subcommand(1);
	vbsim::add_inflate_command(app, &exit_status);
	CLI11_PARSE(app, argc, argv);
	return exit_status;
}
