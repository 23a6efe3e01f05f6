// SPDX-License-Identifier: GPL-2.0
#include "transport/transport.h"

#include <chrono>
#include <cstring>
#include <stdexcept>

#include "memory/guest_memory.h"
#include "memory/little_endian.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

Transport::Transport(GuestMemory& memory, DeviceBackend& backend, TransportConfig config)
    : memory_(memory), backend_(backend), offered_features_(config.offered_features),
      transitional_(config.transitional), config_(std::move(config.initial_config))
{
	for (unsigned index = 0; index < config.queue_count; ++index)
		queues_.push_back(std::make_unique<QueueSlot>());
	for (unsigned index = 0; index < config.queue_count; ++index)
		loop_.watch(queues_[index]->kick.fd(), [this, index] { on_kick(index); });
	loop_.watch(timer_.fd(), [this] { on_timer(); });
}

Transport::~Transport()
{
	stop();
}

void Transport::start()
{
	loop_.start();
}

void Transport::stop()
{
	loop_.stop();
}

// ---- Features and status ----------------------------------------------------------------

bool Transport::set_driver_features(uint64_t features)
{
	std::lock_guard lock(state_mutex_);
	const uint8_t status = status_.load();
	// 3.1.1: features are written after DRIVER and frozen by FEATURES_OK (by DRIVER_OK
	// for a legacy driver, which never sets FEATURES_OK).
	if (!(status & VB_STATUS_DRIVER) ||
	    (status & (VB_STATUS_FEATURES_OK | VB_STATUS_DRIVER_OK))) {
		counters_.driver_feature_writes_rejected.fetch_add(1);
		return false;
	}
	driver_features_.store(features);
	return true;
}

bool Transport::features_acceptable_locked() const
{
	const uint64_t features = driver_features_.load();
	if (features & ~offered_features_)
		return false;
	// FEATURES_OK belongs to the modern interface: "A device MAY fail to operate further
	// if VIRTIO_F_VERSION_1 is not accepted" (6.1). A legacy driver on a transitional
	// device never sets it (legacy_features_acceptable_locked() checks at DRIVER_OK).
	if (!(features & VB_FEATURE(VB_F_VERSION_1)))
		return false;
	return backend_.accept_features(features);
}

bool Transport::legacy_driver() const
{
	return transitional_ && !(driver_features_.load() & VB_FEATURE(VB_F_VERSION_1));
}

bool Transport::legacy_features_acceptable_locked() const
{
	const uint64_t features = driver_features_.load();
	// The legacy feature register is 32 bits wide.
	if ((features & ~offered_features_) || (features >> 32) != 0)
		return false;
	return backend_.accept_features(features);
}

bool Transport::features_settled_locked(uint8_t status) const
{
	if (status & VB_STATUS_FEATURES_OK)
		return true;
	return legacy_driver() && (status & VB_STATUS_DRIVER);
}

void Transport::set_status(uint8_t written)
{
	std::lock_guard lock(state_mutex_);
	if (written == 0) {
		reset_locked();
		return;
	}
	const uint8_t current = status_.load();
	StatusViolation violation = check_status_write(current, written);
	uint8_t next = requested_status(current, written);
	// A legacy driver never sets FEATURES_OK: its features are settled at DRIVER_OK.
	const bool legacy_status = violation == StatusViolation::kDriverOkWithoutFeaturesOk &&
				   legacy_driver() && (next & VB_STATUS_DRIVER);
	if (legacy_status)
		violation = StatusViolation::kNone;
	if (violation != StatusViolation::kNone) {
		counters_.status_writes_rejected[static_cast<size_t>(violation)].fetch_add(1);
		return;
	}
	if (legacy_status && !(current & VB_STATUS_DRIVER_OK) &&
	    !legacy_features_acceptable_locked()) {
		counters_.legacy_driver_ok_refused.fetch_add(1);
		next &= static_cast<uint8_t>(~VB_STATUS_DRIVER_OK);
	}
	if ((next & VB_STATUS_FEATURES_OK) && !(current & VB_STATUS_FEATURES_OK) &&
	    !features_acceptable_locked()) {
		counters_.features_ok_refused.fetch_add(1);
		next &= static_cast<uint8_t>(~(VB_STATUS_FEATURES_OK | VB_STATUS_DRIVER_OK));
	}
	status_.store(next);

	// FAILED needs no teardown: live() turns false and the device stops processing.
	const bool driver_ok_now = (next & VB_STATUS_DRIVER_OK) && !(current & VB_STATUS_DRIVER_OK);
	if (driver_ok_now && !(next & VB_STATUS_FAILED))
		activate_locked();
}

bool Transport::live() const
{
	const uint8_t status = status_.load();
	return (status & VB_STATUS_DRIVER_OK) &&
	       !(status & (VB_STATUS_FAILED | VB_STATUS_NEEDS_RESET)) && !removed_.load();
}

void Transport::reset_locked()
{
	// Order matters: once status is 0 nothing the backend does while resetting raises an
	// interrupt, and tasks already posted see a dead device.
	status_.store(0);
	driver_features_.store(0);
	activated_ = false;
	++activation_epoch_;
	timer_.set_interval(std::chrono::nanoseconds(0));
	timer_.drain();
	for (auto& slot : queues_) {
		slot->device_queue.reset();
		slot->configured = false;
		slot->call.drain();
	}
	config_changed_.drain();
	backend_.reset();
	counters_.resets.fetch_add(1);
}

void Transport::activate_locked()
{
	const uint64_t negotiated = driver_features_.load();
	for (auto& slot : queues_) {
		if (!slot->configured)
			continue;
		DeviceQueue::Config queue_config;
		queue_config.areas = slot->areas;
		queue_config.size = slot->size;
		queue_config.event_idx = (negotiated & VB_FEATURE(VB_F_RING_EVENT_IDX)) != 0;
		queue_config.indirect_desc =
			(negotiated & VB_FEATURE(VB_F_RING_INDIRECT_DESC)) != 0;
		slot->device_queue =
			std::make_unique<DeviceQueue>(memory_, queue_config, slot->ring_counters);
	}
	// The device thread runs activation, then looks at every queue once: a driver may have
	// made buffers available before DRIVER_OK (the statsq is primed then, 5.5.6.3).
	const uint64_t epoch = activation_epoch_;
	loop_.post([this, epoch, negotiated] {
		{
			std::lock_guard lock(state_mutex_);
			if (epoch != activation_epoch_ || !live())
				return;
			backend_.activate(negotiated);
			activated_ = true;
			for (unsigned index = 0; index < queues_.size(); ++index)
				if (queues_[index]->device_queue && live())
					backend_.queue_notified(index);
			check_broken_queues_locked();
		}
		note_progress();
	});
}

void Transport::raise_needs_reset_locked()
{
	const uint8_t status = status_.load();
	if (status & VB_STATUS_NEEDS_RESET)
		return;
	status_.store(status | VB_STATUS_NEEDS_RESET);
	counters_.needs_reset_raised.fetch_add(1);
	// 2.1.2: "If DRIVER_OK is set, after it sets DEVICE_NEEDS_RESET, the device MUST send a
	// device configuration change notification to the driver."
	if (status & VB_STATUS_DRIVER_OK)
		send_config_interrupt();
}

void Transport::check_broken_queues_locked()
{
	for (auto& slot : queues_)
		if (slot->device_queue && slot->device_queue->broken())
			raise_needs_reset_locked();
}

// ---- Queues --------------------------------------------------------------------------------

uint16_t Transport::queue_max_size(unsigned index) const
{
	if (index >= queues_.size())
		return 0;
	return backend_.queue_max_size(index, driver_features_.load());
}

QueueSetupError Transport::setup_queue(unsigned index, uint16_t size, const QueueAreas& areas)
{
	std::lock_guard lock(state_mutex_);
	auto refuse = [this](QueueSetupError error) {
		counters_.queue_setups_rejected[static_cast<size_t>(error)].fetch_add(1);
		return error;
	};
	if (index >= queues_.size())
		return refuse(QueueSetupError::kNoSuchQueue);
	const uint8_t status = status_.load();
	// 3.1.1 step 7: queues are set up after FEATURES_OK and before DRIVER_OK.
	if (!features_settled_locked(status) ||
	    (status & (VB_STATUS_DRIVER_OK | VB_STATUS_FAILED | VB_STATUS_NEEDS_RESET)))
		return refuse(QueueSetupError::kWrongPhase);
	const uint16_t max_size = backend_.queue_max_size(index, driver_features_.load());
	if (max_size == 0)
		return refuse(QueueSetupError::kNoSuchQueue);
	if (!vb_vring_size_valid(size))
		return refuse(QueueSetupError::kSizeInvalid);
	if (size > max_size)
		return refuse(QueueSetupError::kSizeTooLarge);
	switch (check_queue_areas(memory_, areas, size)) {
	case QueueAreaError::kNone:
		break;
	case QueueAreaError::kSizeInvalid:
		return refuse(QueueSetupError::kSizeInvalid);
	case QueueAreaError::kMisaligned:
		return refuse(QueueSetupError::kMisaligned);
	case QueueAreaError::kOutsideRam:
		return refuse(QueueSetupError::kOutsideRam);
	case QueueAreaError::kOverlapping:
		return refuse(QueueSetupError::kOverlapping);
	}
	QueueSlot& slot = *queues_[index];
	slot.configured = true;
	slot.size = size;
	slot.areas = areas;
	return QueueSetupError::kNone;
}

DeviceQueue* Transport::queue(unsigned index)
{
	return index < queues_.size() ? queues_[index]->device_queue.get() : nullptr;
}

void Transport::signal_used(unsigned index)
{
	DeviceQueue* device_queue = queue(index);
	if (device_queue == nullptr || !device_queue->needs_interrupt())
		return;
	QueueSlot& slot = *queues_[index];
	const auto start = std::chrono::steady_clock::now();
	slot.call.signal();
	slot.notifications.interrupt_ns.fetch_add(static_cast<uint64_t>(
		std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
			.count()));
	slot.notifications.interrupts_sent.fetch_add(1);
}

// ---- Config space --------------------------------------------------------------------------

bool Transport::config_read(uint32_t offset, void* dst, uint32_t len) const
{
	std::lock_guard lock(config_mutex_);
	if (offset > config_.size() || len > config_.size() - offset) {
		std::memset(dst, 0, len);
		counters_.config_reads_out_of_range.fetch_add(1);
		return false;
	}
	std::memcpy(dst, config_.data() + offset, len);
	return true;
}

uint32_t Transport::config_read32(uint32_t offset) const
{
	uint32_t wire = 0;
	(void)config_read(offset, &wire, sizeof(wire)); // zero when out of range, and counted
	return from_le(wire);
}

bool Transport::config_write(uint32_t offset, const void* src, uint32_t len)
{
	std::lock_guard lock(config_mutex_);
	if (offset > config_.size() || len > config_.size() - offset ||
	    !backend_.config_write_allowed(offset, len, driver_features_.load(), status_.load())) {
		counters_.config_writes_rejected.fetch_add(1);
		return false;
	}
	std::memcpy(config_.data() + offset, src, len);
	backend_.config_written(offset, len, config_.data());
	return true;
}

bool Transport::config_write32(uint32_t offset, uint32_t value)
{
	const uint32_t wire = to_le(value);
	return config_write(offset, &wire, sizeof(wire));
}

void Transport::update_config(uint32_t offset, const void* src, uint32_t len)
{
	{
		std::lock_guard lock(config_mutex_);
		if (offset > config_.size() || len > config_.size() - offset)
			throw std::out_of_range("Transport::update_config beyond the config space");
		std::memcpy(config_.data() + offset, src, len);
		config_generation_.fetch_add(1);
	}
	if (status_.load() & VB_STATUS_DRIVER_OK)
		send_config_interrupt();
}

void Transport::read_config(uint32_t offset, void* dst, uint32_t len) const
{
	std::lock_guard lock(config_mutex_);
	if (offset > config_.size() || len > config_.size() - offset)
		throw std::out_of_range("Transport::read_config beyond the config space");
	std::memcpy(dst, config_.data() + offset, len);
}

void Transport::send_config_interrupt()
{
	// Counted before it is signalled: a driver that reads the count after draining the
	// eventfd has then counted every interrupt it drained (SimGuest::wait_until_settled).
	counters_.config_interrupts.fetch_add(1);
	config_changed_.signal();
}

// ---- Notifications and the device thread ---------------------------------------------------

void Transport::notify(unsigned index)
{
	if (index >= queues_.size()) {
		counters_.notifications_out_of_range.fetch_add(1);
		return;
	}
	queues_[index]->kick.signal();
}

int Transport::call_fd(unsigned index) const
{
	return index < queues_.size() ? queues_[index]->call.fd() : -1;
}

uint64_t Transport::wait_for_interrupt(unsigned index, std::chrono::milliseconds timeout)
{
	if (index >= queues_.size())
		return 0;
	return queues_[index]->call.wait(timeout);
}

uint64_t Transport::wait_for_config_change(std::chrono::milliseconds timeout)
{
	return config_changed_.wait(timeout);
}

void Transport::set_timer_interval(std::chrono::milliseconds interval)
{
	timer_.set_interval(interval);
}

void Transport::post(std::function<void()> task)
{
	loop_.post([this, task = std::move(task)] {
		{
			std::lock_guard lock(state_mutex_);
			task();
			check_broken_queues_locked();
		}
		note_progress();
	});
}

void Transport::on_kick(unsigned index)
{
	QueueSlot& slot = *queues_[index];
	const uint64_t kicks = slot.kick.drain();
	if (kicks == 0)
		return;
	slot.notifications.kicks_received.fetch_add(kicks);
	{
		std::lock_guard lock(state_mutex_);
		if (!live() || !activated_ || !slot.device_queue) {
			counters_.kicks_ignored.fetch_add(kicks);
		} else {
			backend_.queue_notified(index);
			check_broken_queues_locked();
		}
	}
	note_progress();
}

void Transport::on_timer()
{
	if (timer_.drain() == 0)
		return;
	{
		std::lock_guard lock(state_mutex_);
		if (live() && activated_) {
			backend_.timer_expired();
			check_broken_queues_locked();
		}
	}
	note_progress();
}

void Transport::note_progress()
{
	// Taking the lock orders this notification after a waiter's check of its condition,
	// so no wake-up is lost between the check and the wait.
	{
		std::lock_guard lock(progress_mutex_);
	}
	progress_.notify_all();
}

bool Transport::wait_until(const std::function<bool()>& condition,
			   std::chrono::milliseconds timeout)
{
	std::unique_lock lock(progress_mutex_);
	return progress_.wait_for(lock, timeout, condition);
}

// ---- Observers -----------------------------------------------------------------------------

const QueueCounters& Transport::queue_counters(unsigned index) const
{
	return queues_.at(index)->ring_counters;
}

const NotificationCounters& Transport::notification_counters(unsigned index) const
{
	return queues_.at(index)->notifications;
}

} // namespace vbsim
