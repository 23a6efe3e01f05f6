// SPDX-License-Identifier: GPL-2.0
//
// The two harnesses of fuzz_device_queue (fuzz_device_queue.cpp says what each checks).
// Each reads the rest of the input as its program.
#ifndef VBALLOON_TESTS_FUZZ_DEVICE_QUEUE_HARNESSES_H
#define VBALLOON_TESTS_FUZZ_DEVICE_QUEUE_HARNESSES_H

#include "fuzz_input.h"

namespace vbfuzz
{

// One DeviceQueue on 64 KiB of RAM against the reference ring (reference_ring.h).
void run_ring_harness(FuzzInput& in);
// The whole BalloonDevice through its transport and device thread.
void run_device_harness(FuzzInput& in);

} // namespace vbfuzz

#endif
