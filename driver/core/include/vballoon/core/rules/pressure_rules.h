// SPDX-License-Identifier: GPL-2.0
//
// The rules the pressure governor keeps (pressure_governor.h; spec/requirements.md,
// "Policy: the pressure governor", rows BAL-DRV-PRS-*), one predicate each, true while the
// rule holds. Each holds the one hook (support/mutant.h) through which spec/mutants.tsv
// breaks its rule; outside the mutant build each is a constant.
#ifndef VBALLOON_CORE_RULES_PRESSURE_RULES_H
#define VBALLOON_CORE_RULES_PRESSURE_RULES_H

#include "vballoon/support/mutant.h"

namespace vb::rules
{

// BAL-DRV-PRS-01: the inflate never leaves less available memory than the floor.
VB_RULE bool inflate_stops_at_floor()
{
	return !VB_MUTANT(PRS01_INFLATE_BELOW_FLOOR);
}

// BAL-DRV-PRS-02: the inflate reclaims (evicts page cache) only while the guest is calm.
VB_RULE bool reclaims_only_when_calm()
{
	return !VB_MUTANT(PRS02_RECLAIM_UNDER_PRESSURE);
}

// BAL-DRV-PRS-03: the balloon gives memory back below the target only with DEFLATE_ON_OOM.
VB_RULE bool gives_back_only_with_deflate_on_oom(bool deflate_on_oom)
{
	return deflate_on_oom || VB_MUTANT(PRS03_GIVE_BACK_WITHOUT_DOO);
}

// BAL-DRV-PRS-04: after pressure, the inflate waits until the guest has been calm for the
// hold time.
VB_RULE bool holds_after_pressure()
{
	return !VB_MUTANT(PRS04_NO_HOLD_AFTER_PRESSURE);
}

// BAL-DRV-PRS-05: the floor includes the working set learned from refaults.
VB_RULE bool floor_learned_from_refaults()
{
	return !VB_MUTANT(PRS05_FLOOR_NOT_LEARNED);
}

// BAL-DRV-PRS-06: while the guest is tight, each batch is smaller than the last tick's.
VB_RULE bool paces_when_tight()
{
	return !VB_MUTANT(PRS06_NO_PACING_WHEN_TIGHT);
}

// BAL-DRV-PRS-07: a new target from the host ends a hold.
VB_RULE bool new_target_ends_hold()
{
	return !VB_MUTANT(PRS07_TARGET_CHANGE_IGNORED);
}

// BAL-DRV-PRS-08: a governed inflate takes free pages without reclaim first.
VB_RULE bool governed_inflate_takes_free_pages_first()
{
	return !VB_MUTANT(PRS08_GOVERNED_INFLATE_RECLAIMS_FIRST);
}

// BAL-DRV-PRS-10: a balloon that cannot give back (no DEFLATE_ON_OOM, or give-back off)
// never reclaims.
VB_RULE bool reclaims_only_when_it_can_give_back()
{
	return !VB_MUTANT(PRS10_RECLAIM_WITHOUT_GIVE_BACK);
}

// BAL-DRV-PRS-14: the first reclaim is a probe (RAM/1024) that grows only after calm ticks.
VB_RULE bool reclaim_starts_with_a_probe()
{
	return !VB_MUTANT(PRS14_NO_RECLAIM_PROBE);
}

// BAL-DRV-PRS-15: pressure right after the balloon's own reclaim undoes it at once.
VB_RULE bool undoes_its_own_reclaim()
{
	return !VB_MUTANT(PRS15_OWN_RECLAIM_KEPT);
}

// BAL-DRV-PRS-16: reclaim that scans many pages to free few (the pages were in use) is
// pressure: the cache left is working set.
VB_RULE bool reclaim_of_used_pages_is_pressure()
{
	return !VB_MUTANT(PRS16_SCAN_STORM_IGNORED);
}

// BAL-DRV-PRS-17: a governed inflate reclaims at most the page cache no process maps.
VB_RULE bool reclaims_only_unmapped_cache()
{
	return !VB_MUTANT(PRS17_RECLAIMS_MAPPED_CACHE);
}

#ifndef VB_MUTANTS
static_assert(inflate_stops_at_floor() && reclaims_only_when_calm() &&
		      !gives_back_only_with_deflate_on_oom(false) && holds_after_pressure() &&
		      floor_learned_from_refaults() && paces_when_tight() &&
		      new_target_ends_hold() && governed_inflate_takes_free_pages_first() &&
		      reclaim_starts_with_a_probe() && undoes_its_own_reclaim() &&
		      reclaim_of_used_pages_is_pressure() && reclaims_only_unmapped_cache(),
	      "outside the mutant build every rule holds, at compile time");
#endif

} // namespace vb::rules

#endif
