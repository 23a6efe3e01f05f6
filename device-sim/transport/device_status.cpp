// SPDX-License-Identifier: GPL-2.0
#include "transport/device_status.h"

#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

namespace
{

constexpr uint8_t kDefinedStatusBits = VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER |
				       VB_STATUS_FEATURES_OK | VB_STATUS_DRIVER_OK |
				       VB_STATUS_NEEDS_RESET | VB_STATUS_FAILED;

} // namespace

std::string_view to_string(StatusViolation violation)
{
	switch (violation) {
	case StatusViolation::kNone:
		return "none";
	case StatusViolation::kClearsBits:
		return "clears-bits";
	case StatusViolation::kReservedBits:
		return "reserved-bits";
	case StatusViolation::kDriverWithoutAcknowledge:
		return "driver-without-acknowledge";
	case StatusViolation::kFeaturesOkWithoutDriver:
		return "features-ok-without-driver";
	case StatusViolation::kDriverOkWithoutFeaturesOk:
		return "driver-ok-without-features-ok";
	case StatusViolation::kCount:
		break;
	}
	return "unknown";
}

uint8_t requested_status(uint8_t current, uint8_t written)
{
	return static_cast<uint8_t>((written & ~VB_STATUS_NEEDS_RESET) |
				    (current & VB_STATUS_NEEDS_RESET));
}

StatusViolation check_status_write(uint8_t current, uint8_t written)
{
	if (written & ~kDefinedStatusBits)
		return StatusViolation::kReservedBits;
	const uint8_t next = requested_status(current, written);
	if ((current & ~next) != 0)
		return StatusViolation::kClearsBits;
	if ((next & VB_STATUS_DRIVER) && !(next & VB_STATUS_ACKNOWLEDGE))
		return StatusViolation::kDriverWithoutAcknowledge;
	if ((next & VB_STATUS_FEATURES_OK) && !(next & VB_STATUS_DRIVER))
		return StatusViolation::kFeaturesOkWithoutDriver;
	if ((next & VB_STATUS_DRIVER_OK) && !(next & VB_STATUS_FEATURES_OK))
		return StatusViolation::kDriverOkWithoutFeaturesOk;
	return StatusViolation::kNone;
}

} // namespace vbsim
