// SPDX-License-Identifier: GPL-2.0
//
// The device rules of spec/requirements.md that the inflateq keeps (inflate_queue.h), one
// predicate each, true while the rule holds. Each holds the one hook (support/mutant.h)
// through which spec/mutants.tsv breaks its rule; outside the mutant build each is the
// constant `true`.
#ifndef VBSIM_BALLOON_RULES_INFLATE_QUEUE_RULES_H
#define VBSIM_BALLOON_RULES_INFLATE_QUEUE_RULES_H

#include "vballoon/support/mutant.h"

namespace vbsim::rules
{

// BAL-DEV-XCH-10: with bits 20 and 7 an inflate without its bitmap is refused whole.
VB_RULE bool chunked_inflate_without_bitmap_refused()
{
	return !VB_MUTANT(XCH_DEV_MISSING_BITMAP_INFLATES);
}

// BAL-DEV-XCH-10: with bits 20 and 7 an inflate whose bitmap is shorter than ceil(n/8) is
// refused whole.
VB_RULE bool chunked_inflate_with_short_bitmap_refused()
{
	return !VB_MUTANT(XCH_DEV_SHORT_BITMAP_ACCEPTED);
}

// BAL-DEV-DIINF-02: with bit 7 and a non-zero poison_val the bitmap is left as the driver
// wrote it and the used length is 0.
VB_RULE bool bit7_poison_leaves_bitmap_unused()
{
	return !VB_MUTANT(DEV_DI02_BITMAP_USED_WITH_POISON);
}

// BAL-DEV-XCH-11: with ranges every bit the device does not set is cleared.
VB_RULE bool range_bitmap_cleared()
{
	return !VB_MUTANT(XCH_DEV_BITMAP_NOT_CLEARED);
}

// BAL-DEV-DIINF-03: no bit for a page the device did not discard.
VB_RULE bool bits_set_only_after_discard()
{
	return !VB_MUTANT(DEV_DI03_BITS_SET_WITHOUT_DISCARD);
}

// BAL-DEV-DIINF-04: above 4 KiB host pages a PFN's bit waits for its whole host page.
VB_RULE bool partial_host_page_bits_clear()
{
	return !VB_MUTANT(DEV_DI04_PARTIAL_HOST_PAGE_REPORTED);
}

// BAL-DEV-DIINF-05: with ranges bit i covers range descriptor i.
VB_RULE bool range_bits_numbered_by_range()
{
	return !VB_MUTANT(DEV_DI09_CHUNK_BITS_BY_PAGE);
}

// BAL-DEV-XCH-12: with ranges an acted-on inflate is used with length ceil(n/8).
VB_RULE bool range_used_length_is_ceil_n_over_8()
{
	return !VB_MUTANT(XCH_DEV_USED_LENGTH_ONE_BYTE);
}

// BAL-DEV-DIINF-01, BAL-DEV-XCH-12: an inflate whose bitmap was written is used with the
// bitmap's length.
VB_RULE bool used_length_is_bitmap_length()
{
	return !VB_MUTANT(DEV_DI01_USED_LENGTH_ZERO);
}

#ifndef VB_MUTANTS
static_assert(chunked_inflate_without_bitmap_refused() &&
		      chunked_inflate_with_short_bitmap_refused() &&
		      bit7_poison_leaves_bitmap_unused() && range_bitmap_cleared() &&
		      bits_set_only_after_discard() && partial_host_page_bits_clear() &&
		      range_bits_numbered_by_range() && range_used_length_is_ceil_n_over_8() &&
		      used_length_is_bitmap_length(),
	      "outside the mutant build every rule holds, at compile time");
#endif

} // namespace vbsim::rules

#endif
