// SPDX-License-Identifier: GPL-2.0
//
// CPU time of the calling thread. The host's costs (device thread, senders, receivers,
// hint handling) are counted on each thread's own clock, so work done while another
// thread holds the CPU of this 2-vCPU machine is not charged to it.
#ifndef VBSIM_TRANSPORT_THREAD_CPU_TIME_H
#define VBSIM_TRANSPORT_THREAD_CPU_TIME_H

#include <cstdint>
#include <time.h>

namespace vbsim
{

inline uint64_t thread_cpu_ns()
{
	timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

} // namespace vbsim

#endif
