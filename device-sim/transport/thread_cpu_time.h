// SPDX-License-Identifier: GPL-2.0
//
// CPU time of the calling thread, and the time it waited on a runqueue. The host's costs
// (device thread, senders, receivers, hint handling) are counted on each thread's own
// clock, so work done while another thread holds the CPU of this 2-vCPU machine is not
// charged to it; where a thread's wall time is what counts (a writer waiting for its
// pipe's reader), its runqueue waits are taken out of it for the same reason.
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

inline uint64_t monotonic_ns()
{
	timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return uint64_t(ts.tv_sec) * 1000000000ull + uint64_t(ts.tv_nsec);
}

// The calling thread's time spent runnable but not running, in ns (the second field of
// /proc/thread-self/schedstat); 0 where the kernel does not keep it.
uint64_t thread_runqueue_wait_ns();

} // namespace vbsim

#endif
