// SPDX-License-Identifier: GPL-2.0
//
// Conformance of the simulated device to the two proposals as mst's QEMU implements them:
// DEVICE_INIT_ON_INFLATE (bit 7, virtio-spec issue 242) and DEVICE_INIT_REPORTED (bit 6,
// issue 244). The first six tests are the cases of his tests/qtest/virtio-balloon-test.c,
// written anew against this device: inflate with and without device init, a 4-PFN inflate,
// a report with and without device init, the negotiation matrix of x-device-init-reported.
// The rest are the edge rules: a non-zero poison_val, discards inhibited, host pages larger
// than 4 KiB, chunks (VB_F_X_CHUNKED with bit 7), and how bit 7 differs from our bit 21.
// Every promise is checked on the memory itself: the bytes read zero and the resident size
// dropped, or the bytes are still there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

#include "balloon/balloon_device.h"
#include "memory/guest_memory.h"
#include "support/guest_bytes.h"
#include "support/test_guest.h"

namespace vbsim
{
namespace
{

using test::bytes_are;
using test::TestGuest;

constexpr uint64_t kRamBytes = 16ull << 20;
constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
constexpr uint64_t kHugePage = 2ull << 20;
constexpr uint32_t kPfn = TestGuest::kFirstFreePfn + 16;
constexpr uint64_t kWithoutPoison = ~VB_FEATURE(VB_F_PAGE_POISON);

BalloonProfile full_without(uint64_t features)
{
	BalloonProfile profile = full_profile();
	profile.offered_features &= ~features;
	return profile;
}

struct Rig {
	explicit Rig(BalloonDeviceOptions options, PageBacking backing = PageBacking::kSmallPages)
	    : memory({.size_bytes = kRamBytes, .backing = backing}),
	      device(memory, std::move(options)), guest(memory, device.transport())
	{
		EXPECT_EQ(memory.populate(0, kRamBytes), 0);
	}

	// Negotiates `wanted`, writes poison_val when it is not 0, sets DRIVER_OK.
	uint64_t start(uint64_t wanted, uint32_t poison_val = 0)
	{
		const uint64_t features = guest.negotiate(wanted);
		guest.setup_queues();
		if (poison_val) {
			EXPECT_TRUE(device.transport().config_write32(VB_CONFIG_POISON_VAL_OFFSET,
								      poison_val));
		}
		guest.driver_ok();
		return features;
	}

	// One inflate: the PFN array, then a bitmap of `bitmap_bytes` (none when 0) that starts
	// as `bitmap_fill`. Returns the used length; the bitmap's first byte in *bitmap.
	uint32_t inflate(const std::vector<uint32_t>& pfns, uint32_t bitmap_bytes, uint8_t* bitmap,
			 uint8_t bitmap_fill = 0)
	{
		std::vector<uint32_t> wire(pfns.size());
		for (size_t i = 0; i < pfns.size(); i++)
			wire[i] = to_le(pfns[i]);
		const uint64_t array = guest.write_buffer(wire.data(), wire.size() * 4);
		return send({{array, static_cast<uint32_t>(wire.size() * 4)}}, bitmap_bytes, bitmap,
			    bitmap_fill);
	}

	// One chained inflate: each range its own descriptor.
	uint32_t inflate_chunks(const std::vector<ChainBuffer>& chunks, uint32_t bitmap_bytes,
				uint8_t* bitmap, uint8_t bitmap_fill = 0)
	{
		return send(chunks, bitmap_bytes, bitmap, bitmap_fill);
	}

	// One report of device-writable ranges; returns the used length.
	uint32_t report(const std::vector<ChainBuffer>& ranges)
	{
		uint32_t len = ~0u;
		EXPECT_TRUE(guest.wait_for(VB_QUEUE_REPORTING,
					   guest.post(VB_QUEUE_REPORTING, {}, ranges), &len));
		return len;
	}

	uint32_t send(const std::vector<ChainBuffer>& out, uint32_t bitmap_bytes, uint8_t* bitmap,
		      uint8_t bitmap_fill)
	{
		std::vector<uint8_t> initial(bitmap_bytes ? bitmap_bytes : 1, bitmap_fill);
		const uint64_t bitmap_gpa = guest.write_buffer(initial.data(), initial.size());
		std::vector<ChainBuffer> in;
		if (bitmap_bytes)
			in.push_back({bitmap_gpa, bitmap_bytes});
		uint32_t len = ~0u;
		EXPECT_TRUE(guest.wait_for(VB_QUEUE_INFLATE, guest.post(VB_QUEUE_INFLATE, out, in),
					   &len));
		if (bitmap) {
			EXPECT_TRUE(
				memory.read(bitmap_gpa, bitmap, bitmap_bytes ? bitmap_bytes : 1));
		}
		return len;
	}

	static uint32_t to_le(uint32_t v) { return v; } // x86-64 only, as the whole simulator

	GuestMemory memory;
	BalloonDevice device;
	TestGuest guest;
};

void fill_and_check_resident(Rig& rig, uint64_t gpa, uint64_t bytes, uint8_t value)
{
	ASSERT_TRUE(rig.memory.fill(gpa, value, bytes));
	ASSERT_EQ(rig.memory.resident_bytes(gpa, bytes), bytes);
}

// ---- The six cases of mst's qtest ------------------------------------------------------

TEST(DeviceInitOnInflate, OnePfnComesBackZeroWithItsBitAndUsedLengthOne)
{
	Rig rig({.device_init_on_inflate = true});
	const uint64_t features = rig.start(kWithoutPoison);
	ASSERT_TRUE(features & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	fill_and_check_resident(rig, kPfn * kPage, kPage, 0xaa);

	uint8_t bitmap = 0;
	EXPECT_EQ(rig.inflate({kPfn}, 1, &bitmap), 1u) << "ceil(1 / 8) bytes";
	EXPECT_EQ(bitmap, 0x01);
	// Resident size first: reading a discarded page maps the zero page, which mincore counts.
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, kPage), 0u);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, kPage, 0));
	EXPECT_EQ(rig.device.counters().wire_pages_reported_initialised.load(), 1u);
}

TEST(DeviceInitOnInflate, WithoutThePropertyTheBitIsNotOfferedAndTheUsedLengthIsZero)
{
	Rig rig({});
	const uint64_t features = rig.start(~uint64_t{0});
	ASSERT_FALSE(features & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	EXPECT_FALSE(rig.guest.features() & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	EXPECT_EQ(rig.inflate({kPfn}, 0, nullptr), 0u);
	EXPECT_EQ(rig.device.counters().wire_pages_inflated.load(), 1u);
}

TEST(DeviceInitOnInflate, FourPfnsSetTheLowFourBitsAndAllFourPagesReadZero)
{
	Rig rig({.device_init_on_inflate = true});
	ASSERT_TRUE(rig.start(kWithoutPoison) & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	fill_and_check_resident(rig, kPfn * kPage, 4 * kPage, 0xcc);

	// The device writes the whole bitmap: bits beyond the request come back clear.
	uint8_t bitmap = 0;
	EXPECT_EQ(rig.inflate(TestGuest::pfn_range(kPfn, 4), 1, &bitmap, 0xf0), 1u);
	EXPECT_EQ(bitmap, 0x0f);
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, 4 * kPage), 0u);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, 4 * kPage, 0));
}

TEST(DeviceInitReported, AReportedPageComesBackZeroWithUsedLengthItsSize)
{
	Rig rig({.device_init_reported = OnOffAuto::kOn});
	const uint64_t features = rig.start(kWithoutPoison);
	ASSERT_TRUE(features & VB_FEATURE(VB_F_PAGE_REPORTING));
	ASSERT_TRUE(features & VB_FEATURE(VB_F_DEVICE_INIT_REPORTED));
	fill_and_check_resident(rig, kPfn * kPage, kPage, 0xbb);

	EXPECT_EQ(rig.report({{kPfn * kPage, static_cast<uint32_t>(kPage)}}), kPage);
	// Resident size first: reading a discarded page maps the zero page, which mincore counts.
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, kPage), 0u);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, kPage, 0));
	EXPECT_EQ(rig.device.counters().wire_pages_reported_device_initialised.load(), 1u);
}

TEST(DeviceInitReported, WithThePropertyOffAReportIsStillDiscardedButItsUsedLengthIsZero)
{
	Rig rig({.device_init_reported = OnOffAuto::kOff});
	const uint64_t features = rig.start(~uint64_t{0});
	ASSERT_TRUE(features & VB_FEATURE(VB_F_PAGE_REPORTING));
	ASSERT_FALSE(features & VB_FEATURE(VB_F_DEVICE_INIT_REPORTED));
	fill_and_check_resident(rig, kPfn * kPage, kPage, 0xbb);

	EXPECT_EQ(rig.report({{kPfn * kPage, static_cast<uint32_t>(kPage)}}), 0u);
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, kPage), 0u);
	EXPECT_EQ(rig.device.counters().wire_pages_reported_device_initialised.load(), 0u);
}

TEST(DeviceInitReported, NegotiationMatrixOfTheOnOffAutoProperty)
{
	struct Case {
		OnOffAuto property;
		bool reporting;
		bool offered;
	};
	const Case cases[] = {
		{OnOffAuto::kAuto, true, true}, {OnOffAuto::kAuto, false, false},
		{OnOffAuto::kOff, true, false}, {OnOffAuto::kOff, false, false},
		{OnOffAuto::kOn, true, true},	{OnOffAuto::kOn, false, true},
	};
	for (const Case& c : cases) {
		BalloonDeviceOptions options;
		options.profile = c.reporting ? full_profile()
					      : full_without(VB_FEATURE(VB_F_PAGE_REPORTING));
		options.device_init_reported = c.property;
		EXPECT_EQ(bool(offered_features(options) & VB_FEATURE(VB_F_DEVICE_INIT_REPORTED)),
			  c.offered)
			<< "property " << int(c.property) << ", reporting " << c.reporting;
		// What the transport offers the driver, not only what the helper computes.
		Rig rig(options);
		EXPECT_EQ(bool(rig.device.transport().device_features() &
			       VB_FEATURE(VB_F_DEVICE_INIT_REPORTED)),
			  c.offered);
		EXPECT_EQ(bool(rig.device.transport().device_features() &
			       VB_FEATURE(VB_F_PAGE_REPORTING)),
			  c.reporting)
			<< "the property never adds reporting itself";
	}
}

// ---- Edge rules ---------------------------------------------------------------------

TEST(DeviceInitOnInflate, ANonZeroPoisonValLeavesTheBitmapAloneWithUsedLengthZero)
{
	Rig rig({.device_init_on_inflate = true});
	const uint64_t features = rig.start(~uint64_t{0}, 0xaaaaaaaa);
	ASSERT_TRUE(features & VB_FEATURE(VB_F_PAGE_POISON));
	ASSERT_TRUE(features & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	fill_and_check_resident(rig, kPfn * kPage, 4 * kPage, 0xaa);

	uint8_t bitmap = 0;
	EXPECT_EQ(rig.inflate(TestGuest::pfn_range(kPfn, 4), 1, &bitmap, 0x5a), 0u);
	EXPECT_EQ(bitmap, 0x5a) << "mst's device does not touch the bitmap";
	EXPECT_EQ(rig.device.counters().wire_pages_inflated.load(), 4u)
		<< "the inflate itself proceeds";
	EXPECT_EQ(rig.device.counters().wire_pages_reported_initialised.load(), 0u);
	EXPECT_EQ(rig.device.counters().rejected_by(BalloonRejection::kBitmapMissing), 0u);
}

TEST(DeviceInitOnInflate, PagePoisonWithPoisonValZeroStillSetsTheBits)
{
	Rig rig({.device_init_on_inflate = true});
	ASSERT_TRUE(rig.start(~uint64_t{0}) & VB_FEATURE(VB_F_PAGE_POISON));
	fill_and_check_resident(rig, kPfn * kPage, kPage, 0xaa);
	uint8_t bitmap = 0;
	EXPECT_EQ(rig.inflate({kPfn}, 1, &bitmap), 1u);
	EXPECT_EQ(bitmap, 0x01);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, kPage, 0));
}

TEST(DeviceInitOnInflate, OurBit21WritesARepeatedPoisonByteWhereBit7Declines)
{
	BalloonDeviceOptions options;
	options.profile = full_profile();
	options.profile.offered_features |= VB_FEATURE(VB_F_X_INIT_ON_INFLATE);
	Rig rig(options);
	ASSERT_TRUE(rig.start(~uint64_t{0}, 0xaaaaaaaa) & VB_FEATURE(VB_F_X_INIT_ON_INFLATE));
	fill_and_check_resident(rig, kPfn * kPage, kPage, 0x11);
	uint8_t bitmap = 0;
	EXPECT_EQ(rig.inflate({kPfn}, 1, &bitmap), 1u);
	EXPECT_EQ(bitmap, 0x01);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, kPage, 0xaa));
}

TEST(DeviceInitReported, ANonZeroPoisonValKeepsTheReportedPagesWithUsedLengthZero)
{
	Rig rig({.device_init_reported = OnOffAuto::kOn});
	ASSERT_TRUE(rig.start(~uint64_t{0}, 0xaaaaaaaa) & VB_FEATURE(VB_F_DEVICE_INIT_REPORTED));
	fill_and_check_resident(rig, kPfn * kPage, kPage, 0xaa);
	EXPECT_EQ(rig.report({{kPfn * kPage, static_cast<uint32_t>(kPage)}}), 0u);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, kPage, 0xaa));
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, kPage), kPage);
}

TEST(DeviceInitOnInflate, DiscardsInhibitedLeaveEveryBitClearAndThePagesInPlace)
{
	Rig rig({.device_init_on_inflate = true, .discards_inhibited = true});
	ASSERT_TRUE(rig.start(kWithoutPoison) & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	fill_and_check_resident(rig, kPfn * kPage, 4 * kPage, 0xaa);
	uint8_t bitmap = 0;
	// mst's device still clears the bitmap and returns its length.
	EXPECT_EQ(rig.inflate(TestGuest::pfn_range(kPfn, 4), 1, &bitmap, 0xff), 1u);
	EXPECT_EQ(bitmap, 0x00);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, 4 * kPage, 0xaa));
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, 4 * kPage), 4 * kPage);
	EXPECT_GE(rig.device.counters().discards_inhibited.load(), 1u);

	// Once discards are allowed again the next inflate is initialised as usual.
	rig.device.set_discards_inhibited(false);
	fill_and_check_resident(rig, (kPfn + 8) * kPage, kPage, 0xaa);
	EXPECT_EQ(rig.inflate({kPfn + 8}, 1, &bitmap, 0), 1u);
	EXPECT_EQ(bitmap, 0x01);
	EXPECT_TRUE(bytes_are(rig.memory, (kPfn + 8) * kPage, kPage, 0));
}

TEST(DeviceInitReported, DiscardsInhibitedSkipTheWholeReportWithUsedLengthZero)
{
	Rig rig({.device_init_reported = OnOffAuto::kOn, .discards_inhibited = true});
	ASSERT_TRUE(rig.start(kWithoutPoison) & VB_FEATURE(VB_F_DEVICE_INIT_REPORTED));
	fill_and_check_resident(rig, kPfn * kPage, 2 * kPage, 0xbb);
	EXPECT_EQ(rig.report({{kPfn * kPage, static_cast<uint32_t>(kPage)},
			      {(kPfn + 1) * kPage, static_cast<uint32_t>(kPage)}}),
		  0u);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, 2 * kPage, 0xbb));
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, 2 * kPage), 2 * kPage);
}

TEST(DeviceInitOnInflate, AHostPageLargerThan4KiBIsReportedOnlyOnceAllOfItIsDiscarded)
{
	BalloonDeviceOptions options{.device_init_on_inflate = true};
	options.host_page_bytes = kHugePage;
	Rig rig(options, PageBacking::kTransparentHugePages);
	ASSERT_TRUE(rig.start(kWithoutPoison) & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	const uint32_t first = static_cast<uint32_t>(TestGuest::kDriverAreaBytes / kPage) + 512;
	fill_and_check_resident(rig, uint64_t{first} * kPage, kHugePage, 0xaa);

	// The first half of the host page: nothing is discarded, no bit is set.
	std::vector<uint8_t> bitmap(32);
	EXPECT_EQ(rig.inflate(TestGuest::pfn_range(first, 256), 32, bitmap.data(), 0xff), 32u);
	EXPECT_EQ(std::count(bitmap.begin(), bitmap.end(), 0), 32);
	EXPECT_EQ(rig.memory.resident_bytes(uint64_t{first} * kPage, kHugePage), kHugePage);
	EXPECT_TRUE(bytes_are(rig.memory, uint64_t{first} * kPage, kHugePage, 0xaa));

	// The second half completes it: the whole host page goes and this request's bits are set.
	// (The first request's pages were never promised; the driver keeps initialising them.)
	EXPECT_EQ(rig.inflate(TestGuest::pfn_range(first + 256, 256), 32, bitmap.data(), 0), 32u);
	EXPECT_EQ(std::count(bitmap.begin(), bitmap.end(), 0xff), 32);
	EXPECT_EQ(rig.memory.resident_bytes(uint64_t{first} * kPage, kHugePage), 0u);
	EXPECT_TRUE(bytes_are(rig.memory, uint64_t{first} * kPage, kHugePage, 0));
}

TEST(DeviceInitOnInflate, WithChunksBitICoversChunkIOnlyWhenTheWholeChunkWasDiscarded)
{
	BalloonDeviceOptions options{.device_init_on_inflate = true};
	options.profile.offered_features |= VB_FEATURE(VB_F_X_CHUNKED);
	options.host_page_bytes = kHugePage;
	Rig rig(options, PageBacking::kTransparentHugePages);
	const uint64_t features = rig.start(kWithoutPoison);
	ASSERT_TRUE(features & VB_FEATURE(VB_F_X_CHUNKED));
	ASSERT_TRUE(features & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	const uint64_t base = TestGuest::kDriverAreaBytes + kHugePage; // host-page aligned
	fill_and_check_resident(rig, base, 3 * kHugePage, 0xaa);

	// Chunk 0: one whole host page; chunk 1: half of the next; chunk 2: the third whole.
	uint8_t bitmap = 0;
	EXPECT_EQ(rig.inflate_chunks({{base, static_cast<uint32_t>(kHugePage)},
				      {base + kHugePage, static_cast<uint32_t>(kHugePage / 2)},
				      {base + 2 * kHugePage, static_cast<uint32_t>(kHugePage)}},
				     1, &bitmap, 0xff),
		  1u);
	EXPECT_EQ(bitmap, 0x05);
	EXPECT_TRUE(bytes_are(rig.memory, base, kHugePage, 0));
	EXPECT_TRUE(bytes_are(rig.memory, base + kHugePage, kHugePage, 0xaa));
	EXPECT_TRUE(bytes_are(rig.memory, base + 2 * kHugePage, kHugePage, 0));
	EXPECT_EQ(rig.memory.resident_bytes(base + kHugePage, kHugePage), kHugePage);
}

TEST(DeviceInitOnInflate, AShortBitmapRefusesTheRequestAndAMissingOneInflatesWithoutBits)
{
	Rig rig({.device_init_on_inflate = true});
	ASSERT_TRUE(rig.start(kWithoutPoison) & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
	// Nine PFNs need two bytes; one is refused whole, untouched.
	fill_and_check_resident(rig, kPfn * kPage, 9 * kPage, 0xaa);
	uint8_t bitmap[2] = {};
	EXPECT_EQ(rig.inflate(TestGuest::pfn_range(kPfn, 9), 1, bitmap, 0x33), 0u);
	EXPECT_EQ(bitmap[0], 0x33);
	EXPECT_EQ(rig.device.counters().wire_pages_inflated.load(), 0u);
	EXPECT_EQ(rig.device.counters().rejected_by(BalloonRejection::kBitmapMissing), 1u);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, 9 * kPage, 0xaa));
	// No writable buffer at all: an inflate without a bitmap, as on mst's device.
	EXPECT_EQ(rig.inflate(TestGuest::pfn_range(kPfn, 9), 0, nullptr), 0u);
	EXPECT_EQ(rig.device.counters().wire_pages_inflated.load(), 9u);
}

// Bits 20 and 7 together (spec/proposals/vb-f-x-chunked.md, 5.5.6.x.3): n ranges at
// distinct, non-adjacent pages from kPfn on, one page each.
std::vector<ChainBuffer> one_page_ranges(unsigned n)
{
	std::vector<ChainBuffer> ranges;
	for (unsigned i = 0; i < n; i++)
		ranges.push_back({(kPfn + 2ull * i) * kPage, static_cast<uint32_t>(kPage)});
	return ranges;
}

void start_chunked(Rig& rig, uint32_t poison_val = 0)
{
	const uint64_t features = rig.start(poison_val ? ~uint64_t{0} : kWithoutPoison, poison_val);
	EXPECT_TRUE(features & VB_FEATURE(VB_F_X_CHUNKED));
	EXPECT_TRUE(features & VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE));
}

BalloonDeviceOptions chunked_device_init()
{
	BalloonDeviceOptions options{.device_init_on_inflate = true};
	options.profile.offered_features |= VB_FEATURE(VB_F_X_CHUNKED);
	return options;
}

TEST(DeviceInitOnInflate, WithChunksAMissingOrShortBitmapRefusesTheWholeRequest)
{
	Rig rig(chunked_device_init());
	start_chunked(rig);
	fill_and_check_resident(rig, kPfn * kPage, 18 * kPage, 0xaa);
	// Nine ranges need two bytes: none, and one, are both refused whole, untouched.
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(9), 0, nullptr), 0u);
	uint8_t bitmap[2] = {};
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(9), 1, bitmap, 0x33), 0u);
	EXPECT_EQ(bitmap[0], 0x33);
	EXPECT_EQ(rig.device.counters().rejected_by(BalloonRejection::kBitmapMissing), 2u);
	EXPECT_EQ(rig.device.counters().wire_pages_inflated.load(), 0u);
	EXPECT_EQ(rig.device.counters().inflate_requests.load(), 0u);
	EXPECT_TRUE(bytes_are(rig.memory, kPfn * kPage, 18 * kPage, 0xaa));
	EXPECT_EQ(rig.memory.resident_bytes(kPfn * kPage, 18 * kPage), 18 * kPage);
	// Two bytes: acted on.
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(9), 2, bitmap), 2u);
	EXPECT_EQ(rig.device.counters().wire_pages_inflated.load(), 9u);
}

TEST(DeviceInitOnInflate, WithChunksEveryBitBeyondTheDiscardedRangesIsCleared)
{
	Rig rig(chunked_device_init());
	start_chunked(rig);
	fill_and_check_resident(rig, kPfn * kPage, 18 * kPage, 0xaa);
	// Nine whole ranges discarded: bits 0-8 set, bits 9-15 cleared although the driver
	// wrote them set.
	uint8_t bitmap[2] = {};
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(9), 2, bitmap, 0xff), 2u);
	EXPECT_EQ(bitmap[0], 0xff);
	EXPECT_EQ(bitmap[1], 0x01);
	for (unsigned i = 0; i < 9; i++)
		EXPECT_TRUE(bytes_are(rig.memory, (kPfn + 2ull * i) * kPage, kPage, 0)) << i;
	EXPECT_TRUE(bytes_are(rig.memory, (kPfn + 1) * kPage, kPage, 0xaa)) << "between ranges";
}

TEST(DeviceInitOnInflate, WithChunksANonZeroPoisonValClearsEveryBitAndStillUsesTheBitmap)
{
	Rig rig(chunked_device_init());
	start_chunked(rig, 0xaaaaaaaa);
	fill_and_check_resident(rig, kPfn * kPage, 18 * kPage, 0xaa);
	uint8_t bitmap[2] = {};
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(9), 2, bitmap, 0xff), 2u);
	EXPECT_EQ(bitmap[0], 0x00);
	EXPECT_EQ(bitmap[1], 0x00);
	EXPECT_EQ(rig.device.counters().wire_pages_inflated.load(), 9u) << "the inflate proceeds";
	EXPECT_EQ(rig.device.counters().wire_pages_reported_initialised.load(), 0u);
}

TEST(DeviceInitOnInflate, WithChunksTheUsedLengthIsCeilNOver8WhenActedOnAndZeroWhenRefused)
{
	Rig rig(chunked_device_init());
	start_chunked(rig);
	fill_and_check_resident(rig, kPfn * kPage, 40 * kPage, 0xaa);
	uint8_t bitmap[3] = {};
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(1), 1, bitmap), 1u);
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(8), 1, bitmap), 1u);
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(9), 2, bitmap), 2u);
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(17), 3, bitmap), 3u);
	// A longer bitmap than needed: still ceil(n/8) used.
	EXPECT_EQ(rig.inflate_chunks(one_page_ranges(9), 3, bitmap), 2u);
	// Refused (a misaligned range): 0, the bitmap untouched.
	std::vector<ChainBuffer> bad = one_page_ranges(9);
	bad[4].phys_addr += 512;
	EXPECT_EQ(rig.inflate_chunks(bad, 2, bitmap, 0x5a), 0u);
	EXPECT_EQ(bitmap[0], 0x5a);
	EXPECT_EQ(bitmap[1], 0x5a);
	EXPECT_EQ(rig.device.counters().rejected_by(BalloonRejection::kChunkMisaligned), 1u);
}

} // namespace
} // namespace vbsim
