// SPDX-License-Identifier: GPL-2.0
//
// fuzz_device_queue, even first byte: the ring alone. One DeviceQueue on a small RAM, no
// threads. Every pop is checked against the reference model (reference_ring.h): which avail
// entry is consumed, whether the chain is valid, its exact segments; and RAM is compared
// before and after each device call: the device writes nothing but the used ring.
#include <cstdint>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "device_queue_harnesses.h"
#include "fuzz_input.h"
#include "hostile_driver.h"
#include "memory/guest_memory.h"
#include "reference_ring.h"
#include "vballoon/spec/virtio_ring.h"
#include "virtqueue/device_queue.h"
#include "virtqueue/ring_layout.h"

namespace vbfuzz
{

namespace
{

using vbsim::ChainBuffer;
using vbsim::DescriptorChain;
using vbsim::DeviceQueue;
using vbsim::GuestMemory;
using vbsim::QueueAreas;
using vbsim::RingLayout;

constexpr uint64_t kRingRamBytes = 64 * 1024;

class RingHarness
{
public:
	explicit RingHarness(FuzzInput& in) : in_(in), memory_({.size_bytes = kRingRamBytes}) {}

	void run()
	{
		const uint16_t size = static_cast<uint16_t>(1u << (in_.u8() % 9)); // 1..256
		DeviceQueue::Config config;
		config.size = size;
		config.event_idx = in_.boolean();
		config.indirect_desc = in_.boolean();
		if (in_.boolean()) {
			// Anywhere the driver likes, areas may overlap each other.
			config.areas.desc_gpa = in_.near(kRingRamBytes) & ~uint64_t{15};
			config.areas.avail_gpa = in_.near(kRingRamBytes) & ~uint64_t{1};
			config.areas.used_gpa = in_.near(kRingRamBytes) & ~uint64_t{3};
			if (in_.u8() == 0xa5) // and now and then misaligned
				config.areas.used_gpa |= 2;
		} else {
			config.areas = vbsim::contiguous_queue_areas(in_.u16() & 0x7ff0, size);
		}
		const bool valid = areas_valid(config.areas, size);
		FUZZ_CHECK(valid == (vbsim::check_queue_areas(memory_, config.areas, size) ==
				     vbsim::QueueAreaError::kNone),
			   "check_queue_areas disagrees with the spec's sizes and alignments (and "
			   "the used ring kept clear of the other two)");
		if (!valid) {
			bool threw = false;
			try {
				DeviceQueue refused(memory_, config, counters_);
			} catch (const std::invalid_argument&) {
				threw = true;
			}
			FUZZ_CHECK(threw, "a DeviceQueue was built on unchecked areas");
			return;
		}
		layout_.emplace(config.areas, size);
		used_begin_ = config.areas.used_gpa;
		used_end_ = config.areas.used_gpa + vb_vring_used_bytes(size);
		queue_.emplace(memory_, config, counters_);
		ReferenceRing reference(memory_, *layout_, config.indirect_desc);
		held_.assign(size, false);

		for (size_t op = 0; op < kMaxOps && !in_.empty(); op++)
			step(reference);
		// Everything held goes back; the ring must still be coherent.
		for (uint16_t head = 0; head < size; head++)
			if (held_[head])
				push(head, 0);
		FUZZ_CHECK(queue_->in_flight() == 0, "in_flight %u after returning every chain",
			   queue_->in_flight());
	}

private:
	// The spec's sizes and alignments (2.7), and the used ring (which the device writes)
	// kept clear of what it reads, so its own stores never become new work.
	bool areas_valid(const QueueAreas& areas, uint16_t size) const
	{
		const uint64_t used_bytes = 6 + 8ull * size;
		return areas.desc_gpa % 16 == 0 && areas.avail_gpa % 2 == 0 &&
		       areas.used_gpa % 4 == 0 &&
		       inside(areas.desc_gpa, 16ull * size, kRingRamBytes) &&
		       inside(areas.avail_gpa, 6 + 2ull * size, kRingRamBytes) &&
		       inside(areas.used_gpa, used_bytes, kRingRamBytes) &&
		       !ranges_overlap(areas.used_gpa, used_bytes, areas.avail_gpa,
				       6 + 2ull * size) &&
		       !ranges_overlap(areas.used_gpa, used_bytes, areas.desc_gpa, 16ull * size);
	}

	void step(const ReferenceRing& reference)
	{
		const RingLayout& layout = *layout_;
		const uint16_t size = layout.size();
		switch (in_.u8() % 10) {
		case 0: // a descriptor of the ring
		case 1: {
			uint16_t index = static_cast<uint16_t>(in_.below(size));
			uint64_t addr = in_.near(kRingRamBytes);
			uint32_t len = fuzz_len(in_, kRingRamBytes);
			uint16_t flags = fuzz_flags(in_);
			uint16_t next = in_.u8() & 0x80
						? in_.u16()
						: static_cast<uint16_t>(in_.below(size + 1));
			poke_descriptor(memory_, layout.descriptor(index), addr, len, flags, next);
			break;
		}
		case 2: { // a descriptor anywhere (indirect tables)
			uint64_t gpa = in_.near(kRingRamBytes) & ~uint64_t{15};
			uint64_t addr = in_.near(kRingRamBytes);
			uint32_t len = fuzz_len(in_, kRingRamBytes);
			uint16_t flags = fuzz_flags(in_);
			uint16_t next = static_cast<uint16_t>(in_.below(size + 2));
			poke_descriptor(memory_, gpa, addr, len, flags, next);
			break;
		}
		case 3: { // offer a head
			uint16_t head = in_.u8() & 0x80
						? in_.u16()
						: static_cast<uint16_t>(in_.below(size + 1));
			poke_le16(memory_, layout.avail_slot(avail_idx_), head);
			avail_idx_++;
			poke_le16(memory_, layout.avail_idx(), avail_idx_);
			break;
		}
		case 4: // any avail index at all
			avail_idx_ = in_.boolean() ? in_.u16()
						   : static_cast<uint16_t>(avail_idx_ + in_.u8());
			poke_le16(memory_, layout.avail_idx(), avail_idx_);
			break;
		case 5: { // the device pops
			unsigned pops = in_.u8() % 8 + 1;
			for (unsigned i = 0; i < pops; i++)
				pop(reference);
			break;
		}
		case 6: { // the device returns a chain it holds
			uint16_t start = static_cast<uint16_t>(in_.below(size));
			uint32_t written = in_.u32();
			for (uint16_t i = 0; i < size; i++) {
				uint16_t head = static_cast<uint16_t>((start + i) % size);
				if (held_[head]) {
					push(head, written);
					break;
				}
			}
			break;
		}
		case 7: { // scribble
			uint8_t bytes[32];
			uint64_t gpa = in_.near(kRingRamBytes);
			size_t len = in_.u8() % sizeof(bytes);
			in_.bytes(bytes, len);
			poke(memory_, gpa, bytes, len);
			break;
		}
		case 8: // the driver's side of notifications
			if (in_.boolean())
				poke_le16(memory_, layout.avail_flags(), in_.u16());
			else
				poke_le16(memory_, layout.used_event(), in_.u16());
			break;
		default: // the device's side of notifications
			device_call([&] {
				switch (in_.u8() % 3) {
				case 0:
					queue_->disable_notifications();
					break;
				case 1:
					(void)queue_->enable_notifications();
					break;
				default:
					(void)queue_->needs_interrupt();
					break;
				}
			});
			break;
		}
	}

	// Runs a device call and checks it wrote nothing in RAM outside the used ring.
	template <class F> void device_call(F&& call)
	{
		const uint8_t* ram = memory_.translate(0, kRingRamBytes);
		before_.assign(ram, ram + kRingRamBytes);
		call();
		if (std::memcmp(ram, before_.data(), used_begin_) != 0 ||
		    std::memcmp(ram + used_end_, before_.data() + used_end_,
				kRingRamBytes - used_end_) != 0)
			report_stray_write(ram);
	}

	__attribute__((no_sanitize("coverage"))) void report_stray_write(const uint8_t* ram)
	{
		for (uint64_t i = 0; i < kRingRamBytes; i++) {
			if (i >= used_begin_ && i < used_end_)
				continue;
			FUZZ_CHECK(ram[i] == before_[i],
				   "the device wrote guest RAM at %#llx, outside "
				   "the used ring [%#llx, %#llx)",
				   (unsigned long long)i, (unsigned long long)used_begin_,
				   (unsigned long long)used_end_);
		}
	}

	void push(uint16_t head, uint32_t written)
	{
		device_call([&] { queue_->push_used(head, written); });
		held_[head] = false;
		expect_used(head, written);
	}

	void expect_used(uint16_t head, uint32_t written)
	{
		const RingLayout& layout = *layout_;
		used_idx_++;
		uint32_t id = 0, len = 0;
		FUZZ_CHECK(
			memory_.read_le(layout.used_slot(static_cast<uint16_t>(used_idx_ - 1)),
					&id) &&
				memory_.read_le(
					layout.used_slot(static_cast<uint16_t>(used_idx_ - 1)) + 4,
					&len),
			"used ring outside RAM");
		FUZZ_CHECK(id == head && len == written, "used element {%u, %u}, expected {%u, %u}",
			   id, len, head, written);
		FUZZ_CHECK(peek_le16(memory_, layout.used_idx()) == used_idx_,
			   "used idx %u, expected %u", peek_le16(memory_, layout.used_idx()),
			   used_idx_);
	}

	uint64_t rejections() const
	{
		uint64_t total = 0;
		for (const auto& counter : counters_.rejected)
			total += counter.load();
		return total;
	}

	void pop(const ReferenceRing& reference)
	{
		const RingLayout& layout = *layout_;
		const uint16_t size = layout.size();
		const uint64_t rejected_before = rejections();
		const uint64_t pushed_before = counters_.used_pushed.load();

		// What must happen, decided before the device looks.
		const uint16_t avail = peek_le16(memory_, layout.avail_idx());
		const uint16_t pending = static_cast<uint16_t>(avail - last_avail_);
		enum { kEmpty, kBroken, kDropped, kChainOrReturned } expected;
		uint16_t head = 0;
		std::optional<ReferenceChain> chain_expected;
		if (broken_ || pending > size) {
			expected = kBroken;
		} else if (pending == 0) {
			expected = kEmpty;
		} else {
			head = peek_le16(memory_, layout.avail_slot(last_avail_));
			if (head >= size || held_[head]) {
				expected = kDropped;
			} else {
				expected = kChainOrReturned;
				chain_expected = reference.walk(head);
			}
		}

		DeviceQueue::PopStatus status = DeviceQueue::PopStatus::kEmpty;
		device_call([&] { status = queue_->pop(chain_); });
		FUZZ_TRACE("pop: status %d, expected %d, head %u, %zu+%zu segments\n",
			   static_cast<int>(status), static_cast<int>(expected), head,
			   chain_.readable.size(), chain_.writable.size());

		switch (expected) {
		case kBroken:
			FUZZ_CHECK(status == DeviceQueue::PopStatus::kBroken,
				   "avail idx %u moved %u past %u on a ring of %u: not broken",
				   avail, pending, last_avail_, size);
			FUZZ_CHECK(rejections() == rejected_before + (broken_ ? 0 : 1),
				   "a broken ring counted %llu rejections",
				   (unsigned long long)(rejections() - rejected_before));
			broken_ = true;
			break;
		case kEmpty:
			FUZZ_CHECK(status == DeviceQueue::PopStatus::kEmpty,
				   "pop on an empty ring: %d", static_cast<int>(status));
			break;
		case kDropped:
			FUZZ_CHECK(status == DeviceQueue::PopStatus::kRejected &&
					   rejections() == rejected_before + 1 &&
					   counters_.used_pushed.load() == pushed_before,
				   "head %u (held %d) must be dropped without a used entry", head,
				   head < size ? static_cast<int>(held_[head]) : -1);
			last_avail_++;
			break;
		case kChainOrReturned:
			last_avail_++;
			if (!chain_expected) {
				FUZZ_CHECK(
					status == DeviceQueue::PopStatus::kRejected &&
						rejections() == rejected_before + 1,
					"the device accepted chain %u, which breaks the ring rules",
					head);
				expect_used(head, 0);
				break;
			}
			FUZZ_CHECK(status == DeviceQueue::PopStatus::kChain,
				   "the device refused valid chain %u (status %d)", head,
				   static_cast<int>(status));
			FUZZ_CHECK(chain_.head == head, "popped head %u, avail said %u",
				   chain_.head, head);
			FUZZ_CHECK(same_segments(chain_.readable, chain_expected->readable) &&
					   same_segments(chain_.writable, chain_expected->writable),
				   "chain %u: segments differ from the descriptors", head);
			check_chain_inside_ram();
			held_[head] = true;
			break;
		}
		uint16_t held = 0;
		for (bool h : held_)
			held += h;
		FUZZ_CHECK(queue_->in_flight() == held, "in_flight %u, harness holds %u",
			   queue_->in_flight(), held);
		FUZZ_CHECK(queue_->broken() == broken_, "broken() %d, expected %d",
			   queue_->broken(), broken_);
	}

	void check_chain_inside_ram()
	{
		uint64_t readable = 0, writable = 0;
		// Touch every byte the device was given: a segment outside RAM hits a guard.
		for (const ChainBuffer& segment : chain_.readable) {
			FUZZ_CHECK(inside(segment.phys_addr, segment.len, kRingRamBytes),
				   "segment %#llx+%u outside RAM",
				   (unsigned long long)segment.phys_addr, segment.len);
			readable += segment.len;
		}
		for (const ChainBuffer& segment : chain_.writable) {
			FUZZ_CHECK(inside(segment.phys_addr, segment.len, kRingRamBytes),
				   "segment %#llx+%u outside RAM",
				   (unsigned long long)segment.phys_addr, segment.len);
			writable += segment.len;
		}
		FUZZ_CHECK(readable == chain_.readable_bytes && writable == chain_.writable_bytes &&
				   readable + writable <= UINT32_MAX,
			   "chain byte counts %llu/%llu, segments add up to %llu/%llu",
			   (unsigned long long)chain_.readable_bytes,
			   (unsigned long long)chain_.writable_bytes, (unsigned long long)readable,
			   (unsigned long long)writable);
		FUZZ_CHECK(chain_.readable.size() + chain_.writable.size() <= layout_->size(),
			   "chain of %zu descriptors on a ring of %u",
			   chain_.readable.size() + chain_.writable.size(), layout_->size());
		volatile uint8_t sink = 0;
		for (const ChainBuffer& segment : chain_.readable) {
			const uint8_t* p = memory_.translate(segment.phys_addr, segment.len);
			for (uint32_t i = 0; p && i < segment.len; i += 512)
				sink = sink + p[i];
			if (p && segment.len)
				sink = sink + p[segment.len - 1];
		}
		(void)sink;
	}

	FuzzInput& in_;
	GuestMemory memory_;
	vbsim::QueueCounters counters_;
	std::optional<RingLayout> layout_;
	std::optional<DeviceQueue> queue_;
	DescriptorChain chain_;
	std::vector<bool> held_;
	std::vector<uint8_t> before_;
	uint64_t used_begin_ = 0, used_end_ = 0;
	uint16_t avail_idx_ = 0;  // what the driver published last
	uint16_t last_avail_ = 0; // the model's next avail entry to consume
	uint16_t used_idx_ = 0;	  // the model's used idx
	bool broken_ = false;
};

} // namespace

void run_ring_harness(FuzzInput& in)
{
	RingHarness harness(in);
	harness.run();
}

} // namespace vbfuzz
