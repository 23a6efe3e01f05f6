// SPDX-License-Identifier: GPL-2.0
//
// Builds a SimMachine from the choices tools make by name: a device profile ("qemu-7.2"),
// extra features offered on top of it, how the host discards, how the guest allocates and
// initialises balloon pages. Anything it has no setter for is reachable through config().
#ifndef VBSIM_MACHINE_MACHINE_BUILDER_H
#define VBSIM_MACHINE_MACHINE_BUILDER_H

#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>

#include "machine/sim_machine.h"

namespace vbsim
{

class MachineBuilder
{
public:
	MachineBuilder& ram_bytes(uint64_t bytes);
	MachineBuilder& backing(PageBacking backing);
	// A named device profile (profile_by_name). Throws std::invalid_argument for a name
	// no profile has. Features offered earlier with offer() are kept.
	MachineBuilder& profile(std::string_view name);
	// Features the device offers on top of its profile (experimental extensions).
	MachineBuilder& offer(uint64_t features);
	MachineBuilder& discard_mode(DiscardMode mode);
	MachineBuilder& host_page_bytes(uint64_t bytes);
	// Largest block the driver allocates: 0 is a page at a time (Linux), 9 is 2 MiB.
	MachineBuilder& max_chunk_order(unsigned order);
	// The guest zeroes pages it gets back from the balloon (init_on_free), and also pages
	// going into it (`also_on_inflate`, the 2017 kernel of the VIRTIO_BALLOON_F_SG thread) unless the device
	// promises initialised pages.
	MachineBuilder& guest_zeroes_pages(bool also_on_inflate);
	// Free page hinting (VIRTIO_BALLOON_F_FREE_PAGE_HINT): the device offers it and the
	// guest runs the hint work item. Needs a profile that can offer it (qemu-7.2, full...).
	MachineBuilder& free_page_hinting();
	// The guest's min watermark (SimGuestOptions::min_free_pages).
	MachineBuilder& min_free_pages(uint64_t pages);
	// Free page reporting (VIRTIO_BALLOON_F_PAGE_REPORTING): offered and used.
	MachineBuilder& page_reporting();
	// Its passes held until SimGuest::release_reporting() (SimGuestOptions::hold_reporting).
	MachineBuilder& hold_reporting();
	MachineBuilder& prepare_memory(std::function<void(GuestMemory&)> prepare);

	MachineConfig& config() { return config_; }
	const MachineConfig& config() const { return config_; }
	// Throws what SimMachine's constructor throws.
	std::unique_ptr<SimMachine> build() const;

private:
	MachineConfig config_;
	uint64_t extra_features_ = 0;
};

} // namespace vbsim

#endif
