// SPDX-License-Identifier: GPL-2.0
//
// Feature negotiation: which of the device's offered bits the driver accepts.
#ifndef VBALLOON_CORE_FEATURES_H
#define VBALLOON_CORE_FEATURES_H

#include <stdint.h>

#include "vballoon/core/os_interface.h"

namespace vb {

// Every device-specific bit this driver knows how to use.
uint64_t driver_supported_features();

// The subset of `offered` to accept for a guest with `traits`. Covers the device-specific
// bits only: transport bits (VERSION_1, the ring features) are the transport's business and
// never appear in the result. Mirrors the rules of Linux's
// virtballoon_validate(): PAGE_POISON only when the guest really needs freed pages to hold
// a pattern (otherwise the driver would promise to write a value it never writes).
uint64_t accept_features(uint64_t offered, const GuestTraits& traits);

inline bool has_feature(uint64_t features, unsigned bit)
{
	return (features & (1ull << bit)) != 0;
}

// Size of the config space prefix that the negotiated features make valid.
uint32_t config_bytes_needed(uint64_t features);

} // namespace vb

#endif
