// SPDX-License-Identifier: GPL-2.0
//
// Deflate-on-OOM: the guest is out of memory and the device allowed us to give some back.
#ifndef VBALLOON_CORE_BALLOON_OOM_H
#define VBALLOON_CORE_BALLOON_OOM_H

#include "vballoon/core/balloon.h"

namespace vb {

// Frees at most kOomDeflatePfns and returns the guest pages freed, for the OOM notifier's
// count. Allocates nothing: this runs when the guest has no memory to give.
template <BalloonOs Os> uint64_t Balloon<Os>::deflate_for_oom()
{
	if (!negotiated(VB_F_DEFLATE_ON_OOM))
		return 0;
	counters_.oom_calls.add(1);
	uint64_t freed_pfns = deflate(kOomDeflatePfns).freed_pfns;
	counters_.oom_pages_freed.add(freed_pfns);
	return freed_pfns / pfns_per_page_;
}

} // namespace vb

#endif
