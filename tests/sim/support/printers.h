// SPDX-License-Identifier: GPL-2.0
//
// Readable names for test parameters in test output and in ctest's test names (gtest
// finds these by argument-dependent lookup, so they live in the types' namespace).
#ifndef VBSIM_TESTS_SIM_SUPPORT_PRINTERS_H
#define VBSIM_TESTS_SIM_SUPPORT_PRINTERS_H

#include <ostream>

#include "balloon/page_discarder.h"
#include "memory/guest_memory.h"

namespace vbsim
{

inline void PrintTo(DiscardMode mode, std::ostream* out)
{
	*out << (mode == DiscardMode::kMergeRuns ? "merge-runs" : "per-page");
}

inline void PrintTo(PageBacking backing, std::ostream* out)
{
	*out << (backing == PageBacking::kSmallPages ? "4k-pages" : "thp");
}

} // namespace vbsim

#endif
