// SPDX-License-Identifier: GPL-2.0
#include "transport/event_fd.h"

#include <cerrno>
#include <system_error>

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

namespace vbsim
{

namespace
{

uint64_t read_counter(int fd)
{
	uint64_t value = 0;
	for (;;) {
		if (read(fd, &value, sizeof(value)) == sizeof(value))
			return value;
		if (errno == EINTR)
			continue;
		if (errno == EAGAIN)
			return 0;
		throw std::system_error(errno, std::generic_category(), "reading an event counter");
	}
}

} // namespace

FileDescriptor::~FileDescriptor()
{
	if (fd_ >= 0)
		close(fd_);
}

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept
{
	if (this != &other) {
		if (fd_ >= 0)
			close(fd_);
		fd_ = other.release();
	}
	return *this;
}

EventFd::EventFd() : fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC))
{
	if (fd_.get() < 0)
		throw std::system_error(errno, std::generic_category(), "eventfd");
}

void EventFd::signal(uint64_t count)
{
	for (;;) {
		if (write(fd_.get(), &count, sizeof(count)) == sizeof(count))
			return;
		if (errno != EINTR)
			throw std::system_error(errno, std::generic_category(),
						"signalling an eventfd");
	}
}

uint64_t EventFd::drain()
{
	return read_counter(fd_.get());
}

uint64_t EventFd::wait(std::chrono::milliseconds timeout)
{
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	for (;;) {
		if (const uint64_t count = drain(); count != 0)
			return count;
		const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
			deadline - std::chrono::steady_clock::now());
		if (left.count() <= 0)
			return 0;
		pollfd waiter{fd_.get(), POLLIN, 0};
		if (poll(&waiter, 1, static_cast<int>(left.count())) < 0 && errno != EINTR)
			throw std::system_error(errno, std::generic_category(),
						"waiting on an eventfd");
	}
}

TimerFd::TimerFd() : fd_(timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC))
{
	if (fd_.get() < 0)
		throw std::system_error(errno, std::generic_category(), "timerfd_create");
}

void TimerFd::set_interval(std::chrono::nanoseconds interval)
{
	itimerspec spec{};
	spec.it_interval.tv_sec = static_cast<time_t>(interval.count() / 1000000000);
	spec.it_interval.tv_nsec = static_cast<long>(interval.count() % 1000000000);
	spec.it_value = spec.it_interval;
	if (timerfd_settime(fd_.get(), 0, &spec, nullptr) != 0)
		throw std::system_error(errno, std::generic_category(), "timerfd_settime");
}

uint64_t TimerFd::drain()
{
	return read_counter(fd_.get());
}

} // namespace vbsim
