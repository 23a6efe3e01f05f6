// SPDX-License-Identifier: GPL-2.0
//
// Keeping a thread on one CPU. A benchmark that measures two threads working side by side
// (the guest's worker and the device thread) can ask for it: a scheduler otherwise often
// keeps a thread it wakes on the waker's CPU, and the two then take turns on one CPU.
#ifndef VBSIM_TRANSPORT_THREAD_CPU_H
#define VBSIM_TRANSPORT_THREAD_CPU_H

#include <pthread.h>
#include <sched.h>

#include <thread>

namespace vbsim {

// False when the CPU does not exist or the thread may not run there.
inline bool pin_thread_to_cpu(std::thread& thread, unsigned cpu)
{
	if (cpu >= CPU_SETSIZE)
		return false;
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return pthread_setaffinity_np(thread.native_handle(), sizeof(set), &set) == 0;
}

} // namespace vbsim

#endif
