// SPDX-License-Identifier: GPL-2.0
//
// A transitional device: modern, but it also serves a driver that does not negotiate
// VERSION_1 and so speaks the legacy interface (virtio 1.x, the balloon's "Legacy
// Interface" notes). What changes for such a driver:
//  - it never sets FEATURES_OK (the legacy status has no such bit) and cannot be refused
//    a feature set: MUST_TELL_HOST is never required of it, whatever the device's policy
//    for modern drivers (BAL-DEV-LEG-01);
//  - the config fields stay little-endian (BAL-DEV-LEG-03), but it may write `actual` a
//    byte at a time, least significant first; the host takes the new value only once its
//    most significant byte is written (BAL-DEV-LEG-04);
//  - stats entries and the free page hint command id are in the guest CPU's byte order
//    (BAL-DEV-LEG-05, -07): `guest_big_endian` says which it is;
//  - the first statsq buffer after initialisation is held but not read: old drivers sent
//    it uninitialised (BAL-DEV-LEG-06).
// Not modelled: the legacy ring layout (one contiguous area, 4096-byte alignment) and
// guest-order ring fields and PFN arrays. The rings here stay the modern split layout in
// little-endian whatever the driver, so a big-endian legacy guest is modelled only in the
// payloads the balloon's legacy rows name.
#ifndef VBSIM_BALLOON_LEGACY_INTERFACE_H
#define VBSIM_BALLOON_LEGACY_INTERFACE_H

#include <cstdint>

#include "memory/guest_byte_order.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

struct LegacyInterface {
	// Serve drivers without VERSION_1. Off: a modern-only device, as before.
	bool transitional = false;
	// The guest CPU's byte order, for what a legacy driver writes in it.
	bool guest_big_endian = false;
};

// Whether a driver that took `driver_features` uses the legacy interface of this device.
inline bool uses_legacy_interface(const LegacyInterface& legacy, uint64_t driver_features)
{
	return legacy.transitional && !(driver_features & VB_FEATURE(VB_F_VERSION_1));
}

// The byte order of the guest-native payloads (stats, hint command ids) of such a driver.
inline ByteOrder payload_byte_order(const LegacyInterface& legacy, uint64_t driver_features)
{
	return uses_legacy_interface(legacy, driver_features) && legacy.guest_big_endian
		       ? ByteOrder::kBig
		       : ByteOrder::kLittle;
}

} // namespace vbsim

#endif
