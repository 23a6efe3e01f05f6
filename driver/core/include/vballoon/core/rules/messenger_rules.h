// SPDX-License-Identifier: GPL-2.0
//
// The rules of spec/requirements.md that the messenger keeps (and the inflate with it), one
// predicate each, true while the rule holds. Each holds the one hook (support/mutant.h)
// through which spec/mutants.tsv breaks its rule; outside the mutant build each is the
// constant `true`.
#ifndef VBALLOON_CORE_RULES_MESSENGER_RULES_H
#define VBALLOON_CORE_RULES_MESSENGER_RULES_H

#include "vballoon/core/os_interface.h"
#include "vballoon/support/mutant.h"

namespace vb::rules
{

// BAL-DRV-OP-10, BAL-DRV-XCH-08: with MUST_TELL_HOST a deflated page stays untouched until
// the device has acknowledged the request that named it.
VB_RULE bool deflated_pages_wait_for_ack()
{
	return !VB_MUTANT(OP10_DEFLATED_PAGES_FREED_BEFORE_ACK);
}

// BAL-DRV-OP-13: no page is deflated while the inflate that put it in the balloon is
// unacknowledged, so a page joins the balloon only once the device returns its request.
VB_RULE bool inflated_pages_wait_for_ack()
{
	return !VB_MUTANT(OP13_INFLATE_ACK_NOT_AWAITED);
}

// Both of the above: the pages of a message on `queue` are handed over when the device
// returns it, not as it is added.
VB_RULE bool pages_wait_for_ack(QueueKind queue)
{
	return (queue != QueueKind::kDeflate || deflated_pages_wait_for_ack()) &&
	       (queue != QueueKind::kInflate || inflated_pages_wait_for_ack());
}

// BAL-DRV-OP-12: from its add to the inflateq until its acknowledgement the guest does not
// use a page, so a guest that initialises ballooned pages does it before the add.
VB_RULE bool inflating_pages_untouched()
{
	return !VB_MUTANT(OP12_PAGES_WRITTEN_WHILE_INFLATING);
}

// BAL-DRV-XCH-01: with VB_F_X_CHUNKED every inflate and deflate request goes out as ranges.
VB_RULE bool chunked_requests_are_ranges()
{
	return !VB_MUTANT(XCH_DRV_PFN_ARRAY_WHILE_CHUNKED);
}

// BAL-DRV-XCH-03: no range has a length of 0.
VB_RULE bool ranges_never_empty()
{
	return !VB_MUTANT(XCH_DRV_EMPTY_RANGE);
}

// BAL-DRV-XCH-04: no page is named in two ranges of one request.
VB_RULE bool pages_named_once_per_request()
{
	return !VB_MUTANT(XCH_DRV_RANGE_NAMED_TWICE);
}

// BAL-DRV-DI-02, BAL-DRV-XCH-09: with DEVICE_INIT_ON_INFLATE (bit 7) every inflate request
// ends with a bitmap.
VB_RULE bool bit7_inflates_carry_a_bitmap()
{
	return !VB_MUTANT(DI_DRV02_NO_BITMAP_WITH_BIT7);
}

// BAL-DRV-XCH-09: with ranges the bitmap is ceil(n/8) bytes, n the ranges, not one more.
VB_RULE bool range_bitmap_is_ceil_n_over_8()
{
	return !VB_MUTANT(XCH_DRV_BITMAP_ONE_BYTE_LONG);
}

// BAL-DRV-DI-03: a used length beyond the bitmap makes nothing of that request count as
// initialised.
VB_RULE bool overlong_bitmap_voids_its_request()
{
	return !VB_MUTANT(DI_DRV03_OVERLONG_BITMAP_TRUSTED);
}

// BAL-DRV-XCH-10: range i counts as zeroed only with its bit set below 8 times the used
// length.
VB_RULE bool range_bits_count_below_used_length_only()
{
	return !VB_MUTANT(XCH_DRV_BITS_TRUSTED_BEYOND_USED_LENGTH);
}

#ifndef VB_MUTANTS
static_assert(pages_wait_for_ack(QueueKind::kInflate) && pages_wait_for_ack(QueueKind::kDeflate) &&
		      inflating_pages_untouched() && chunked_requests_are_ranges() &&
		      ranges_never_empty() && pages_named_once_per_request() &&
		      bit7_inflates_carry_a_bitmap() && range_bitmap_is_ceil_n_over_8() &&
		      overlong_bitmap_voids_its_request() &&
		      range_bits_count_below_used_length_only(),
	      "outside the mutant build every rule holds, at compile time");
#endif

} // namespace vb::rules

#endif
