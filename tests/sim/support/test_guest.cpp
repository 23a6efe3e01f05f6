// SPDX-License-Identifier: GPL-2.0
#include "support/test_guest.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace vbsim::test
{

namespace
{

constexpr uint16_t kIndirectTableEntries = 8;

} // namespace

uint64_t TestGuest::negotiate(uint64_t wanted)
{
	transport_.set_status(0);
	transport_.set_status(VB_STATUS_ACKNOWLEDGE);
	transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER);
	features_ = (transport_.device_features() & wanted) | VB_FEATURE(VB_F_VERSION_1);
	if (!transport_.set_driver_features(features_))
		throw std::runtime_error("driver features refused");
	transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER | VB_STATUS_FEATURES_OK);
	if (!(transport_.status() & VB_STATUS_FEATURES_OK))
		throw std::runtime_error("FEATURES_OK refused");
	legacy_ = false;
	return features_;
}

uint64_t TestGuest::negotiate_legacy(uint64_t wanted)
{
	transport_.set_status(0);
	transport_.set_status(VB_STATUS_ACKNOWLEDGE);
	transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER);
	features_ = transport_.device_features() & wanted & 0xffffffffu;
	if (!transport_.set_driver_features(features_))
		throw std::runtime_error("driver features refused");
	legacy_ = true;
	return features_;
}

uint64_t TestGuest::start_legacy(uint64_t wanted)
{
	negotiate_legacy(wanted);
	setup_queues();
	driver_ok();
	return features_;
}

void TestGuest::setup_queues(uint16_t size)
{
	for (int kind = 0; kind < VB_QUEUE_KIND_COUNT; ++kind) {
		const int queue_index = vb_queue_index(features_, static_cast<vb_queue_kind>(kind));
		if (queue_index < 0)
			continue;
		const uint16_t max_size =
			transport_.queue_max_size(static_cast<unsigned>(queue_index));
		DriverRing::Config config;
		config.size = size != 0 ? size : max_size;
		config.areas = contiguous_queue_areas(
			alloc(vb_vring_total_bytes(config.size, VB_VRING_USED_ALIGN), 4096),
			config.size);
		config.event_idx = (features_ & VB_FEATURE(VB_F_RING_EVENT_IDX)) != 0;
		config.indirect_desc = (features_ & VB_FEATURE(VB_F_RING_INDIRECT_DESC)) != 0;
		if (config.indirect_desc) {
			config.indirect_table_entries = kIndirectTableEntries;
			const uint64_t bytes =
				DriverRing::indirect_area_bytes(config.size, kIndirectTableEntries);
			config.indirect_area_gpa = alloc(bytes);
			indirect_areas_.emplace_back(config.indirect_area_gpa,
						     config.indirect_area_gpa + bytes);
		}
		rings_[kind] = std::make_unique<DriverRing>(memory_, config);
		const QueueSetupError error = transport_.setup_queue(
			static_cast<unsigned>(queue_index), config.size, config.areas);
		if (error != QueueSetupError::kNone)
			throw std::runtime_error("queue " + std::to_string(queue_index) +
						 " refused");
	}
}

void TestGuest::driver_ok()
{
	const uint8_t features_ok = legacy_ ? 0 : VB_STATUS_FEATURES_OK;
	transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER | features_ok |
			      VB_STATUS_DRIVER_OK);
	if (!(transport_.status() & VB_STATUS_DRIVER_OK))
		throw std::runtime_error("DRIVER_OK not taken");
	// Tests count kicks exactly; one sent before the device thread activated would be
	// counted as ignored (its chain is still served by the activation pass).
	if (!transport_.wait_until([this] { return transport_.activated(); }, kHangTimeout))
		throw std::runtime_error("the device never activated");
}

uint64_t TestGuest::start(uint64_t wanted)
{
	negotiate(wanted);
	setup_queues();
	driver_ok();
	return features_;
}

DriverRing& TestGuest::ring(vb_queue_kind kind)
{
	if (!rings_[kind])
		throw std::runtime_error("no such queue under the negotiated features");
	return *rings_[kind];
}

unsigned TestGuest::index(vb_queue_kind kind) const
{
	const int queue_index = vb_queue_index(features_, kind);
	if (queue_index < 0)
		throw std::runtime_error("no such queue under the negotiated features");
	return static_cast<unsigned>(queue_index);
}

uint64_t TestGuest::alloc(uint64_t bytes, uint64_t align)
{
	const uint64_t at = (next_free_ + align - 1) / align * align;
	if (at + bytes > kDriverAreaBytes)
		throw std::length_error("test guest driver area exhausted");
	next_free_ = at + bytes;
	return at;
}

uint64_t TestGuest::write_buffer(const void* data, uint64_t len)
{
	const uint64_t gpa = alloc(len);
	if (!memory_.write(gpa, data, len))
		throw std::logic_error("driver area outside RAM");
	return gpa;
}

void* TestGuest::post(vb_queue_kind kind, const std::vector<ChainBuffer>& out,
		      const std::vector<ChainBuffer>& in)
{
	void* token = reinterpret_cast<void*>(++next_token_);
	DriverRing& queue = ring(kind);
	if (!queue.add(out.data(), static_cast<unsigned>(out.size()), in.data(),
		       static_cast<unsigned>(in.size()), token))
		throw std::runtime_error("ring full");
	if (queue.kick_prepare())
		transport_.notify(index(kind));
	return token;
}

void* TestGuest::post_pfns(vb_queue_kind kind, const std::vector<uint32_t>& pfns)
{
	std::vector<uint32_t> wire(pfns.size());
	for (size_t i = 0; i < pfns.size(); ++i)
		wire[i] = to_le(pfns[i]);
	const uint64_t bytes = wire.size() * sizeof(uint32_t);
	const uint64_t gpa = write_buffer(wire.data(), bytes);
	return post(kind, {{gpa, static_cast<uint32_t>(bytes)}});
}

void* TestGuest::post_stats(const std::vector<std::pair<uint16_t, uint64_t>>& entries,
			     ByteOrder order)
{
	std::vector<uint8_t> bytes;
	for (const auto& [tag, value] : entries) {
		const uint16_t tag_wire = to_wire(tag, order);
		const uint64_t value_wire = to_wire(value, order);
		uint8_t entry[VB_STAT_ENTRY_BYTES];
		std::memcpy(entry, &tag_wire, sizeof(tag_wire));
		std::memcpy(entry + sizeof(tag_wire), &value_wire, sizeof(value_wire));
		bytes.insert(bytes.end(), entry, entry + sizeof(entry));
	}
	const uint64_t gpa = write_buffer(bytes.data(), bytes.size());
	return post(VB_QUEUE_STATS, {{gpa, static_cast<uint32_t>(bytes.size())}});
}

void TestGuest::collect(vb_queue_kind kind)
{
	uint32_t len = 0;
	while (void* token = ring(kind).get_used(&len))
		completed_[kind][token] = len;
}

bool TestGuest::wait_for(vb_queue_kind kind, void* token, uint32_t* len,
			 std::chrono::milliseconds timeout)
{
	const auto deadline = std::chrono::steady_clock::now() + timeout;
	DriverRing& queue = ring(kind);
	for (;;) {
		collect(kind);
		if (const auto found = completed_[kind].find(token);
		    found != completed_[kind].end()) {
			if (len != nullptr)
				*len = found->second;
			completed_[kind].erase(found);
			return true;
		}
		if (queue.broken())
			return false;
		// Entries that raced in while interrupts were being enabled are seen here.
		if (!queue.enable_interrupts())
			continue;
		const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
			deadline - std::chrono::steady_clock::now());
		if (left.count() <= 0 || transport_.wait_for_interrupt(index(kind), left) == 0) {
			collect(kind);
			if (completed_[kind].count(token) == 0)
				return false;
		}
	}
}

bool TestGuest::send_pfns(vb_queue_kind kind, const std::vector<uint32_t>& pfns)
{
	return wait_for(kind, post_pfns(kind, pfns));
}

std::vector<std::pair<uint64_t, uint64_t>> TestGuest::ring_areas() const
{
	std::vector<std::pair<uint64_t, uint64_t>> ranges = indirect_areas_;
	for (const auto& queue : rings_) {
		if (!queue)
			continue;
		const QueueAreas& areas = queue->layout().areas();
		const uint16_t size = queue->size();
		ranges.emplace_back(areas.desc_gpa, areas.desc_gpa + vb_vring_desc_bytes(size));
		ranges.emplace_back(areas.avail_gpa, areas.avail_gpa + vb_vring_avail_bytes(size));
		ranges.emplace_back(areas.used_gpa, areas.used_gpa + vb_vring_used_bytes(size));
	}
	return ranges;
}

std::vector<uint32_t> TestGuest::pfn_range(uint32_t first, uint32_t count)
{
	std::vector<uint32_t> pfns(count);
	for (uint32_t i = 0; i < count; ++i)
		pfns[i] = first + i;
	return pfns;
}

} // namespace vbsim::test
