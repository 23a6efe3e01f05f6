// SPDX-License-Identifier: GPL-2.0
#include "balloon/balloon_device.h"

#include <cstring>
#include <optional>
#include <stdexcept>

#include "memory/guest_memory.h"
#include "memory/little_endian.h"
#include "transport/thread_cpu_time.h"
#include "vballoon/support/mutant.h"

namespace vbsim
{

namespace
{

bool offers(const BalloonProfile& profile, unsigned feature_bit)
{
	return (profile.offered_features & VB_FEATURE(feature_bit)) != 0;
}

void check_profile(const BalloonProfile& profile)
{
	const uint32_t config = profile.config_size_bytes;
	if (config != VB_CONFIG_SIZE_MIN && config != VB_CONFIG_SIZE_WITH_HINT &&
	    config != VB_CONFIG_SIZE_WITH_POISON)
		throw std::invalid_argument(
			"balloon profile: config size must be 8, 12 or 16 bytes");
	// A field a feature makes valid must exist in the config space.
	if (offers(profile, VB_F_FREE_PAGE_HINT) && config < VB_CONFIG_SIZE_WITH_HINT)
		throw std::invalid_argument(
			"balloon profile: FREE_PAGE_HINT needs the cmd id field");
	if (offers(profile, VB_F_PAGE_POISON) && config < VB_CONFIG_SIZE_WITH_POISON)
		throw std::invalid_argument(
			"balloon profile: PAGE_POISON needs the poison_val field");
	if (!vb_vring_size_valid(profile.queue_size) ||
	    (offers(profile, VB_F_FREE_PAGE_HINT) &&
	     !vb_vring_size_valid(profile.free_page_queue_size)) ||
	    (offers(profile, VB_F_PAGE_REPORTING) &&
	     !vb_vring_size_valid(profile.reporting_queue_size)))
		throw std::invalid_argument("balloon profile: a queue size is not a power of two");
	if (profile.max_pfn_bytes_per_request < VB_PFN_ENTRY_BYTES)
		throw std::invalid_argument("balloon profile: PFN array bound below one entry");
}

TransportConfig transport_config(const BalloonDeviceOptions& options)
{
	check_profile(options.profile);
	TransportConfig config;
	config.offered_features = offered_features(options);
	config.initial_config.assign(options.profile.config_size_bytes, 0);
	const uint32_t target = to_le(options.initial_target_wire_pages);
	std::memcpy(config.initial_config.data() + VB_CONFIG_NUM_PAGES_OFFSET, &target,
		    sizeof(target));
	config.queue_count =
		static_cast<unsigned>(vb_queue_count(options.profile.offered_features));
	config.transitional = options.legacy.transitional;
	return config;
}

// The queue kind at transport index `index` under `features`, if any.
std::optional<vb_queue_kind> kind_at(unsigned index, uint64_t features)
{
	for (int kind = 0; kind < VB_QUEUE_KIND_COUNT; ++kind)
		if (vb_queue_index(features, static_cast<vb_queue_kind>(kind)) ==
		    static_cast<int>(index))
			return static_cast<vb_queue_kind>(kind);
	return std::nullopt;
}

// The tracker of partly ballooned host pages when they are above 4 KiB, else null. Checks
// the profile first, so a bad profile is reported before a bad host page size.
std::unique_ptr<HugePageTracker> huge_page_tracker(const GuestMemory& memory,
						   const BalloonDeviceOptions& options)
{
	check_profile(options.profile);
	if (options.host_page_bytes % GuestMemory::kWirePageBytes != 0 ||
	    options.host_page_bytes == 0)
		throw std::invalid_argument("balloon device: host pages are whole 4 KiB multiples");
	if (options.host_page_bytes == GuestMemory::kWirePageBytes)
		return nullptr;
	return std::make_unique<HugePageTracker>(
		memory.size() / GuestMemory::kWirePageBytes,
		static_cast<uint32_t>(options.host_page_bytes / GuestMemory::kWirePageBytes));
}

} // namespace

uint64_t offered_features(const BalloonDeviceOptions& options)
{
	uint64_t features = options.profile.offered_features;
	if (options.device_init_on_inflate)
		features |= VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);
	const bool reporting = offers(options.profile, VB_F_PAGE_REPORTING);
	if (options.device_init_reported == OnOffAuto::kOn ||
	    (options.device_init_reported == OnOffAuto::kAuto &&
	     (reporting || VB_MUTANT(DEV_DI08_AUTO_IGNORES_REPORTING))))
		features |= VB_FEATURE(VB_F_DEVICE_INIT_REPORTED);
	return features;
}

BalloonDevice::BalloonDevice(GuestMemory& memory, BalloonDeviceOptions options)
    : options_(std::move(options)), ownership_(memory.size() / GuestMemory::kWirePageBytes),
      discarder_(memory, options_.discard_mode, counters_),
      huge_pages_(huge_page_tracker(memory, options_)),
      inflate_(memory, options_.profile.max_pfn_bytes_per_request, ownership_, discarder_,
	       huge_pages_.get(), counters_),
      deflate_(memory, options_.profile.max_pfn_bytes_per_request, ownership_, discarder_,
	       huge_pages_.get(), counters_),
      stats_(memory, counters_), hint_queue_(memory, counters_),
      report_queue_(memory, discarder_, ownership_, counters_), faults_(options_.faults),
      transport_(memory, *this, transport_config(options_))
{
	discarder_.set_inhibited(options_.discards_inhibited);
	transport_.start();
}

BalloonDevice::~BalloonDevice()
{
	transport_.stop();
}

// ---- Negotiation and config space ----------------------------------------------------------

bool BalloonDevice::accept_features(uint64_t driver_features)
{
	// 5.5.3.1: "The device MAY fail to accept FEATURES_OK if VIRTIO_BALLOON_F_MUST_TELL_HOST
	// is offered and the driver did not accept it."
	if (options_.require_must_tell_host && offers(options_.profile, VB_F_MUST_TELL_HOST) &&
	    !(driver_features & VB_FEATURE(VB_F_MUST_TELL_HOST))) {
		// "transitional devices MUST support guests which do not negotiate
		// VIRTIO_BALLOON_F_MUST_TELL_HOST": a legacy driver has no way to hear a no.
		const bool legacy = uses_legacy_interface(options_.legacy, driver_features);
		return legacy && !VB_MUTANT(DEV_LEG01_LEGACY_DRIVER_HELD_TO_MUST_TELL_HOST);
	}
	return true;
}

uint16_t BalloonDevice::queue_max_size(unsigned index, uint64_t driver_features) const
{
	const auto kind = kind_at(index, driver_features);
	if (!kind)
		return 0;
	switch (*kind) {
	case VB_QUEUE_FREE_PAGE:
		return options_.profile.free_page_queue_size;
	case VB_QUEUE_REPORTING:
		return options_.profile.reporting_queue_size;
	default:
		return options_.profile.queue_size;
	}
}

bool BalloonDevice::config_write_allowed(uint32_t offset, uint32_t len, uint64_t driver_features,
					 uint8_t status) const
{
	// Old legacy drivers wrote `actual` a byte at a time over PCI; config_written() keeps
	// the host from taking it before its last byte.
	if (uses_legacy_interface(options_.legacy, driver_features) &&
	    offset >= VB_CONFIG_ACTUAL_OFFSET && len <= sizeof(uint32_t) &&
	    offset + len <= VB_CONFIG_ACTUAL_OFFSET + sizeof(uint32_t) &&
	    (len == 1 || len == 2 || len == 4) && offset % len == 0)
		return true;
	// Otherwise whole, aligned le32 fields only ("legacy drivers MUST write all 4 bytes
	// atomically", and no driver has a reason to write less).
	if (len != sizeof(uint32_t))
		return false;
	if (offset == VB_CONFIG_ACTUAL_OFFSET)
		return true;
	// poison_val: "The driver MUST NOT modify poison_val while DRIVER_OK is set" (5.5.6.5),
	// and it only means something with PAGE_POISON.
	if (offset == VB_CONFIG_POISON_VAL_OFFSET)
		return (driver_features & VB_FEATURE(VB_F_PAGE_POISON)) &&
		       !(status & VB_STATUS_DRIVER_OK);
	// num_pages and free_page_hint_cmd_id belong to the device.
	return false;
}

void BalloonDevice::config_written(uint32_t offset, uint32_t len, const uint8_t* config)
{
	constexpr uint32_t kActualLast = VB_CONFIG_ACTUAL_OFFSET + sizeof(uint32_t) - 1;
	if (offset > kActualLast || offset + len <= VB_CONFIG_ACTUAL_OFFSET)
		return;
	// "the device SHOULD NOT use the actual value written by the driver in the
	// configuration space, until the last, most-significant byte of the value has been
	// written" (legacy drivers wrote it byte by byte, least significant first).
	if (offset + len <= kActualLast && !VB_MUTANT(DEV_LEG04_ACTUAL_TAKEN_BEFORE_ITS_LAST_BYTE)) {
		counters_.actual_partial_writes.fetch_add(1);
		return;
	}
	uint32_t wire;
	std::memcpy(&wire, config + VB_CONFIG_ACTUAL_OFFSET, sizeof(wire));
	actual_.store(from_wire(wire, config_byte_order()));
}

ByteOrder BalloonDevice::config_byte_order() const
{
	// Legacy devices are otherwise guest-endian; the balloon's config is the exception
	// ("transitional devices and drivers MUST format the fields in struct
	// virtio_balloon_config according to the little-endian format").
	if (VB_MUTANT(DEV_LEG03_CONFIG_IN_GUEST_ORDER))
		return payload_byte_order(options_.legacy, transport_.driver_features());
	return ByteOrder::kLittle;
}

void BalloonDevice::write_config_field(uint32_t offset, uint32_t value)
{
	const uint32_t wire = to_wire(value, config_byte_order());
	transport_.update_config(offset, &wire, sizeof(wire));
}

uint32_t BalloonDevice::read_config_field(uint32_t offset) const
{
	uint32_t wire = 0;
	transport_.read_config(offset, &wire, sizeof(wire));
	return from_wire(wire, config_byte_order());
}

void BalloonDevice::set_target_wire_pages(uint32_t num_pages)
{
	write_config_field(VB_CONFIG_NUM_PAGES_OFFSET, num_pages);
}

uint32_t BalloonDevice::target_wire_pages() const
{
	return read_config_field(VB_CONFIG_NUM_PAGES_OFFSET);
}

uint32_t BalloonDevice::poison_value() const
{
	if (options_.profile.config_size_bytes < VB_CONFIG_SIZE_WITH_POISON)
		return 0;
	return read_config_field(VB_CONFIG_POISON_VAL_OFFSET);
}

// ---- Lifecycle -------------------------------------------------------------------------------

void BalloonDevice::reset()
{
	inflate_.reset();
	deflate_.reset();
	stats_.forget_buffer();
	hint_queue_.reset(events_.load());
	negotiated_ = 0;
	actual_.store(0);
	// After a reset the driver starts with an empty balloon: every page is the guest's
	// again (a rebooted guest uses all its RAM).
	if (!VB_MUTANT(XCH_DEV_RESET_KEEPS_BALLOONED_PAGES))
		counters_.wire_pages_released_by_reset.fetch_add(ownership_.give_back_all());
	if (huge_pages_)
		huge_pages_->clear();
	const uint32_t zero = 0;
	transport_.update_config(VB_CONFIG_ACTUAL_OFFSET, &zero, sizeof(zero));
	if (options_.profile.config_size_bytes >= VB_CONFIG_SIZE_WITH_POISON)
		transport_.update_config(VB_CONFIG_POISON_VAL_OFFSET, &zero, sizeof(zero));
	// A new driver starts with no round asked of it.
	if (options_.profile.config_size_bytes >= VB_CONFIG_SIZE_WITH_HINT)
		transport_.update_config(VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET, &zero, sizeof(zero));
}

// ---- Free page hinting, host side -----------------------------------------------------------

void BalloonDevice::write_hint_cmd_id(uint32_t id)
{
	write_config_field(VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET, id);
}

uint32_t BalloonDevice::start_hint_round()
{
	if (!offers(options_.profile, VB_F_FREE_PAGE_HINT))
		return 0;
	uint32_t id = last_cmd_id_.load();
	uint32_t next;
	do {
		// 2, 3, ... and back to 2 after 2^32 - 1 rounds: the driver closed those long ago.
		next = id == UINT32_MAX ? VB_CMD_ID_MIN_RUN : id + 1;
		if (VB_MUTANT(DEV_FPH03_ID_ISSUED_AGAIN) && id >= VB_CMD_ID_MIN_RUN)
			next = id;
	} while (!last_cmd_id_.compare_exchange_weak(id, next));
	write_hint_cmd_id(next);
	return next;
}

void BalloonDevice::stop_hint_round()
{
	if (offers(options_.profile, VB_F_FREE_PAGE_HINT))
		write_hint_cmd_id(VB_CMD_ID_STOP);
}

void BalloonDevice::finish_hinting()
{
	// After DONE the device must not change hinted pages; this one never does.
	if (offers(options_.profile, VB_F_FREE_PAGE_HINT))
		write_hint_cmd_id(VB_CMD_ID_DONE);
}

uint32_t BalloonDevice::hint_cmd_id() const
{
	if (options_.profile.config_size_bytes < VB_CONFIG_SIZE_WITH_HINT)
		return 0;
	return read_config_field(VB_CONFIG_FREE_PAGE_HINT_CMD_ID_OFFSET);
}

void BalloonDevice::activate(uint64_t negotiated_features)
{
	negotiated_ = negotiated_features;
	last_negotiated_.store(negotiated_features);
	inflate_.activate(negotiated_features);
	deflate_.activate(negotiated_features);
	// Old legacy drivers primed the statsq with an uninitialised buffer.
	stats_.activate(payload_order(),
			uses_legacy_interface(options_.legacy, negotiated_features),
			(negotiated_features & VB_FEATURE(VB_F_X_PRESSURE)) != 0);
	if ((negotiated_features & VB_FEATURE(VB_F_STATS_VQ)) &&
	    options_.stats_polling_interval.count() > 0)
		transport_.set_timer_interval(options_.stats_polling_interval);
}

void BalloonDevice::queue_notified(unsigned index)
{
	const auto kind = kind_at(index, negotiated_);
	if (!kind)
		return;
	if (faults_.ignore_kick(*kind))
		return; // the chains wait in the ring for the next notification
	// A held free_page_vq is looked at only when released (which drains it).
	if (*kind == VB_QUEUE_FREE_PAGE && hold_free_page_queue_.load())
		return;
	drain_queue(index, *kind);
}

void BalloonDevice::hold_free_page_queue()
{
	hold_free_page_queue_.store(true);
}

void BalloonDevice::release_free_page_queue()
{
	hold_free_page_queue_.store(false);
	transport_.post([this] {
		const int index = vb_queue_index(negotiated_, VB_QUEUE_FREE_PAGE);
		if (transport_.live() && index >= 0 && transport_.queue(index))
			drain_queue(static_cast<unsigned>(index), VB_QUEUE_FREE_PAGE);
	});
}

void BalloonDevice::timer_expired()
{
	send_stats_request();
}

// ---- Queue processing ------------------------------------------------------------------------

void BalloonDevice::drain_queue(unsigned index, vb_queue_kind kind)
{
	// The free page queue's work is host CPU a migration pays for: counted on the
	// device thread's own clock.
	if (kind == VB_QUEUE_FREE_PAGE) {
		const uint64_t start = thread_cpu_ns();
		drain_queue_chains(index, kind);
		free_page_queue_cpu_ns_.fetch_add(thread_cpu_ns() - start);
		return;
	}
	drain_queue_chains(index, kind);
}

void BalloonDevice::drain_queue_chains(unsigned index, vb_queue_kind kind)
{
	DeviceQueue* queue = transport_.queue(index);
	if (queue == nullptr)
		return;
	for (;;) {
		queue->disable_notifications();
		DeviceQueue::PopStatus status;
		while ((status = queue->pop(chain_)) != DeviceQueue::PopStatus::kEmpty &&
		       status != DeviceQueue::PopStatus::kBroken) {
			if (status != DeviceQueue::PopStatus::kChain)
				continue;
			switch (faults_.before_chain(kind)) {
			case FaultInjector::ChainFate::kServe:
				handle_chain(*queue, kind, chain_);
				if (options_.profile.notifies_each_request &&
				    (kind == VB_QUEUE_INFLATE || kind == VB_QUEUE_DEFLATE) &&
				    !faults_.drop_interrupt(kind))
					transport_.signal_used(index);
				break;
			case FaultInjector::ChainFate::kBreak:
				// The chain is neither served nor returned.
				transport_.request_reset_locked();
				transport_.signal_used(index);
				return;
			case FaultInjector::ChainFate::kVanish:
				transport_.surprise_remove();
				return;
			}
		}
		if (status == DeviceQueue::PopStatus::kBroken || !queue->enable_notifications())
			break;
	}
	if (!faults_.drop_interrupt(kind))
		transport_.signal_used(index);
}

void BalloonDevice::handle_chain(DeviceQueue& queue, vb_queue_kind kind,
				 const DescriptorChain& chain)
{
	switch (kind) {
	case VB_QUEUE_INFLATE:
		inflate_.receive(queue, chain, inflate_.wants_poison_value() ? poison_value() : 0);
		// The host changes its mind while the driver inflates (fault_plan.h).
		if (const auto target = faults_.after_inflate_chain())
			set_target_wire_pages(*target);
		return;
	case VB_QUEUE_DEFLATE:
		deflate_.receive(queue, chain);
		return;
	case VB_QUEUE_STATS:
		stats_.receive(queue, chain);
		return;
	case VB_QUEUE_FREE_PAGE:
		hint_queue_.receive(queue, chain, hint_cmd_id(), payload_order(), events_.load());
		return;
	case VB_QUEUE_REPORTING:
		report_queue_.receive(queue, chain,
				      negotiated(VB_F_PAGE_POISON) && poison_value() != 0,
				      negotiated(VB_F_DEVICE_INIT_REPORTED), events_.load());
		return;
	case VB_QUEUE_KIND_COUNT:
		break;
	}
	throw std::logic_error("BalloonDevice: chain on a queue of unknown kind");
}

void BalloonDevice::hold_deflate_acks()
{
	deflate_.hold_acks();
}

void BalloonDevice::release_deflate_acks()
{
	deflate_.open_gate();
	transport_.post([this] {
		const int index = vb_queue_index(negotiated_, VB_QUEUE_DEFLATE);
		DeviceQueue* queue =
			transport_.live() && index >= 0 ? transport_.queue(index) : nullptr;
		if (queue != nullptr && deflate_.ack_held(*queue))
			transport_.signal_used(static_cast<unsigned>(index));
	});
}

void BalloonDevice::request_stats()
{
	transport_.post([this] { send_stats_request(); });
}

bool BalloonDevice::send_stats_request()
{
	const int index = vb_queue_index(negotiated_, VB_QUEUE_STATS);
	DeviceQueue* queue = transport_.live() && index >= 0 ? transport_.queue(index) : nullptr;
	if (queue == nullptr || !stats_.request_fresh(*queue))
		return false;
	transport_.signal_used(static_cast<unsigned>(index));
	return true;
}

// ---- Observers -------------------------------------------------------------------------------

int BalloonDevice::queue_index(vb_queue_kind kind) const
{
	const uint64_t negotiated = last_negotiated_.load();
	return negotiated == 0 ? -1 : vb_queue_index(negotiated, kind);
}

uint64_t BalloonDevice::kicks_received(vb_queue_kind kind) const
{
	const int index = queue_index(kind);
	return index < 0 ? 0 : transport_.notification_counters(index).kicks_received.load();
}

uint64_t BalloonDevice::interrupts_sent(vb_queue_kind kind) const
{
	const int index = queue_index(kind);
	return index < 0 ? 0 : transport_.notification_counters(index).interrupts_sent.load();
}

uint64_t BalloonDevice::interrupt_ns(vb_queue_kind kind) const
{
	const int index = queue_index(kind);
	return index < 0 ? 0 : transport_.notification_counters(index).interrupt_ns.load();
}

uint64_t BalloonDevice::chains_processed(vb_queue_kind kind) const
{
	const int index = queue_index(kind);
	return index < 0 ? 0 : transport_.queue_counters(index).chains_popped.load();
}

uint64_t BalloonDevice::ring_rejections(vb_queue_kind kind, RingRejection reason) const
{
	const int index = queue_index(kind);
	return index < 0 ? 0 : transport_.queue_counters(index).rejected_by(reason);
}

} // namespace vbsim
