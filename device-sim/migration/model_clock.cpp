// SPDX-License-Identifier: GPL-2.0
#include <algorithm>

#include "migration/migration.h"

namespace vbsim::migration
{

double ModelClock::now_ms() const
{
	std::lock_guard lock(mutex_);
	return model_ ? model_() : stood_ms_;
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
	stood_ms_ = std::max(stood_ms_, model_());
	model_ = {};
}

} // namespace vbsim::migration
