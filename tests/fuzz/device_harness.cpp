// SPDX-License-Identifier: GPL-2.0
//
// fuzz_device_queue, odd first byte: the whole BalloonDevice. Transport, device thread,
// payload parsing, ownership, discards, huge-page tracking, stats, the deflate gate,
// resets. After every device-side step the harness waits for the device thread to finish
// it, then checks the accounting: host-owned pages == inflated - deflated - released by
// reset, queues within bounds, a broken queue raises NEEDS_RESET.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "balloon/balloon_device.h"
#include "device_queue_harnesses.h"
#include "fuzz_input.h"
#include "hostile_driver.h"
#include "memory/guest_memory.h"
#include "transport/transport.h"
#include "vballoon/spec/virtio_balloon.h"
#include "vballoon/spec/virtio_ring.h"
#include "virtqueue/device_queue.h"
#include "virtqueue/ring_layout.h"

namespace vbfuzz
{

namespace
{

using vbsim::BalloonDevice;
using vbsim::DeviceQueue;
using vbsim::GuestMemory;
using vbsim::QueueAreas;
using vbsim::RingLayout;

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
		FUZZ_CHECK(device_.host_owned_wire_pages() == 0,
			   "%llu pages still host-owned after a reset",
			   (unsigned long long)device_.host_owned_wire_pages());
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
	// VB_F_X_INIT_ON_INFLATE or DEVICE_INIT_ON_INFLATE, bitmaps in any buffer a descriptor marks writable: inputs
	// that negotiate it are not checked. Nor is a window in which the host took more pages
	// than it newly holds (a page taken and given back between two checks, e.g. by a
	// reset's activation pass replaying old chains): which page that was is unknown.
	__attribute__((no_sanitize("coverage"))) void check_untouched()
	{
		uint64_t newly_owned = 0;
		for (uint64_t pfn = 0; pfn < ram_pages_; pfn++)
			newly_owned += device_.host_owns(pfn) && !owned_[pfn];
		const uint64_t taken = device_.counters().wire_pages_inflated.load();
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
		FUZZ_CHECK(owned_count == device_.host_owned_wire_pages(),
			   "ownership bitmap holds %llu pages, the count says %llu",
			   (unsigned long long)owned_count,
			   (unsigned long long)device_.host_owned_wire_pages());
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
		bitmaps_possible_ |= (features & (VB_FEATURE(VB_F_X_INIT_ON_INFLATE) |
						  VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE))) != 0;
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
			device_.set_target_wire_pages(in_.u8() & 1 ? in_.u32() : in_.u16());
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
		const uint64_t owned = device_.host_owned_wire_pages();
		const uint64_t inflated = counters.wire_pages_inflated.load();
		const uint64_t deflated = counters.wire_pages_deflated.load();
		const uint64_t released = counters.wire_pages_released_by_reset.load();
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

} // namespace

void run_device_harness(FuzzInput& in)
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
	// mst's DEVICE_INIT properties, and discards inhibited, from bits of the same word.
	options.device_init_on_inflate = extra & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);
	options.device_init_reported = extra & VB_FEATURE(VB_F_DEVICE_INIT_REPORTED)
					       ? vbsim::OnOffAuto::kAuto
					       : vbsim::OnOffAuto::kOff;
	options.discards_inhibited = extra & (1ull << 40);
	if (profile & 0x10)
		options.profile.max_pfn_bytes_per_request = (in.u16() % 512 + 1) * 4;
	options.discard_mode =
		in.boolean() ? vbsim::DiscardMode::kPerPage : vbsim::DiscardMode::kMergeRuns;
	options.require_must_tell_host = in.boolean();
	options.initial_target_wire_pages = in.u32();
	options.host_page_bytes = kHostPageChoices[in.u8() % 4];

	DeviceHarness harness(in, ram, std::move(options));
	harness.run();
}

} // namespace vbfuzz
