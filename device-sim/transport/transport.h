// SPDX-License-Identifier: GPL-2.0
//
// The virtio transport of the simulated host: what virtio-pci's common config and
// notification areas give a real driver, as method calls. It owns
//  - feature negotiation and the device status state machine (device_status.h),
//  - the config space: a device-chosen size, a generation counter, config-change
//    interrupts, and driver writes filtered by the device's policy,
//  - queue setup, validated (size a power of two within the device's maximum, areas
//    aligned and inside guest RAM), and the DeviceQueues created from it at DRIVER_OK,
//  - notifications as eventfds: one kick eventfd per queue (guest -> device), one call
//    eventfd per queue and one config-change eventfd (device -> guest),
//  - the device thread (DeviceLoop) that waits on the kicks, a timerfd and a stop fd.
//
// Locking: a state lock serialises driver register writes (status, features, queue setup)
// with everything the device thread does, so a reset never runs in the middle of queue
// processing. The config space has its own lock so the host can change the target while
// the device is busy.
#ifndef VBSIM_TRANSPORT_TRANSPORT_H
#define VBSIM_TRANSPORT_TRANSPORT_H

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "transport/device_backend.h"
#include "transport/device_loop.h"
#include "transport/event_fd.h"
#include "transport/transport_counters.h"
#include "virtqueue/device_queue.h"
#include "virtqueue/queue_counters.h"
#include "virtqueue/ring_layout.h"

namespace vbsim
{

class GuestMemory;

struct TransportConfig {
	uint64_t offered_features = 0;
	// The config space's initial bytes; its length is the config space size.
	std::vector<uint8_t> initial_config;
	// Transport queues the device exposes (the driver uses a dense prefix of them).
	unsigned queue_count = 0;
	// A transitional device: a driver that does not take VERSION_1 uses the legacy
	// interface. It goes ACKNOWLEDGE, DRIVER, features, queues, DRIVER_OK with no
	// FEATURES_OK (legacy status has no such bit), and the features are checked at
	// DRIVER_OK instead. Off: a modern-only device, which refuses such a driver.
	bool transitional = false;
};

class Transport
{
public:
	// Throws std::system_error when the eventfds or the thread cannot be created.
	Transport(GuestMemory& memory, DeviceBackend& backend, TransportConfig config);
	~Transport();
	Transport(const Transport&) = delete;
	Transport& operator=(const Transport&) = delete;

	// The device thread. The owner starts it once the backend is ready and stops it before
	// the backend goes away.
	void start();
	void stop();
	// Keeps the device thread on one CPU (DeviceLoop::run_on_cpu()).
	bool run_device_thread_on_cpu(unsigned cpu) { return loop_.run_on_cpu(cpu); }

	// ---- Guest side: what a driver reaches through the transport ----------------------
	uint64_t device_features() const { return offered_features_; }
	// Accepted only while DRIVER is set and FEATURES_OK is not; false (counted) otherwise.
	bool set_driver_features(uint64_t features);
	uint64_t driver_features() const { return driver_features_.load(); }
	bool transitional() const { return transitional_; }
	// The driver's features so far lack VERSION_1 on a transitional device.
	bool legacy_driver() const;

	uint8_t status() const { return status_.load(); }
	// 0 resets. Writes that break the ordering rules are ignored and counted. FEATURES_OK
	// is refused (left clear, counted) when the driver took features not offered, did not
	// take VERSION_1, or the device vetoes the set; the driver sees it by reading status.
	// On a transitional device a driver without VERSION_1 sets DRIVER_OK without
	// FEATURES_OK; it is refused the same way (counted in legacy_driver_ok_refused).
	void set_status(uint8_t status);

	unsigned queue_count() const { return static_cast<unsigned>(queues_.size()); }
	// 0 when queue `index` does not exist under the driver's features.
	uint16_t queue_max_size(unsigned index) const;
	QueueSetupError setup_queue(unsigned index, uint16_t size, const QueueAreas& areas);

	uint32_t config_size() const { return static_cast<uint32_t>(config_.size()); }
	uint32_t config_generation() const { return config_generation_.load(); }
	// Out-of-range reads return zeroes and are counted (false).
	bool config_read(uint32_t offset, void* dst, uint32_t len) const;
	uint32_t config_read32(uint32_t offset) const;
	// Writes outside the config space or refused by the device are dropped, counted (false).
	bool config_write(uint32_t offset, const void* src, uint32_t len);
	bool config_write32(uint32_t offset, uint32_t value);

	// Kick queue `index` (guest -> device).
	void notify(unsigned index);
	// Interrupts (device -> guest). The fds are for a guest that polls several at once;
	// the waits block until one arrives or `timeout` passes, and return how many arrived
	// (0 on timeout).
	int call_fd(unsigned index) const;
	int config_change_fd() const { return config_changed_.fd(); }
	uint64_t wait_for_interrupt(unsigned index, std::chrono::milliseconds timeout);
	uint64_t wait_for_config_change(std::chrono::milliseconds timeout);
	// Consumes the config interrupts pending now, without waiting; returns how many.
	uint64_t take_config_changes() { return config_changed_.drain(); }

	// The device is gone (surprise removal, fault_plan.h): it serves nothing any more, and
	// a driver sees it here (as a guest sees a vanished PCI device read all ones).
	bool removed() const { return removed_.load(); }

	// ---- Device side: for the backend, inside its callbacks on the device thread ------
	GuestMemory& memory() { return memory_; }
	// The device cannot go on: sets DEVICE_NEEDS_RESET and tells the driver (2.1.2).
	void request_reset_locked() { raise_needs_reset_locked(); }
	// The device vanishes (any thread): no queue is served from here on.
	void surprise_remove() { removed_.store(true); }
	uint64_t negotiated_features() const { return driver_features_.load(); }
	// DRIVER_OK set, FAILED and NEEDS_RESET clear: the device may process queues.
	bool live() const;
	// The device thread has run the activation that follows DRIVER_OK (and looked at every
	// queue once). Kicks that arrive before it are counted as ignored: the activation pass
	// serves their chains.
	bool activated() const { return activated_.load(); }
	// The queue at `index`, or nullptr when the driver did not set it up.
	DeviceQueue* queue(unsigned index);
	// After pushing used entries: interrupts the driver if it asked to be interrupted.
	void signal_used(unsigned index);
	// A device-side config change (any thread): bumps the generation and, once DRIVER_OK
	// is set, raises a config-change interrupt.
	void update_config(uint32_t offset, const void* src, uint32_t len);
	// Device-side read of the config space, no counting. Throws std::out_of_range.
	void read_config(uint32_t offset, void* dst, uint32_t len) const;
	void set_timer_interval(std::chrono::milliseconds interval);
	// Runs `task` on the device thread with the state lock held (tasks posted before a
	// reset still run after it: they must check live() and queue()).
	void post(std::function<void()> task);
	// The device thread stands still (a stopped VM) until resume_device(); see DeviceLoop.
	void pause_device() { loop_.pause(); }
	void resume_device() { loop_.resume(); }

	// ---- Observers (any thread) --------------------------------------------------------
	// Blocks until `condition` holds, re-evaluating it after every event the device thread
	// handles (kick, timer, posted task, activation); false when `timeout` passed first.
	// This is how a test knows the device has dealt with something that leaves no trace
	// in guest RAM, such as an ignored kick.
	bool wait_until(const std::function<bool()>& condition, std::chrono::milliseconds timeout);

	const TransportCounters& counters() const { return counters_; }
	const QueueCounters& queue_counters(unsigned index) const;
	const NotificationCounters& notification_counters(unsigned index) const;

private:
	struct QueueSlot {
		EventFd kick;
		EventFd call;
		bool configured = false;
		uint16_t size = 0;
		QueueAreas areas;
		std::unique_ptr<DeviceQueue> device_queue;
		QueueCounters ring_counters;
		NotificationCounters notifications;
	};

	void reset_locked();
	void activate_locked();
	bool features_acceptable_locked() const;
	bool legacy_features_acceptable_locked() const;
	// Queues may be set up: after FEATURES_OK, or after DRIVER for a legacy driver.
	bool features_settled_locked(uint8_t status) const;
	void raise_needs_reset_locked();
	void check_broken_queues_locked();
	void send_config_interrupt();
	void on_kick(unsigned index);
	void on_timer();
	void note_progress();

	GuestMemory& memory_;
	DeviceBackend& backend_;
	const uint64_t offered_features_;
	const bool transitional_;

	mutable std::mutex state_mutex_;
	std::atomic<uint8_t> status_{0};
	std::atomic<uint64_t> driver_features_{0};
	std::atomic<bool> activated_{false}; // the device thread has run backend.activate()
	std::atomic<bool> removed_{false};   // surprise_remove()
	uint64_t activation_epoch_ = 0;	     // bumped by reset, so stale activations are dropped
	std::vector<std::unique_ptr<QueueSlot>> queues_;

	mutable std::mutex config_mutex_;
	std::vector<uint8_t> config_;
	std::atomic<uint32_t> config_generation_{0};
	EventFd config_changed_;

	TimerFd timer_;
	mutable TransportCounters counters_; // counted from const accessors too
	std::mutex progress_mutex_;
	std::condition_variable progress_;
	DeviceLoop loop_; // last: its thread must stop before anything above goes away
};

} // namespace vbsim

#endif
