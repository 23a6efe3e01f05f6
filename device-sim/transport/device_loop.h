// SPDX-License-Identifier: GPL-2.0
//
// The device's own thread: one epoll loop over the file descriptors it watches (kick
// eventfds, a timerfd), a stop eventfd, and a queue of tasks posted from other threads.
// Everything the device model does runs here, one event at a time, so device state needs
// no locking against itself; other threads talk to it through fds and posted tasks.
#ifndef VBSIM_TRANSPORT_DEVICE_LOOP_H
#define VBSIM_TRANSPORT_DEVICE_LOOP_H

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "transport/event_fd.h"

namespace vbsim
{

class DeviceLoop
{
public:
	DeviceLoop(); // throws std::system_error
	~DeviceLoop();
	DeviceLoop(const DeviceLoop&) = delete;
	DeviceLoop& operator=(const DeviceLoop&) = delete;

	// Call `on_readable` on the loop thread whenever `fd` is readable (level-triggered:
	// the handler must drain it). Only before start().
	void watch(int fd, std::function<void()> on_readable);

	void start();
	// Idempotent. Tasks still queued are dropped.
	void stop();
	// Keeps the loop thread on one CPU (a benchmark's choice, see bench/inflate); false
	// when the thread is not running or the CPU cannot be used.
	bool run_on_cpu(unsigned cpu);

	// Runs `task` on the loop thread, in posting order.
	void post(std::function<void()> task);

	// A stopped VM stops its devices too: pause() returns once the loop thread stands
	// still between events (holding no lock), and nothing it watches is handled until
	// resume(). Call both from one thread; pausing a loop that never started does nothing.
	void pause();
	void resume();

private:
	void run();
	void run_posted_tasks();
	// On the loop thread: stands still while a pause is asked for; true if it did.
	bool stand_still_if_paused();

	FileDescriptor epoll_;
	EventFd stop_requested_;
	EventFd task_posted_;
	std::vector<std::function<void()>> handlers_;
	std::mutex tasks_mutex_;
	std::deque<std::function<void()>> tasks_;
	std::mutex pause_mutex_;
	std::condition_variable pause_changed_;
	bool pause_requested_ = false;
	bool standing_still_ = false;
	std::thread thread_;
};

} // namespace vbsim

#endif
