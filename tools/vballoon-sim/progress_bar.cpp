// SPDX-License-Identifier: GPL-2.0
#include "progress_bar.h"

#include <fmt/core.h>
#include <unistd.h>

#include <cstdio>

namespace vbsim
{

namespace
{

constexpr size_t kBarWidth = 24;

} // namespace

ProgressBar::ProgressBar(size_t runs, bool enabled) : runs_(runs), enabled_(enabled) {}

ProgressBar::~ProgressBar()
{
	if (enabled_) {
		fmt::print(stderr, "\r\x1b[K"); // leave the terminal as it was
		std::fflush(stderr);
	}
}

bool ProgressBar::stderr_is_terminal()
{
	return isatty(STDERR_FILENO) == 1;
}

void ProgressBar::start_run(const std::string& label)
{
	label_ = label;
	draw("starting");
}

void ProgressBar::round_finished(const migration::RoundProgress& round)
{
	draw(fmt::format("{} {} sent {:.0f} MiB; {:.0f} ms so far",
			 round.stop_and_copy ? "stop-and-copy, round" : "round", round.round,
			 static_cast<double>(round.bytes_sent) / (1 << 20), round.elapsed_ms));
}

void ProgressBar::run_finished()
{
	done_++;
	draw("done");
}

void ProgressBar::draw(const std::string& detail)
{
	if (!enabled_)
		return;
	const size_t filled = runs_ ? done_ * kBarWidth / runs_ : kBarWidth;
	fmt::print(stderr, "\r\x1b[K[{}{}] {}/{} {}: {}", std::string(filled, '#'),
		   std::string(kBarWidth - filled, '.'), done_, runs_, label_, detail);
	std::fflush(stderr);
}

} // namespace vbsim
