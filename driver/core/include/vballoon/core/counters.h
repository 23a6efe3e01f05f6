// SPDX-License-Identifier: GPL-2.0
//
// What the core counts, for debugfs and the tests. One struct for all parts of the core
// (balloon.h), each part adding only to its own rows. Every counter is a relaxed atomic, so
// parts running beside each other (the hint worker, a reporting pass, an inflate) may add
// to it without a shared lock. Names say the unit (page_balloon.h, "Units"): every page
// counter here counts 4 KiB wire pages, `*_wire_pages*`. The module's debugfs keys are
// older and say "pages" for some of them (driver/linux/kernel_os.cpp, kCounters;
// driver/linux/README.md says what each counts).
#ifndef VBALLOON_CORE_COUNTERS_H
#define VBALLOON_CORE_COUNTERS_H

#include "vballoon/support/atomic.h"

namespace vb {

struct BalloonCounters {
	// The messenger (messenger.h).
	Counter inflate_messages; // descriptors added to inflateq
	Counter deflate_messages; // descriptors added to deflateq
	// The page balloon (page_balloon.h).
	Counter wire_pages_inflated;
	Counter wire_pages_deflated;
	Counter alloc_failures; // a step that could not allocate what it wanted
	Counter oom_calls;
	Counter oom_wire_pages_freed;
	Counter stats_reports;
	Counter migrations;
	// Any part: the device returned a buffer we did not give it.
	Counter foreign_used_buffers;
	Counter unreachable_wire_pages; // allocated wire pages beyond what a 32-bit PFN reaches
	// The messenger and the hinter: the device refused buffers or went away mid-request.
	Counter queue_failures;
	Counter wire_pages_device_initialised; // wire pages the device promised to initialise
	// A device that claimed more than it was offered: a used length beyond an inflate's
	// bitmap or a report's bytes. Nothing of that message is trusted.
	Counter device_init_overclaims;
	// Free page hinting (free_page_hinter.h).
	Counter hint_rounds;          // command ids answered with a round
	Counter hint_ids_ignored;     // an id read again with no STOP or DONE between: stale
	Counter hint_blocks;          // blocks handed to the device as hints
	Counter hint_wire_pages;      // wire pages in them (blocks of any order)
	Counter hint_wire_pages_returned;	// wire pages given back after DONE
	Counter hint_wire_pages_released_early; // wire pages given back before DONE (shrinker, reset)
	// Free page reporting (free_page_reporter.h).
	Counter reports;              // reports the device acknowledged
	Counter wire_pages_reported;  // wire pages in them
	Counter report_failures;      // reports refused, or never acknowledged (device gone)
	Counter wire_pages_reported_device_initialised; // DEVICE_INIT_REPORTED: wire pages it zeroed
	// The pressure governor (pressure_governor.h), with PressurePolicy::enabled.
	Counter pressure_ticks;		       // pressure_tick() calls
	Counter pressure_ticks_under_pressure; // of them, ticks that found the guest tight or thrashing
	Counter pressure_held_steps;	       // inflate steps the governor stopped short (kHeld)
	Counter pressure_refused_wire_pages;   // what those steps wanted and did not take
	Counter pressure_reclaim_wire_pages;   // wire pages a governed inflate took with reclaim
	Counter pressure_give_backs;	       // give-back deflates under sustained pressure
	Counter pressure_give_back_wire_pages; // wire pages they gave back
	Counter pressure_floor_pages; // the governor's floor at the last tick (guest pages), not a sum
};

} // namespace vb

#endif
