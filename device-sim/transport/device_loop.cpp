// SPDX-License-Identifier: GPL-2.0
#include "transport/device_loop.h"

#include "transport/thread_cpu.h"

#include <cerrno>
#include <stdexcept>
#include <system_error>

#include <sys/epoll.h>

namespace vbsim
{

DeviceLoop::DeviceLoop() : epoll_(epoll_create1(EPOLL_CLOEXEC))
{
	if (epoll_.get() < 0)
		throw std::system_error(errno, std::generic_category(), "epoll_create1");
	watch(stop_requested_.fd(), [] {});
	watch(task_posted_.fd(), [this] { run_posted_tasks(); });
}

DeviceLoop::~DeviceLoop()
{
	stop();
}

void DeviceLoop::watch(int fd, std::function<void()> on_readable)
{
	if (thread_.joinable())
		throw std::logic_error("DeviceLoop::watch after start");
	epoll_event event{};
	event.events = EPOLLIN;
	event.data.u64 = handlers_.size();
	if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &event) != 0)
		throw std::system_error(errno, std::generic_category(), "epoll_ctl");
	handlers_.push_back(std::move(on_readable));
}

void DeviceLoop::start()
{
	if (!thread_.joinable())
		thread_ = std::thread([this] { run(); });
}

void DeviceLoop::stop()
{
	if (!thread_.joinable())
		return;
	stop_requested_.signal();
	{
		std::lock_guard lock(pause_mutex_);
		pause_requested_ = false;
	}
	pause_changed_.notify_all();
	thread_.join();
	std::lock_guard lock(tasks_mutex_);
	tasks_.clear();
}

bool DeviceLoop::run_on_cpu(unsigned cpu)
{
	return thread_.joinable() && pin_thread_to_cpu(thread_, cpu);
}

void DeviceLoop::post(std::function<void()> task)
{
	{
		std::lock_guard lock(tasks_mutex_);
		tasks_.push_back(std::move(task));
	}
	task_posted_.signal();
}

void DeviceLoop::run()
{
	constexpr int kEventsPerWait = 16;
	epoll_event events[kEventsPerWait];
	for (;;) {
		const int ready = epoll_wait(epoll_.get(), events, kEventsPerWait, -1);
		if (ready < 0) {
			if (errno == EINTR)
				continue;
			throw std::system_error(errno, std::generic_category(), "epoll_wait");
		}
		// Stop first: once asked, no more device work starts.
		for (int i = 0; i < ready; ++i)
			if (events[i].data.u64 == 0)
				return;
		// After a pause, look again: what was ready may be gone, or a stop may have come.
		if (stand_still_if_paused())
			continue;
		for (int i = 0; i < ready; ++i)
			handlers_[events[i].data.u64]();
	}
}

void DeviceLoop::pause()
{
	if (!thread_.joinable())
		return;
	std::unique_lock lock(pause_mutex_);
	pause_requested_ = true;
	// Wakes the loop (an empty task) so that it sees the request even when idle.
	lock.unlock();
	post([] {});
	lock.lock();
	pause_changed_.wait(lock, [this] { return standing_still_; });
}

void DeviceLoop::resume()
{
	{
		std::lock_guard lock(pause_mutex_);
		pause_requested_ = false;
	}
	pause_changed_.notify_all();
}

bool DeviceLoop::stand_still_if_paused()
{
	std::unique_lock lock(pause_mutex_);
	if (!pause_requested_)
		return false;
	standing_still_ = true;
	pause_changed_.notify_all();
	pause_changed_.wait(lock, [this] { return !pause_requested_; });
	standing_still_ = false;
	return true;
}

void DeviceLoop::run_posted_tasks()
{
	task_posted_.drain();
	std::deque<std::function<void()>> batch;
	{
		std::lock_guard lock(tasks_mutex_);
		batch.swap(tasks_);
	}
	for (auto& task : batch)
		task();
}

} // namespace vbsim
