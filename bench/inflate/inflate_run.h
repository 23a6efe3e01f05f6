// SPDX-License-Identifier: GPL-2.0
//
// One measured run of one mode: a fresh simulated machine (guest RAM, the host's balloon
// device on its thread, the guest running the driver core), its RAM populated, the balloon
// inflated to the target and deflated back to 0 (device-sim/machine/inflate_then_deflate.h,
// the run `vballoon-sim inflate` makes too), and what every side counted meanwhile.
// The machine is gone when run_mode() returns: only one guest's RAM exists at a time.
#ifndef VBALLOON_BENCH_INFLATE_INFLATE_RUN_H
#define VBALLOON_BENCH_INFLATE_INFLATE_RUN_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "memory/guest_memory.h"
#include "modes.h"

namespace vbbench
{

struct BenchConfig {
	uint64_t ram_bytes = 8ull << 30;
	uint64_t balloon_bytes = 7ull << 30;
	vbsim::PageBacking backing = vbsim::PageBacking::kTransparentHugePages;
	std::string profile = "qemu-7.2";
	unsigned populate_threads = 1;
	// Host page size the device tracks (BalloonDeviceOptions::host_page_bytes): 4 KiB
	// discards what each request names, as QEMU and Firecracker do on THP; 2 MiB waits for
	// whole huge pages.
	uint64_t host_page_bytes = 4096;
	// Keep the guest's worker on CPU 0 and the device thread on CPU 1 (--pin-threads): a
	// guest's vCPU and the host's device thread on CPUs of their own, as in a VM. Left to
	// itself, the scheduler of a small machine often wakes each of the two on the other's
	// CPU, and they take turns there instead of working side by side.
	bool pin_threads = false;
};

// One direction (inflate or deflate): wall time from setting the target until the driver
// settled, and the counters' differences over that time. Phase times are summed over both
// threads (allocation and zeroing on the guest's, translation and discards on the device's).
struct PhaseSample {
	double ms = 0;
	uint64_t alloc_ns = 0;	   // the driver allocating balloon pages (SimOsCounters::alloc_ns)
	uint64_t translate_ns = 0; // device: validating and parsing requests, taking ownership
	uint64_t discard_ns = 0;   // device: inside madvise
	uint64_t zero_ns = 0;	   // guest: zeroing pages (SimOsCounters::guest_init_ns)
	uint64_t interrupt_ns = 0; // device: sending this queue's interrupts (waking the guest)
	uint64_t kicks = 0;	   // on this direction's queue
	uint64_t interrupts = 0;
	uint64_t chains = 0;	      // requests (descriptor chains) the device processed
	uint64_t driver_messages = 0; // requests the driver added
	uint64_t discard_calls = 0;
	uint64_t wire_pages_discarded = 0;
	uint64_t pages_moved = 0;	       // pages the device took (inflate) or gave back
	uint64_t pages_zeroed = 0;	       // by the guest
	uint64_t pages_zero_skipped = 0;       // the device had initialised them
	uint64_t wire_pages_device_initialised = 0; // bits the device set (inflate)

	double phase_ms(uint64_t ns) const { return static_cast<double>(ns) / 1e6; }
	// Ring, kicks, interrupts and waiting: what the counted phases leave of the total.
	// Negative when the two threads' phases overlapped by more than the rest.
	double transfer_ms() const
	{
		return ms - phase_ms(alloc_ns + translate_ns + interrupt_ns + discard_ns + zero_ns);
	}
};

struct RunSample {
	double populate_ms = 0;
	uint64_t huge_mib_populated = 0; // AnonHugePages of this process after populating
	uint64_t huge_mib_after_inflate = 0;
	uint64_t huge_mib_after_deflate = 0;
	uint64_t resident_mib_populated = 0;
	uint64_t resident_mib_after_inflate = 0;
	uint64_t resident_mib_after_deflate = 0;
	uint64_t negotiated_features = 0;
	PhaseSample inflate;
	PhaseSample deflate;		   // empty for the limit
	std::vector<std::string> problems; // what went wrong; the timing may still be printed
};

enum class PopulateMethod : uint8_t { kPopulateWrite, kTouch };

// Asks the kernel once, on a scratch page, whether MADV_POPULATE_WRITE exists (Linux 5.14);
// GuestMemory::populate falls back to touching every page without it.
PopulateMethod detect_populate_method();
std::string_view to_string(PopulateMethod method);

// AnonHugePages of this process, in MiB (0 when /proc/self/smaps_rollup is unreadable).
uint64_t anon_huge_mib();

// Throws std::system_error when guest RAM cannot be mapped, std::invalid_argument for a
// profile the device refuses.
RunSample run_mode(const BenchConfig& config, const Mode& mode);

} // namespace vbbench

#endif
