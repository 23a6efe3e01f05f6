// SPDX-License-Identifier: GPL-2.0
#include "migration/migration.h"

namespace vbsim::migration
{

namespace
{
double wall_ms(std::chrono::steady_clock::time_point since)
{
	return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}
} // namespace

ModelClock::ModelClock() : start_(std::chrono::steady_clock::now()) {}

double ModelClock::now_ms() const
{
	std::lock_guard lock(mutex_);
	return model_ ? model_() : wall_offset_ms_ + wall_ms(start_);
}

void ModelClock::drive(std::function<double()> model_now_ms)
{
	std::lock_guard lock(mutex_);
	model_ = std::move(model_now_ms);
}

void ModelClock::release()
{
	std::lock_guard lock(mutex_);
	if (!model_)
		return;
	const double last = model_();
	model_ = {};
	start_ = std::chrono::steady_clock::now();
	wall_offset_ms_ = last;
}

} // namespace vbsim::migration
