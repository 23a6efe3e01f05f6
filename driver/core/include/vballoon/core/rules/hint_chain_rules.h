// SPDX-License-Identifier: GPL-2.0
//
// The rules the free page hinter's chains keep (hint_chain_packer.h), one predicate each,
// true while the rule holds. Each holds the one hook (support/mutant.h) through which
// spec/mutants.tsv breaks its rule; outside the mutant build each is the constant `true`.
#ifndef VBALLOON_CORE_RULES_HINT_CHAIN_RULES_H
#define VBALLOON_CORE_RULES_HINT_CHAIN_RULES_H

#include "vballoon/support/mutant.h"

namespace vb::rules
{

// BAL-DRV-FPH-02: a hint names free pages the driver holds. Two blocks become one segment
// only when the second starts where the first ends: a segment across a gap would hint
// pages the guest is using, which the host may then skip sending.
VB_RULE bool chain_merges_only_neighbours()
{
	return !VB_MUTANT(FPH02_CHAIN_MERGED_ACROSS_A_GAP);
}

// BAL-DRV-FPH-02: a chain's segments go in address order, so that neighbours meet and are
// merged (QEMU takes its bitmap mutex once per segment).
VB_RULE bool chain_sorted_by_address()
{
	return !VB_MUTANT(FPH02_CHAIN_NOT_SORTED);
}

// BAL-DRV-FPH-06: a used chain gives back every block it carried to the count of what the
// ring holds; one short, and the round finds the ring full and stops offering pages.
VB_RULE bool used_chain_returns_every_block()
{
	return !VB_MUTANT(FPH06_USED_CHAIN_COUNTED_AS_ONE_BLOCK);
}

// BAL-DRV-FPH-06: a chain slot stays taken until the device returns its chain; taken again
// earlier, it forgets the blocks of the first chain, and the round counts the ring fuller
// than it is.
VB_RULE bool chain_slot_busy_until_used()
{
	return !VB_MUTANT(FPH06_CHAIN_SLOT_REUSED_IN_FLIGHT);
}

} // namespace vb::rules

#endif
