// SPDX-License-Identifier: GPL-2.0
//
// What a device model (the balloon) supplies to the transport. The transport owns the
// virtio mechanics (status, features, config bytes, queues, notifications, the device
// thread); the backend decides what the device offers and does with each queue.
//
// Every call happens with the transport's state lock held, so a backend never runs two
// of these at once and a reset never races with queue processing.
#ifndef VBSIM_TRANSPORT_DEVICE_BACKEND_H
#define VBSIM_TRANSPORT_DEVICE_BACKEND_H

#include <cstdint>

namespace vbsim
{

class DeviceBackend
{
public:
	// ---- Guest thread (register accesses) ---------------------------------------------
	// Device-specific veto when the driver sets FEATURES_OK; `driver_features` is already
	// known to be a subset of the offered features that includes VERSION_1. On a
	// transitional device it is also asked at a legacy driver's DRIVER_OK, with a subset
	// of the offered features' low 32 bits (no VERSION_1).
	virtual bool accept_features(uint64_t driver_features) = 0;
	// Largest size of transport queue `index` under `driver_features`; 0: no such queue.
	virtual uint16_t queue_max_size(unsigned index, uint64_t driver_features) const = 0;
	// Which driver writes to the config space the device takes. Called with the config
	// lock held (not the state lock); must only look at its arguments and constants.
	virtual bool config_write_allowed(uint32_t offset, uint32_t len, uint64_t driver_features,
					  uint8_t status) const = 0;
	// A driver write the policy above allowed has been stored: `config` is the whole
	// config space as it is now. Called with the config lock held, on the guest thread.
	virtual void config_written(uint32_t offset, uint32_t len, const uint8_t* config) = 0;
	// The driver wrote 0 to status: drop everything the device holds for the driver.
	virtual void reset() = 0;

	// ---- Device thread ------------------------------------------------------------------
	// DRIVER_OK was set; the queues the driver set up exist now.
	virtual void activate(uint64_t negotiated_features) = 0;
	// The driver notified queue `index` (or the device was just activated).
	virtual void queue_notified(unsigned index) = 0;
	// The periodic timer (Transport::set_timer_interval) fired.
	virtual void timer_expired() = 0;

protected:
	~DeviceBackend() = default;
};

} // namespace vbsim

#endif
