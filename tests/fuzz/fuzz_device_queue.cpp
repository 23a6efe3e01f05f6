// SPDX-License-Identifier: GPL-2.0
//
// fuzz_device_queue: a hostile driver against the host side. The fuzzer's bytes are a
// program for a driver that writes whatever it likes into guest RAM (descriptor tables,
// avail rings and indices, indirect tables, PFN arrays, chunk descriptors, bitmaps, stats
// buffers) and pokes the device's registers in any order. Two harnesses share the input,
// chosen by its first byte:
//
//  even  the ring alone: one DeviceQueue on a small RAM, no threads. Every pop is checked
//        against a reference model of the split-ring rules written from the spec
//        (which avail entry is consumed, whether the chain is valid, its exact segments),
//        and RAM is compared before and after each device call: the device writes nothing
//        but the used ring.
//  odd   the whole BalloonDevice: transport, device thread, payload parsing, ownership,
//        discards, huge-page tracking, stats, the deflate gate, resets. After every
//        device-side step the harness waits for the device thread to finish it, then
//        checks the accounting: host-owned pages == inflated - deflated - released by
//        reset, queues within bounds, a broken queue raises NEEDS_RESET.
//
// Guest RAM sits between PROT_NONE guards (GuestMemory), so any access outside it, by the
// device or by the harness, crashes the fuzzer. A device thread that hangs is caught by
// the settle timeout (and libFuzzer's -timeout); an exception the device throws on its
// thread terminates the process, which libFuzzer reports too.
//
// The harnesses are ring_harness.cpp and device_harness.cpp; the ring's reference model is
// reference_ring.h; what they share, hostile_driver.h.
#include <cstddef>
#include <cstdint>

#include "device_queue_harnesses.h"
#include "fuzz_input.h"

using vbfuzz::FuzzInput;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	FuzzInput in(data, size);
	if (in.u8() % 2 == 0) {
		vbfuzz::run_ring_harness(in);
	} else {
		vbfuzz::run_device_harness(in);
	}
	return 0;
}
