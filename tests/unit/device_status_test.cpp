// SPDX-License-Identifier: GPL-2.0
//
// The driver's status writes against the spec's ordering rules (2.1, 3.1.1).
#include <gtest/gtest.h>

#include "transport/device_status.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{
namespace
{

constexpr uint8_t kAck = VB_STATUS_ACKNOWLEDGE;
constexpr uint8_t kDriver = VB_STATUS_DRIVER;
constexpr uint8_t kFeaturesOk = VB_STATUS_FEATURES_OK;
constexpr uint8_t kDriverOk = VB_STATUS_DRIVER_OK;

TEST(DeviceStatus, TheNormalHandshakeIsAccepted)
{
	EXPECT_EQ(check_status_write(0, kAck), StatusViolation::kNone);
	EXPECT_EQ(check_status_write(kAck, kAck | kDriver), StatusViolation::kNone);
	EXPECT_EQ(check_status_write(kAck | kDriver, kAck | kDriver | kFeaturesOk),
		  StatusViolation::kNone);
	EXPECT_EQ(check_status_write(kAck | kDriver | kFeaturesOk,
				     kAck | kDriver | kFeaturesOk | kDriverOk),
		  StatusViolation::kNone);
}

TEST(DeviceStatus, BitsMustBeSetInOrder)
{
	EXPECT_EQ(check_status_write(0, kDriver), StatusViolation::kDriverWithoutAcknowledge);
	EXPECT_EQ(check_status_write(kAck, kAck | kFeaturesOk),
		  StatusViolation::kFeaturesOkWithoutDriver);
	EXPECT_EQ(check_status_write(kAck | kDriver, kAck | kDriver | kDriverOk),
		  StatusViolation::kDriverOkWithoutFeaturesOk);
}

TEST(DeviceStatus, OnlyAResetClearsBits)
{
	EXPECT_EQ(check_status_write(kAck | kDriver, kAck), StatusViolation::kClearsBits);
	EXPECT_EQ(check_status_write(kAck | kDriver | kFeaturesOk | kDriverOk,
				     kAck | kDriver | kFeaturesOk),
		  StatusViolation::kClearsBits);
}

TEST(DeviceStatus, UndefinedBitsAreRefused)
{
	EXPECT_EQ(check_status_write(kAck, kAck | 16), StatusViolation::kReservedBits);
	EXPECT_EQ(check_status_write(kAck, kAck | 32), StatusViolation::kReservedBits);
}

TEST(DeviceStatus, FailedCanBeSetAtAnyPoint)
{
	EXPECT_EQ(check_status_write(0, VB_STATUS_FAILED), StatusViolation::kNone);
	EXPECT_EQ(check_status_write(kAck | kDriver, kAck | kDriver | VB_STATUS_FAILED),
		  StatusViolation::kNone);
}

TEST(DeviceStatus, NeedsResetBelongsToTheDevice)
{
	const uint8_t live = kAck | kDriver | kFeaturesOk | kDriverOk;
	// A driver that writes back what it read without NEEDS_RESET does not clear it...
	EXPECT_EQ(check_status_write(live | VB_STATUS_NEEDS_RESET, live), StatusViolation::kNone);
	EXPECT_EQ(requested_status(live | VB_STATUS_NEEDS_RESET, live),
		  live | VB_STATUS_NEEDS_RESET);
	// ...and cannot set it either.
	EXPECT_EQ(requested_status(live, live | VB_STATUS_NEEDS_RESET), live);
}

} // namespace
} // namespace vbsim
