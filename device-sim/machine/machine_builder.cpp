// SPDX-License-Identifier: GPL-2.0
#include "machine/machine_builder.h"

#include <stdexcept>
#include <string>

#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

MachineBuilder& MachineBuilder::ram_bytes(uint64_t bytes)
{
	config_.ram_bytes = bytes;
	return *this;
}

MachineBuilder& MachineBuilder::backing(PageBacking backing)
{
	config_.backing = backing;
	return *this;
}

MachineBuilder& MachineBuilder::profile(std::string_view name)
{
	std::optional<BalloonProfile> named = profile_by_name(name);
	if (!named)
		throw std::invalid_argument("unknown device profile " + std::string(name));
	config_.device.profile = *named;
	config_.device.profile.offered_features |= extra_features_;
	return *this;
}

MachineBuilder& MachineBuilder::offer(uint64_t features)
{
	extra_features_ |= features;
	config_.device.profile.offered_features |= features;
	return *this;
}

MachineBuilder& MachineBuilder::discard_mode(DiscardMode mode)
{
	config_.device.discard_mode = mode;
	return *this;
}

MachineBuilder& MachineBuilder::host_page_bytes(uint64_t bytes)
{
	config_.device.host_page_bytes = bytes;
	return *this;
}

MachineBuilder& MachineBuilder::max_chunk_order(unsigned order)
{
	config_.guest.max_chunk_order = order;
	return *this;
}

MachineBuilder& MachineBuilder::guest_zeroes_pages(bool also_on_inflate)
{
	config_.guest.free_policy = {true, 0};
	config_.guest.zero_on_inflate = also_on_inflate;
	return *this;
}

MachineBuilder& MachineBuilder::free_page_hinting()
{
	config_.guest.free_page_hinting = true;
	return offer(VB_FEATURE(VB_F_FREE_PAGE_HINT));
}

MachineBuilder& MachineBuilder::min_free_pages(uint64_t pages)
{
	config_.guest.min_free_pages = pages;
	return *this;
}

MachineBuilder& MachineBuilder::page_reporting()
{
	config_.guest.page_reporting = true;
	return offer(VB_FEATURE(VB_F_PAGE_REPORTING));
}

MachineBuilder& MachineBuilder::hold_reporting()
{
	config_.guest.hold_reporting = true;
	return *this;
}

MachineBuilder& MachineBuilder::prepare_memory(std::function<void(GuestMemory&)> prepare)
{
	config_.prepare_memory = std::move(prepare);
	return *this;
}

std::unique_ptr<SimMachine> MachineBuilder::build() const
{
	return std::make_unique<SimMachine>(config_);
}

} // namespace vbsim
