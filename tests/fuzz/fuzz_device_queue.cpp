// SPDX-License-Identifier: GPL-2.0
//
// fuzz_device_queue: a hostile driver against the host side. The fuzzer's bytes are a
// program for a driver that writes whatever it likes into guest RAM (descriptor tables,
// avail rings and indices, indirect tables, PFN arrays, chunk descriptors, bitmaps, stats
// buffers) and pokes the device's registers in any order. Two harnesses share the input,
// chosen by its first byte:
//
//  even  the ring alone: one DeviceQueue on a small RAM, no threads. Every pop is checked
//        against a reference model of the split-ring rules written here from the spec
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
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "balloon/balloon_device.h"
#include "fuzz_input.h"
#include "memory/guest_memory.h"
#include "transport/transport.h"
#include "vballoon/spec/virtio_balloon.h"
#include "vballoon/spec/virtio_ring.h"
#include "virtqueue/device_queue.h"
#include "virtqueue/ring_layout.h"

namespace
{

using vbfuzz::FuzzInput;
using vbsim::BalloonDevice;
using vbsim::DescriptorChain;
using vbsim::DeviceQueue;
using vbsim::GuestMemory;
using vbsim::QueueAreas;
using vbsim::RingLayout;
using vbsim::ChainBuffer;

constexpr size_t kMaxOps = 512;

// ---- Helpers shared by both harnesses --------------------------------------------------------

// Raw writes of a hostile driver: anything inside RAM, silently nothing outside it.
void poke(GuestMemory& memory, uint64_t gpa, const void* src, uint64_t len)
{
	(void)memory.write(gpa, src, len);
}

void poke_le16(GuestMemory& memory, uint64_t gpa, uint16_t value)
{
	(void)memory.write_le(gpa, value);
}

void poke_descriptor(GuestMemory& memory, uint64_t gpa, uint64_t addr, uint32_t len, uint16_t flags,
		     uint16_t next)
{
	(void)(memory.write_le(gpa, addr) && memory.write_le(gpa + 8, len) &&
	       memory.write_le(gpa + 12, flags) && memory.write_le(gpa + 14, next));
}

uint16_t peek_le16(const GuestMemory& memory, uint64_t gpa)
{
	uint16_t value = 0;
	FUZZ_CHECK(memory.read_le(gpa, &value), "harness read outside RAM at %#llx",
		   (unsigned long long)gpa);
	return value;
}

// Whether [addr, addr + len) lies in RAM of `ram` bytes, computed without overflow.
bool inside(uint64_t addr, uint64_t len, uint64_t ram)
{
	return static_cast<unsigned __int128>(addr) + len <= ram;
}

bool ranges_overlap(uint64_t a, uint64_t a_len, uint64_t b, uint64_t b_len)
{
	return static_cast<unsigned __int128>(a) < static_cast<unsigned __int128>(b) + b_len &&
	       static_cast<unsigned __int128>(b) < static_cast<unsigned __int128>(a) + a_len;
}

// Descriptor fields biased towards what the ring's checks look at.
uint16_t fuzz_flags(FuzzInput& in)
{
	uint8_t how = in.u8();
	uint16_t flags =
		how & (VB_VRING_DESC_F_NEXT | VB_VRING_DESC_F_WRITE | VB_VRING_DESC_F_INDIRECT);
	if (how & 0x80)
		flags |= static_cast<uint16_t>(in.u16() & ~7u); // undefined bits: ignored
	return flags;
}

uint32_t fuzz_len(FuzzInput& in, uint64_t ram)
{
	uint8_t how = in.u8();
	switch (how & 3) {
	case 0:
		return in.u8();
	case 1:
		return static_cast<uint32_t>(in.near(ram));
	case 2:
		return UINT32_MAX - in.u8();
	default:
		return in.u32();
	}
}

// ---- Harness 1: DeviceQueue against a reference model ----------------------------------------

constexpr uint64_t kRingRamBytes = 64 * 1024;

// What the spec (and device-sim/README.md) says a chain must be, checked independently of
// DeviceQueue: returns the chain's segments, or nothing when the device must refuse it.
struct ReferenceChain {
	std::vector<ChainBuffer> readable;
	std::vector<ChainBuffer> writable;
};

class ReferenceRing
{
public:
	ReferenceRing(const GuestMemory& memory, const RingLayout& layout, bool indirect)
	    : memory_(memory), layout_(layout), indirect_(indirect)
	{
	}

	std::optional<ReferenceChain> walk(uint16_t head) const
	{
		ReferenceChain chain;
		std::vector<bool> seen(layout_.size(), false);
		bool writable_seen = false;
		uint64_t bytes = 0;
		uint16_t index = head;
		for (;;) {
			if (index >= layout_.size() || seen[index])
				return std::nullopt;
			seen[index] = true;
			const vb_vring_desc desc = read(layout_.descriptor(index));
			if (desc.flags & VB_VRING_DESC_F_INDIRECT) {
				if (!indirect_ || (desc.flags & VB_VRING_DESC_F_NEXT) ||
				    index != head)
					return std::nullopt;
				return walk_table(desc, chain);
			}
			if (!add(desc, chain, writable_seen, bytes))
				return std::nullopt;
			if (!(desc.flags & VB_VRING_DESC_F_NEXT))
				return chain;
			index = desc.next;
		}
	}

private:
	std::optional<ReferenceChain> walk_table(const vb_vring_desc& table,
						 ReferenceChain& chain) const
	{
		if (table.len == 0 || table.len % 16 != 0 || table.len / 16 > layout_.size() ||
		    !inside(table.addr, table.len, memory_.size()))
			return std::nullopt;
		const uint32_t entries = table.len / 16;
		std::vector<bool> seen(entries, false);
		bool writable_seen = false;
		uint64_t bytes = 0;
		uint32_t index = 0;
		for (;;) {
			if (index >= entries || seen[index])
				return std::nullopt;
			seen[index] = true;
			const vb_vring_desc desc = read(table.addr + 16ull * index);
			if (desc.flags & VB_VRING_DESC_F_INDIRECT)
				return std::nullopt;
			if (!add(desc, chain, writable_seen, bytes))
				return std::nullopt;
			if (!(desc.flags & VB_VRING_DESC_F_NEXT))
				return chain;
			index = desc.next;
		}
	}

	bool add(const vb_vring_desc& desc, ReferenceChain& chain, bool& writable_seen,
		 uint64_t& bytes) const
	{
		if (!inside(desc.addr, desc.len, memory_.size()))
			return false;
		const bool writable = desc.flags & VB_VRING_DESC_F_WRITE;
		if (!writable && writable_seen)
			return false;
		writable_seen |= writable;
		(writable ? chain.writable : chain.readable).push_back({desc.addr, desc.len});
		bytes += desc.len;
		return bytes <= UINT32_MAX;
	}

	vb_vring_desc read(uint64_t gpa) const
	{
		vb_vring_desc desc;
		FUZZ_CHECK(memory_.read(gpa, &desc, sizeof(desc)), "reference read outside RAM");
		return desc; // little-endian host
	}

	const GuestMemory& memory_;
	const RingLayout& layout_;
	const bool indirect_;
};

bool same_segments(const std::vector<ChainBuffer>& a, const std::vector<ChainBuffer>& b)
{
	if (a.size() != b.size())
		return false;
	for (size_t i = 0; i < a.size(); i++)
		if (a[i].phys_addr != b[i].phys_addr || a[i].len != b[i].len)
			return false;
	return true;
}

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

// ---- Harness 2: the whole BalloonDevice through its transport ----------------------------------

using namespace std::chrono_literals;

// Only a hung device thread waits this long.
constexpr auto kSettleTimeout = 10s;
// Guest RAM as a sane driver lays it out: each queue's rings in a 16 KiB slot, then a
// buffer area, then the pages a balloon would hand over.
constexpr uint64_t kRingSlotBytes = 16 * 1024;
constexpr uint64_t kBufferAreaStart = 96 * 1024;
constexpr uint64_t kDriverAreaBytes = 128 * 1024;

struct DriverQueue {
	bool set_up = false;
	uint16_t size = 0;
	QueueAreas areas;
	uint16_t avail_idx = 0;
};

class DeviceHarness
{
public:
	DeviceHarness(FuzzInput& in, uint64_t ram_bytes, vbsim::BalloonDeviceOptions options)
	    : in_(in), memory_({.size_bytes = ram_bytes}), ram_pages_(ram_bytes / 4096),
	      device_(memory_, std::move(options)), transport_(device_.transport())
	{
	}

	void run()
	{
		// Every page a balloon could take carries a tag; see check_untouched().
		tags_.assign(ram_pages_, 0);
		for (uint64_t pfn = kCheckedFirstPfn; pfn < ram_pages_; pfn++) {
			tags_[pfn] = pfn * 0x9e3779b97f4a7c15ull | 1;
			FUZZ_CHECK(memory_.write_le(pfn * 4096, tags_[pfn]), "tagging page %llu",
				   (unsigned long long)pfn);
		}
		exposed_.assign(ram_pages_, false);
		owned_.assign(ram_pages_, false);
		initialise();
		for (size_t op = 0; op < kMaxOps && !in_.empty(); op++) {
			step();
			check();
		}
		// A reset gives every page back to the guest.
		transport_.set_status(0);
		settle();
		check();
		FUZZ_CHECK(device_.host_owned_pages() == 0,
			   "%llu pages still host-owned after a reset",
			   (unsigned long long)device_.host_owned_pages());
	}

private:
	static constexpr uint64_t kCheckedFirstPfn = kDriverAreaBytes / 4096;

	// The hostile driver's writes, with the bookkeeping check_untouched() needs.
	void driver_write(uint64_t gpa, const void* src, uint64_t len)
	{
		poke(memory_, gpa, src, len);
		retag(gpa, len);
	}
	void driver_le16(uint64_t gpa, uint16_t value)
	{
		poke_le16(memory_, gpa, value);
		retag(gpa, 2);
	}
	void driver_descriptor(uint64_t gpa, uint64_t addr, uint32_t len, uint16_t flags,
			       uint16_t next)
	{
		poke_descriptor(memory_, gpa, addr, len, flags, next);
		retag(gpa, 16);
	}
	void retag(uint64_t gpa, uint64_t len)
	{
		if (!len || gpa >= memory_.size())
			return;
		const uint64_t end = std::min<uint64_t>(
			memory_.size(), gpa + std::min<uint64_t>(len, memory_.size()));
		for (uint64_t pfn = gpa / 4096; pfn * 4096 < end; pfn++)
			if (pfn >= kCheckedFirstPfn)
				FUZZ_CHECK(memory_.read_le(pfn * 4096, &tags_[pfn]), "tag read");
	}
	void expose(const QueueAreas& areas, uint16_t size)
	{
		const uint64_t begin = areas.used_gpa,
			       end = areas.used_gpa + vb_vring_used_bytes(size);
		for (uint64_t pfn = begin / 4096; pfn * 4096 < end && pfn < ram_pages_; pfn++)
			exposed_[pfn] = true;
	}

	// The device changes no page it does not hold. Pages start tagged; the harness retags
	// what it writes itself; a page the host held at the last check or holds now may have
	// been discarded or poisoned, and is retagged. Every other page must still carry its
	// tag. The device's other writes are the used rings (exposed pages) and, only with
	// VB_F_X_INIT_ON_INFLATE, bitmaps in any buffer a descriptor marks writable: inputs
	// that negotiate it are not checked. Nor is a window in which the host took more pages
	// than it newly holds (a page taken and given back between two checks, e.g. by a
	// reset's activation pass replaying old chains): which page that was is unknown.
	__attribute__((no_sanitize("coverage"))) void check_untouched()
	{
		uint64_t newly_owned = 0;
		for (uint64_t pfn = 0; pfn < ram_pages_; pfn++)
			newly_owned += device_.host_owns(pfn) && !owned_[pfn];
		const uint64_t taken = device_.counters().pages_inflated.load();
		const bool transient = taken - taken_at_last_check_ != newly_owned;
		taken_at_last_check_ = taken;
		uint64_t owned_count = 0;
		for (uint64_t pfn = 0; pfn < ram_pages_; pfn++) {
			const bool owned = device_.host_owns(pfn);
			owned_count += owned;
			if (pfn < kCheckedFirstPfn || exposed_[pfn])
				continue;
			uint64_t tag = 0;
			FUZZ_CHECK(memory_.read_le(pfn * 4096, &tag), "tag read");
			if (owned != owned_[pfn])
				FUZZ_TRACE("  page %llu: %s\n", (unsigned long long)pfn,
					   owned ? "host-owned" : "given back");
			if (owned || owned_[pfn] || bitmaps_possible_ || transient)
				tags_[pfn] = tag;
			else
				FUZZ_CHECK(tag == tags_[pfn],
					   "page %llu changed (%#llx, was %#llx) while the "
					   "host never held it",
					   (unsigned long long)pfn, (unsigned long long)tag,
					   (unsigned long long)tags_[pfn]);
			owned_[pfn] = owned;
		}
		FUZZ_CHECK(owned_count == device_.host_owned_pages(),
			   "ownership bitmap holds %llu pages, the count says %llu",
			   (unsigned long long)owned_count,
			   (unsigned long long)device_.host_owned_pages());
	}

	void initialise()
	{
		const uint64_t wanted = in_.u64();
		const bool sane_layout = in_.u8() < 0xe0;
		transport_.set_status(0);
		transport_.set_status(VB_STATUS_ACKNOWLEDGE);
		transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER);
		uint64_t features = transport_.device_features() & wanted;
		if (in_.u8() != 0x5a) // mostly a modern driver
			features |= VB_FEATURE(VB_F_VERSION_1);
		(void)transport_.set_driver_features(features);
		transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER |
				      VB_STATUS_FEATURES_OK);
		features_ = features;
		for (auto& queue : queues_)
			queue = {};
		for (unsigned index = 0; index < transport_.queue_count() && index < queues_.size();
		     index++) {
			uint16_t max = transport_.queue_max_size(index);
			uint16_t size = static_cast<uint16_t>(1u << (in_.u8() % 9));
			if (max && size > max && in_.boolean())
				size = max;
			QueueAreas areas;
			if (sane_layout) {
				areas = vbsim::contiguous_queue_areas(kRingSlotBytes * index, size);
			} else {
				areas.desc_gpa = in_.near(memory_.size()) & ~uint64_t{15};
				areas.avail_gpa = in_.near(memory_.size()) & ~uint64_t{1};
				areas.used_gpa = in_.near(memory_.size()) & ~uint64_t{3};
			}
			const vbsim::QueueSetupError error =
				transport_.setup_queue(index, size, areas);
			FUZZ_TRACE("queue %u: size %u, desc %#llx avail %#llx used %#llx: %s\n",
				   index, size, (unsigned long long)areas.desc_gpa,
				   (unsigned long long)areas.avail_gpa,
				   (unsigned long long)areas.used_gpa,
				   error == vbsim::QueueSetupError::kNone ? "set up" : "refused");
			if (error == vbsim::QueueSetupError::kNone) {
				queues_[index] = {true, size, areas, 0};
				expose(areas, size);
			}
		}
		// poison_val, as a driver with PAGE_POISON writes it before DRIVER_OK.
		if (in_.boolean()) {
			const uint8_t byte = in_.u8();
			(void)transport_.config_write32(VB_CONFIG_POISON_VAL_OFFSET,
							in_.boolean() ? 0x01010101u * byte
								      : in_.u32());
		}
		transport_.set_status(VB_STATUS_ACKNOWLEDGE | VB_STATUS_DRIVER |
				      VB_STATUS_FEATURES_OK | VB_STATUS_DRIVER_OK);
		FUZZ_TRACE("features %#llx, status %#x\n", (unsigned long long)features,
			   transport_.status());
		bitmaps_possible_ |= (features & VB_FEATURE(VB_F_X_INIT_ON_INFLATE)) != 0;
		if (transport_.status() & VB_STATUS_DRIVER_OK)
			FUZZ_CHECK(transport_.wait_until([this] { return transport_.activated(); },
							 kSettleTimeout),
				   "the device never activated");
	}

	// The index of the queue an op works on: mostly one that exists.
	unsigned pick_queue()
	{
		unsigned count = transport_.queue_count();
		uint8_t pick = in_.u8();
		return pick == 0xff ? in_.u8() : pick % (count ? count : 1);
	}

	DriverQueue* driver_queue(unsigned index)
	{
		return index < queues_.size() && queues_[index].set_up ? &queues_[index] : nullptr;
	}

	uint64_t buffer_gpa()
	{
		// Mostly in the buffer area above the rings, sometimes anywhere at all.
		if (in_.u8() < 0xf0)
			return kBufferAreaStart +
			       (in_.u16() * 8ull) % (kDriverAreaBytes - kBufferAreaStart);
		return in_.near(memory_.size());
	}

	uint32_t pfn()
	{
		switch (in_.u8() & 7) {
		case 0:
			return in_.u32();
		case 1:
			return static_cast<uint32_t>(ram_pages_ + in_.u8()); // just outside RAM
		case 2:
			return static_cast<uint32_t>(ram_pages_ - 1 - in_.below(4));
		default:
			// The pages above the driver area, where a real balloon's pages would be.
			return static_cast<uint32_t>(
				kDriverAreaBytes / 4096 +
				in_.below(static_cast<uint32_t>(ram_pages_ -
								kDriverAreaBytes / 4096)));
		}
	}

	void offer(unsigned index, uint16_t head)
	{
		DriverQueue* queue = driver_queue(index);
		if (!queue)
			return;
		RingLayout layout(queue->areas, queue->size);
		driver_le16(layout.avail_slot(queue->avail_idx), head);
		queue->avail_idx++;
		driver_le16(layout.avail_idx(), queue->avail_idx);
	}

	void set_descriptor(unsigned index, uint16_t desc, uint64_t addr, uint32_t len,
			    uint16_t flags, uint16_t next)
	{
		DriverQueue* queue = driver_queue(index);
		if (!queue)
			return;
		RingLayout layout(queue->areas, queue->size);
		driver_descriptor(layout.descriptor(desc % queue->size), addr, len, flags, next);
	}

	// A whole request in one op: payload, descriptors, avail entry, and (mostly) a kick.
	void post_request(unsigned index)
	{
		DriverQueue* queue = driver_queue(index);
		if (!queue)
			return;
		const uint16_t head = static_cast<uint16_t>(in_.below(queue->size));
		const unsigned pieces = in_.u8() % 4 + 1; // descriptors carrying the PFN array
		const uint32_t count = in_.u8() % 80 + 1;
		std::vector<uint32_t> pfns(count);
		for (uint32_t& value : pfns)
			value = pfn();
		const uint64_t gpa = buffer_gpa();
		driver_write(gpa, pfns.data(), pfns.size() * 4);
		FUZZ_TRACE("  request on queue %u, head %u, %u pieces, PFN array at %#llx:", index,
			   head, pieces, (unsigned long long)gpa);
		for (uint32_t value : pfns)
			FUZZ_TRACE(" %u", value);
		FUZZ_TRACE("\n");
		uint32_t bytes = count * 4;
		if (in_.u8() == 0x77)
			bytes = fuzz_len(in_, memory_.size());
		const bool bitmap = in_.boolean();
		uint16_t desc = head;
		uint32_t offset = 0;
		for (unsigned i = 0; i < pieces; i++) {
			uint32_t piece = i + 1 == pieces ? bytes - offset : (bytes - offset) / 2;
			uint16_t next = static_cast<uint16_t>((desc + 1) % queue->size);
			bool more = i + 1 < pieces || bitmap;
			set_descriptor(index, desc, gpa + offset, piece,
				       more ? VB_VRING_DESC_F_NEXT : 0, next);
			offset += piece;
			desc = next;
		}
		if (bitmap) {
			const uint64_t bitmap_gpa = buffer_gpa();
			const uint32_t bitmap_len = in_.u8() % 64;
			set_descriptor(index, desc, bitmap_gpa, bitmap_len, VB_VRING_DESC_F_WRITE,
				       0);
		}
		offer(index, head);
		if (in_.u8() < 0xe0)
			kick(index);
	}

	// VB_F_X_CHUNKED: each readable descriptor is a range of pages, then maybe a bitmap.
	void post_chunks(unsigned index)
	{
		DriverQueue* queue = driver_queue(index);
		if (!queue)
			return;
		const uint16_t head = static_cast<uint16_t>(in_.below(queue->size));
		const unsigned chunks = in_.u8() % 6 + 1;
		const bool bitmap = in_.boolean();
		uint16_t desc = head;
		for (unsigned i = 0; i < chunks; i++) {
			uint64_t first = pfn();
			uint32_t pages = in_.u8() % 40 + 1;
			uint64_t addr = first * 4096;
			uint32_t len = pages * 4096;
			if (in_.u8() == 0x33) { // misaligned, or any length at all
				addr += in_.u16();
				len = fuzz_len(in_, memory_.size());
			}
			uint16_t next = static_cast<uint16_t>((desc + 1) % queue->size);
			bool more = i + 1 < chunks || bitmap;
			set_descriptor(index, desc, addr, len, more ? VB_VRING_DESC_F_NEXT : 0,
				       next);
			desc = next;
		}
		if (bitmap) {
			const uint64_t bitmap_gpa = buffer_gpa();
			const uint32_t bitmap_len = in_.u8() % 8;
			set_descriptor(index, desc, bitmap_gpa, bitmap_len, VB_VRING_DESC_F_WRITE,
				       0);
		}
		offer(index, head);
		kick(index);
	}

	void post_indirect(unsigned index)
	{
		DriverQueue* queue = driver_queue(index);
		if (!queue)
			return;
		const uint16_t head = static_cast<uint16_t>(in_.below(queue->size));
		const uint64_t table = buffer_gpa() & ~uint64_t{15};
		const unsigned entries = in_.u8() % 6 + 1;
		for (unsigned i = 0; i < entries; i++) {
			uint64_t addr = in_.boolean() ? buffer_gpa() : pfn() * 4096ull;
			uint32_t len =
				in_.boolean() ? (in_.u8() % 16 + 1) * 4 : (in_.u8() % 8 + 1) * 4096;
			uint16_t flags = i + 1 < entries ? VB_VRING_DESC_F_NEXT : 0;
			if (in_.u8() == 0x44)
				flags = fuzz_flags(in_);
			driver_descriptor(table + 16ull * i, addr, len, flags,
					  static_cast<uint16_t>(i + 1));
		}
		uint32_t len = entries * 16;
		if (in_.u8() == 0x55)
			len = fuzz_len(in_, memory_.size());
		set_descriptor(index, head, table, len, VB_VRING_DESC_F_INDIRECT, 0);
		offer(index, head);
		kick(index);
	}

	void post_stats(unsigned index)
	{
		DriverQueue* queue = driver_queue(index);
		if (!queue)
			return;
		const uint16_t head = static_cast<uint16_t>(in_.below(queue->size));
		const uint32_t entries = in_.u8() % 20;
		const uint64_t gpa = buffer_gpa();
		for (uint32_t i = 0; i < entries; i++) {
			uint16_t tag = in_.u8() % 20;
			uint64_t value = in_.u64();
			driver_write(gpa + i * 10ull, &tag, 2);
			driver_write(gpa + i * 10ull + 2, &value, 8);
		}
		uint32_t len = entries * 10;
		if (in_.u8() == 0x66)
			len = fuzz_len(in_, memory_.size());
		set_descriptor(index, head, gpa, len, in_.u8() == 0x67 ? VB_VRING_DESC_F_WRITE : 0,
			       0);
		offer(index, head);
		kick(index);
	}

	void kick(unsigned index)
	{
		transport_.notify(index);
		if (index < transport_.queue_count())
			kicks_[index]++;
		settle();
	}

	// Waits until the device thread has handled every kick sent so far and everything
	// posted to it, so the harness reads a device that is standing still.
	void settle()
	{
		for (unsigned index = 0; index < transport_.queue_count() && index < kicks_.size();
		     index++) {
			const uint64_t sent = kicks_[index];
			FUZZ_CHECK(transport_.wait_until(
					   [&] {
						   return transport_.notification_counters(index)
								  .kicks_received.load() >= sent;
					   },
					   kSettleTimeout),
				   "the device thread never took kick %llu of queue %u",
				   (unsigned long long)sent, index);
		}
		// The loop runs one handler at a time: once this task ran, the kicks' handlers
		// (and anything posted earlier) have returned.
		auto done = std::make_shared<std::atomic<bool>>(false);
		transport_.post([done] { done->store(true); });
		FUZZ_CHECK(transport_.wait_until([&] { return done->load(); }, kSettleTimeout),
			   "the device thread hung");
	}

	void step()
	{
		const unsigned op = in_.u8() % 16;
		FUZZ_TRACE("op %u\n", op);
		switch (op) {
		case 0: { // a raw descriptor
			unsigned index = pick_queue();
			uint16_t desc = in_.u16();
			uint64_t addr = in_.boolean() ? buffer_gpa() : in_.near(memory_.size());
			uint32_t len = fuzz_len(in_, memory_.size());
			uint16_t flags = fuzz_flags(in_);
			uint16_t next = in_.u16();
			set_descriptor(index, desc, addr, len, flags, next);
			break;
		}
		case 1: { // a raw avail entry
			unsigned index = pick_queue();
			offer(index, in_.u8() & 0x80 ? in_.u16() : in_.u8());
			break;
		}
		case 2: { // a raw avail idx
			unsigned index = pick_queue();
			if (DriverQueue* queue = driver_queue(index)) {
				queue->avail_idx = in_.boolean()
							   ? in_.u16()
							   : static_cast<uint16_t>(
								     queue->avail_idx + in_.u8());
				driver_le16(RingLayout(queue->areas, queue->size).avail_idx(),
					    queue->avail_idx);
			}
			break;
		}
		case 3:
		case 4:
			post_request(pick_queue());
			break;
		case 5:
			post_chunks(pick_queue());
			break;
		case 6:
			post_indirect(pick_queue());
			break;
		case 7:
			post_stats(pick_queue());
			break;
		case 8: // a kick, maybe of a queue that does not exist
			kick(pick_queue());
			break;
		case 9: { // scribble anywhere
			uint8_t bytes[32];
			uint64_t gpa = in_.near(memory_.size());
			size_t len = in_.u8() % sizeof(bytes);
			in_.bytes(bytes, len);
			driver_write(gpa, bytes, len);
			break;
		}
		case 10: // the host changes its mind
			device_.set_target_pages(in_.u8() & 1 ? in_.u32() : in_.u16());
			break;
		case 11:
			device_.request_stats();
			settle();
			break;
		case 12:
			if (in_.boolean())
				device_.hold_deflate_acks();
			else
				device_.release_deflate_acks();
			settle();
			break;
		case 13: { // config space, both directions
			const uint8_t how = in_.u8();
			const uint32_t offset = how & 0x80 ? in_.u8() % 24 : (how % 6) * 4;
			if (how & 0x40) {
				uint32_t value = in_.u32();
				uint32_t len = how & 0x20 ? in_.u8() % 6 : 4;
				(void)transport_.config_write(offset, &value, len);
			} else {
				(void)transport_.config_read32(offset);
			}
			break;
		}
		case 14: { // register writes in any order: status (0 resets), features, queues
			const uint8_t how = in_.u8();
			if (how % 3 == 0) {
				transport_.set_status(in_.u8());
			} else if (how % 3 == 1) {
				(void)transport_.set_driver_features(in_.u64());
			} else {
				const unsigned index = in_.u8() % 8;
				const uint16_t size = in_.u16();
				QueueAreas areas;
				areas.desc_gpa = in_.near(memory_.size());
				areas.avail_gpa = in_.near(memory_.size());
				areas.used_gpa = in_.near(memory_.size());
				if (transport_.setup_queue(index, size, areas) ==
					    vbsim::QueueSetupError::kNone &&
				    index < queues_.size()) {
					queues_[index] = {true, size, areas, 0};
					expose(areas, size);
				}
			}
			settle();
			break;
		}
		default: // a reset and a new driver
			settle();
			initialise();
			settle();
			break;
		}
	}

	void check()
	{
		check_untouched();
		const vbsim::BalloonDeviceCounters& counters = device_.counters();
		const uint64_t owned = device_.host_owned_pages();
		const uint64_t inflated = counters.pages_inflated.load();
		const uint64_t deflated = counters.pages_deflated.load();
		const uint64_t released = counters.pages_released_by_reset.load();
		FUZZ_CHECK(
			owned == inflated - deflated - released,
			"host owns %llu pages, but inflated %llu - deflated %llu - released %llu",
			(unsigned long long)owned, (unsigned long long)inflated,
			(unsigned long long)deflated, (unsigned long long)released);
		FUZZ_CHECK(owned <= ram_pages_, "host owns %llu of %llu pages",
			   (unsigned long long)owned, (unsigned long long)ram_pages_);
		const vbsim::GuestStats stats = device_.last_stats();
		FUZZ_CHECK((stats.present_mask >> VB_S_NR) == 0,
			   "stats tag %#x beyond the known tags", stats.present_mask);
		bool any_broken = false;
		for (unsigned index = 0; index < transport_.queue_count(); index++) {
			DeviceQueue* queue = transport_.queue(index);
			if (!queue)
				continue;
			any_broken |= queue->broken();
			FUZZ_CHECK(queue->in_flight() <= queue->size(),
				   "queue %u holds %u of %u chains", index, queue->in_flight(),
				   queue->size());
		}
		if (any_broken)
			FUZZ_CHECK(transport_.status() & VB_STATUS_NEEDS_RESET,
				   "a broken queue without NEEDS_RESET (status %#x)",
				   transport_.status());
		const int deflate_index =
			vb_queue_index(transport_.negotiated_features(), VB_QUEUE_DEFLATE);
		if (DeviceQueue* deflateq =
			    deflate_index >= 0
				    ? transport_.queue(static_cast<unsigned>(deflate_index))
				    : nullptr)
			FUZZ_CHECK(device_.held_deflate_acks() <= deflateq->in_flight(),
				   "%zu deflate acks held, %u chains in flight",
				   device_.held_deflate_acks(), deflateq->in_flight());
	}

	FuzzInput& in_;
	GuestMemory memory_;
	const uint64_t ram_pages_;
	BalloonDevice device_;
	vbsim::Transport& transport_;
	uint64_t features_ = 0;
	std::array<DriverQueue, 8> queues_{};
	std::array<uint64_t, 8> kicks_{};
	std::vector<uint64_t> tags_;
	std::vector<bool> exposed_; // pages of a used ring: the device writes there
	std::vector<bool> owned_;   // host-owned at the last check
	bool bitmaps_possible_ = false;
	uint64_t taken_at_last_check_ = 0;
};

void run_device(FuzzInput& in)
{
	static constexpr uint64_t kRamChoices[] = {256 * 1024, 1024 * 1024, 2 * 1024 * 1024 + 4096,
						   4 * 1024 * 1024};
	static constexpr uint64_t kHostPageChoices[] = {4096, 8192, 64 * 1024, 2 * 1024 * 1024};
	const uint64_t ram = kRamChoices[in.u8() % 4];

	vbsim::BalloonDeviceOptions options;
	const uint8_t profile = in.u8();
	const uint64_t extra = in.u64();
	switch (profile % 4) {
	case 0:
		options.profile = vbsim::qemu_7_2_profile(
			extra & vbsim::qemu_7_2_profile().optional_features);
		break;
	case 1:
		options.profile = vbsim::firecracker_profile(
			extra & vbsim::firecracker_profile().optional_features);
		break;
	case 2:
		options.profile = vbsim::cloud_hypervisor_profile(
			extra & vbsim::cloud_hypervisor_profile().optional_features);
		break;
	default:
		options.profile = vbsim::full_profile();
		break;
	}
	// The experimental extensions, as the system tests offer them.
	options.profile.offered_features |=
		extra & (VB_FEATURE(VB_F_X_CHUNKED) | VB_FEATURE(VB_F_X_INIT_ON_INFLATE));
	if (profile & 0x10)
		options.profile.max_pfn_bytes_per_request = (in.u16() % 512 + 1) * 4;
	options.discard_mode =
		in.boolean() ? vbsim::DiscardMode::kPerPage : vbsim::DiscardMode::kMergeRuns;
	options.require_must_tell_host = in.boolean();
	options.initial_target_pages = in.u32();
	options.host_page_bytes = kHostPageChoices[in.u8() % 4];

	DeviceHarness harness(in, ram, std::move(options));
	harness.run();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
{
	FuzzInput in(data, size);
	if (in.u8() % 2 == 0) {
		RingHarness harness(in);
		harness.run();
	} else {
		run_device(in);
	}
	return 0;
}
