// SPDX-License-Identifier: GPL-2.0
//
// A minimal, hand-driven virtio driver for device tests: it negotiates, lays its rings out
// in the first few MiB of guest RAM, and sends exactly the requests a test spells out. The
// real driver (the core on the simulated guest OS) is tested elsewhere; this one exists so
// device tests control every byte and every kick. It runs on the test thread while the
// device runs on its own.
#ifndef VBSIM_TESTS_SIM_SUPPORT_TEST_GUEST_H
#define VBSIM_TESTS_SIM_SUPPORT_TEST_GUEST_H

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "memory/guest_byte_order.h"
#include "memory/guest_memory.h"
#include "transport/transport.h"
#include "vballoon/spec/virtio_balloon.h"
#include "virtqueue/driver_ring.h"

namespace vbsim::test
{

using namespace std::chrono_literals;

// Long enough that only a hung device reaches it; never a way to wait for something.
inline constexpr std::chrono::milliseconds kHangTimeout = 10s;

class TestGuest
{
public:
	// Rings and buffers live below this; balloon pages are taken above it.
	static constexpr uint64_t kDriverAreaBytes = 4ull << 20;
	static constexpr uint32_t kFirstFreePfn = kDriverAreaBytes / GuestMemory::kWirePageBytes;

	TestGuest(GuestMemory& memory, Transport& transport)
	    : memory_(memory), transport_(transport)
	{
	}

	// ACKNOWLEDGE, DRIVER, features (VERSION_1 plus `wanted` & offered), FEATURES_OK.
	// Throws when the device refuses. Returns the negotiated features.
	uint64_t negotiate(uint64_t wanted = ~uint64_t{0});
	// A ring for every queue the negotiated features create, each at the device's
	// maximum size (or `size` when non-zero).
	void setup_queues(uint16_t size = 0);
	void driver_ok();
	// All three.
	uint64_t start(uint64_t wanted = ~uint64_t{0});
	// A legacy driver instead (a transitional device): ACKNOWLEDGE, DRIVER and the low 32
	// bits of `wanted` & offered, never VERSION_1 and never FEATURES_OK. setup_queues() and
	// driver_ok() then follow the legacy sequence. The rings keep the modern layout.
	uint64_t negotiate_legacy(uint64_t wanted = ~uint64_t{0});
	uint64_t start_legacy(uint64_t wanted = ~uint64_t{0});

	uint64_t features() const { return features_; }
	DriverRing& ring(vb_queue_kind kind);
	unsigned index(vb_queue_kind kind) const;

	// Bump allocation in the driver area (throws when it runs out).
	uint64_t alloc(uint64_t bytes, uint64_t align = 16);
	uint64_t write_buffer(const void* data, uint64_t len);

	// One chain made available and kicked if the device wants a kick; returns its token.
	void* post(vb_queue_kind kind, const std::vector<ChainBuffer>& out,
		   const std::vector<ChainBuffer>& in = {});
	void* post_pfns(vb_queue_kind kind, const std::vector<uint32_t>& pfns);
	// Entries in `order`: little-endian, or a legacy guest's own order.
	void* post_stats(const std::vector<std::pair<uint16_t, uint64_t>>& entries,
			 ByteOrder order = ByteOrder::kLittle);
	// Blocks (on the queue's interrupt eventfd) until `token` comes back used. False on a
	// hang or a broken ring.
	bool wait_for(vb_queue_kind kind, void* token, uint32_t* len = nullptr,
		      std::chrono::milliseconds timeout = kHangTimeout);
	// post_pfns + wait_for.
	bool send_pfns(vb_queue_kind kind, const std::vector<uint32_t>& pfns);
	// Every ring's three areas and indirect tables: what changes in guest RAM while requests
	// are posted and served (the driver writes descriptors, tables and avail rings, the
	// device the used rings).
	std::vector<std::pair<uint64_t, uint64_t>> ring_areas() const;
	// Used entries collected but not waited for yet.
	size_t completed(vb_queue_kind kind) const { return completed_[kind].size(); }

	static std::vector<uint32_t> pfn_range(uint32_t first, uint32_t count);

private:
	void collect(vb_queue_kind kind);

	GuestMemory& memory_;
	Transport& transport_;
	uint64_t features_ = 0;
	bool legacy_ = false;
	uint64_t next_free_ = 64 * 1024; // keep gpa 0 unused: no buffer is ever at address 0
	uintptr_t next_token_ = 0;
	std::array<std::unique_ptr<DriverRing>, VB_QUEUE_KIND_COUNT> rings_;
	std::array<std::map<void*, uint32_t>, VB_QUEUE_KIND_COUNT> completed_;
	std::vector<std::pair<uint64_t, uint64_t>> indirect_areas_;
};

} // namespace vbsim::test

#endif
