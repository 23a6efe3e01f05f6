// SPDX-License-Identifier: GPL-2.0
//
// The device status rules of virtio 1.x (2.1 and 3.1.1) for a driver's write of the
// status field, as a pure function so they can be tested on their own.
//  - Writing 0 resets the device.
//  - The driver sets bits in order: ACKNOWLEDGE, DRIVER, FEATURES_OK, DRIVER_OK, and
//    "MUST NOT clear a device status bit" (only a reset clears them).
//  - DEVICE_NEEDS_RESET belongs to the device: whatever the driver writes there is ignored.
//  - FAILED may be set at any time.
// Whether FEATURES_OK is granted also depends on the features, which the transport checks.
#ifndef VBSIM_TRANSPORT_DEVICE_STATUS_H
#define VBSIM_TRANSPORT_DEVICE_STATUS_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace vbsim
{

enum class StatusViolation : uint8_t {
	kNone,
	kClearsBits,		   // a set bit missing from the write (other than by reset)
	kReservedBits,		   // bits the spec does not define
	kDriverWithoutAcknowledge, // DRIVER before ACKNOWLEDGE
	kFeaturesOkWithoutDriver,  // FEATURES_OK before DRIVER
	kDriverOkWithoutFeaturesOk,
	kCount
};

inline constexpr size_t kStatusViolationCount = static_cast<size_t>(StatusViolation::kCount);

std::string_view to_string(StatusViolation violation);

// The status a driver's write asks for, with the device-owned NEEDS_RESET bit kept as the
// device has it.
uint8_t requested_status(uint8_t current, uint8_t written);

// Whether the write (not a reset: `written` != 0) breaks an ordering rule.
StatusViolation check_status_write(uint8_t current, uint8_t written);

} // namespace vbsim

#endif
