// SPDX-License-Identifier: GPL-2.0
#include "vballoon/core/features.h"

#include "vballoon/support/mutant.h"

namespace vb {

uint64_t driver_supported_features()
{
	return VB_FEATURE(VB_F_MUST_TELL_HOST) | VB_FEATURE(VB_F_STATS_VQ) |
	       VB_FEATURE(VB_F_DEFLATE_ON_OOM) | VB_FEATURE(VB_F_PAGE_POISON) |
	       VB_FEATURE(VB_F_FREE_PAGE_HINT) | VB_FEATURE(VB_F_PAGE_REPORTING) |
	       VB_FEATURE(VB_F_X_CHUNKED) | VB_FEATURE(VB_F_X_INIT_ON_INFLATE) |
	       VB_FEATURE(VB_F_X_PRESSURE) | VB_FEATURE(VB_F_DEVICE_INIT_REPORTED) |
	       VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);
}

uint64_t accept_features(uint64_t offered, const GuestTraits& traits)
{
	uint64_t accepted = offered & driver_supported_features();

	if (VB_MUTANT(FEAT01_DROP_MUST_TELL_HOST))
		accepted &= ~VB_FEATURE(VB_F_MUST_TELL_HOST);

	// The spec says the driver SHOULD clear PAGE_POISON when it will not write poison_val
	// into pages it hands back; a guest without init_on_free/poisoning writes nothing.
	if (!traits.freed_pages_need_pattern && !VB_MUTANT(FEAT02_POISON_WITHOUT_A_PATTERN))
		accepted &= ~VB_FEATURE(VB_F_PAGE_POISON);
	// The device's promise to initialise pages saves work only in a guest that would
	// otherwise initialise them; elsewhere it would only cost the device a bitmap.
	if (!traits.freed_pages_need_pattern)
		accepted &= ~VB_FEATURE(VB_F_X_INIT_ON_INFLATE);
	// The DEVICE_INIT proposals only when the OS asked for them (bit 6 has other owners).
	// DEVICE_INIT_ON_INFLATE promises zero only: worth a bitmap in a guest that would zero
	// deflated pages itself. It replaces bit 21 (an inflate carries one bitmap).
	if (!traits.accept_device_init && !VB_MUTANT(DI_DRV01_DEVICE_INIT_TAKEN_UNASKED))
		accepted &= ~(VB_FEATURE(VB_F_DEVICE_INIT_REPORTED) |
			      VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	if (!traits.freed_pages_need_pattern || traits.free_page_pattern != 0)
		accepted &= ~VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);
	if (has_feature(accepted, VB_F_DEVICE_INIT_ON_INFLATE))
		accepted &= ~VB_FEATURE(VB_F_X_INIT_ON_INFLATE);
	// Hinting and reporting promise queues someone serves: the OS's hint work item and
	// shrinker, its reporting pass.
	if (!traits.runs_free_page_hinting)
		accepted &= ~VB_FEATURE(VB_F_FREE_PAGE_HINT);
	if (!traits.runs_page_reporting)
		accepted &= ~VB_FEATURE(VB_F_PAGE_REPORTING);
	// VB_F_X_PRESSURE tells the device the guest may stop short of its target: only true
	// of a guest whose OS runs the pressure governor.
	if (!traits.runs_pressure_governor && !VB_MUTANT(PRS11_PRESSURE_WITHOUT_GOVERNOR))
		accepted &= ~VB_FEATURE(VB_F_X_PRESSURE);
	// A guest whose free pages must keep a pattern may let the device discard them only
	// when the device was told the pattern (Linux's virtballoon_validate()).
	if (traits.freed_pages_need_pattern && !has_feature(accepted, VB_F_PAGE_POISON) &&
	    !VB_MUTANT(FEAT03_REPORTING_WITHOUT_POISON))
		accepted &= ~VB_FEATURE(VB_F_PAGE_REPORTING);
	// DEVICE_INIT_REPORTED says something about reports only.
	if (!has_feature(accepted, VB_F_PAGE_REPORTING))
		accepted &= ~VB_FEATURE(VB_F_DEVICE_INIT_REPORTED);
	return accepted;
}

uint32_t config_bytes_needed(uint64_t features)
{
	if (has_feature(features, VB_F_PAGE_POISON))
		return VB_CONFIG_SIZE_WITH_POISON;
	if (has_feature(features, VB_F_FREE_PAGE_HINT))
		return VB_CONFIG_SIZE_WITH_HINT;
	return VB_CONFIG_SIZE_MIN;
}

} // namespace vb
