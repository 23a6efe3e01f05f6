// SPDX-License-Identifier: GPL-2.0
#include "transport/thread_cpu_time.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>

namespace vbsim
{

namespace
{

// Each thread keeps its own file open: a read is then one pread of a few bytes, cheap
// enough to bracket every blocking write of a migration channel.
class ThreadSchedstat
{
public:
	ThreadSchedstat() : fd_(open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC)) {}
	~ThreadSchedstat()
	{
		if (fd_ >= 0)
			close(fd_);
	}
	ThreadSchedstat(const ThreadSchedstat&) = delete;
	ThreadSchedstat& operator=(const ThreadSchedstat&) = delete;

	uint64_t runqueue_wait_ns() const
	{
		char text[96];
		if (fd_ < 0)
			return 0;
		const ssize_t n = pread(fd_, text, sizeof(text) - 1, 0);
		if (n <= 0)
			return 0;
		text[n] = '\0';
		// "<on-cpu ns> <runqueue ns> <timeslices>"
		char* end = nullptr;
		strtoull(text, &end, 10);
		return strtoull(end, nullptr, 10);
	}

private:
	const int fd_;
};

} // namespace

uint64_t thread_runqueue_wait_ns()
{
	thread_local ThreadSchedstat schedstat;
	return schedstat.runqueue_wait_ns();
}

} // namespace vbsim
