// SPDX-License-Identifier: GPL-2.0
//
// The kernel objects the transport is built on, as small owning wrappers: eventfd for
// notifications in both directions, timerfd for the device's periodic work. Real syscalls
// on purpose: every kick and interrupt costs what it costs a real VMM.
#ifndef VBSIM_TRANSPORT_EVENT_FD_H
#define VBSIM_TRANSPORT_EVENT_FD_H

#include <chrono>
#include <cstdint>

namespace vbsim
{

// Owns one file descriptor.
class FileDescriptor
{
public:
	FileDescriptor() = default;
	explicit FileDescriptor(int fd) : fd_(fd) {}
	~FileDescriptor();
	FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.release()) {}
	FileDescriptor& operator=(FileDescriptor&& other) noexcept;
	FileDescriptor(const FileDescriptor&) = delete;
	FileDescriptor& operator=(const FileDescriptor&) = delete;

	int get() const { return fd_; }
	int release()
	{
		const int fd = fd_;
		fd_ = -1;
		return fd;
	}

private:
	int fd_ = -1;
};

// A non-blocking eventfd used as a counter of notifications.
class EventFd
{
public:
	EventFd(); // throws std::system_error
	int fd() const { return fd_.get(); }
	void signal(uint64_t count = 1);
	// Reads and resets the counter; 0 when nothing was signalled.
	uint64_t drain();
	// Blocks until signalled or `timeout` passes; returns what drain() returned (0 on
	// timeout). The timeout is a safety net against a hung peer, not a synchronisation.
	uint64_t wait(std::chrono::milliseconds timeout);

private:
	FileDescriptor fd_;
};

// A non-blocking monotonic timerfd.
class TimerFd
{
public:
	TimerFd(); // throws std::system_error
	int fd() const { return fd_.get(); }
	// Fires every `interval`; zero disarms.
	void set_interval(std::chrono::nanoseconds interval);
	// Expirations since the last call (0 when none).
	uint64_t drain();

private:
	FileDescriptor fd_;
};

} // namespace vbsim

#endif
