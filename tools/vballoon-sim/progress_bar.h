// SPDX-License-Identifier: GPL-2.0
//
// One line on stderr that redraws itself while `compare` runs: how many runs are done, the
// run going on, and its last finished round. Drawn only when stderr is a terminal, so logs
// and pipes get nothing but the tables.
#ifndef VBALLOON_TOOLS_PROGRESS_BAR_H
#define VBALLOON_TOOLS_PROGRESS_BAR_H

#include <cstddef>
#include <string>

#include "migration/migration.h"

namespace vbsim
{

class ProgressBar
{
public:
	// Draws on stderr when `enabled` (see stderr_is_terminal()).
	ProgressBar(size_t runs, bool enabled);
	~ProgressBar();
	ProgressBar(const ProgressBar&) = delete;
	ProgressBar& operator=(const ProgressBar&) = delete;

	static bool stderr_is_terminal();

	void start_run(const std::string& label);
	void round_finished(const migration::RoundProgress& round);
	void run_finished();

private:
	void draw(const std::string& detail);

	const size_t runs_;
	const bool enabled_;
	size_t done_ = 0;
	std::string label_;
};

} // namespace vbsim

#endif
