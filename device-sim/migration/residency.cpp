// SPDX-License-Identifier: GPL-2.0
#include <cerrno>
#include <system_error>

#include <sys/mman.h>

#include "migration/residency.h"
#include "transport/thread_cpu_time.h"

namespace vbsim::migration
{

uint64_t Residency::snapshot()
{
	const uint64_t start = thread_cpu_ns();
	uint8_t* base = memory_.translate(0, memory_.size());
	if (mincore(base, memory_.size(), resident_.data()) != 0)
		throw std::system_error(errno, std::generic_category(), "mincore on guest RAM");
	return thread_cpu_ns() - start;
}

} // namespace vbsim::migration
