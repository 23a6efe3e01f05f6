// SPDX-License-Identifier: GPL-2.0
#include <algorithm>

#include "migration/migration.h"
#include "migration/model_time.h"

namespace vbsim::migration
{

namespace
{

double ns_to_ms(uint64_t ns)
{
	return double(ns) / 1e6;
}

} // namespace

void ModelTime::begin_round(double rate_bytes_per_second)
{
	round_rate_.store(rate_bytes_per_second, std::memory_order_relaxed);
	round_running_.store(true, std::memory_order_release);
}

void ModelTime::end_round()
{
	round_running_.store(false, std::memory_order_release);
}

void ModelTime::advance_to(double migration_ms)
{
	base_ms_.store(migration_ms, std::memory_order_release);
}

double ModelTime::round_cpu_ms() const
{
	double cpu = ns_to_ms(senders_->max_thread_cpu_ns());
	if (zero_scan_in_migration_thread_)
		cpu = std::max(cpu, ns_to_ms(counters_.scan_ns.load(std::memory_order_relaxed)));
	return cpu;
}

double ModelTime::in_round_ms() const
{
	if (!round_running_.load(std::memory_order_acquire))
		return 0;
	return std::max(link_ms(counters_.bytes.load(std::memory_order_relaxed),
				round_rate_.load(std::memory_order_relaxed)),
			round_cpu_ms());
}

double ModelTime::migration_now_ms() const
{
	return base_ms_.load(std::memory_order_acquire) + in_round_ms();
}

} // namespace vbsim::migration
