// SPDX-License-Identifier: GPL-2.0
//
// The messenger on its own (driver/core/include/vballoon/core/messenger.h), against a device
// that acknowledges in any order, refuses buffers, returns buffers it was never given and
// goes away, all at random from a seed. The property: every page a caller names ends in
// exactly one outcome (acknowledged, lost or never sent), none is counted twice, and the
// acknowledged ones are exactly those of the messages the device returned.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "fake_os.h"
#include "vballoon/core/messenger.h"

namespace vbtest {
namespace {

// FakeOs with inflateq and deflateq replaced by a device that does what its dice say. The
// messenger calls these by name, so they hide FakeOs's own.
class RandomDevice : public FakeOs {
public:
	struct Chain {
		void* token;
		unsigned descriptors;
		std::vector<uint64_t> guest_pages; // what the chain named, in guest pages
		vb::Segment bitmap{};
		bool has_bitmap = false;
		// The guest page each wire unit (a PFN entry, or a chunk) belongs to: the bitmap's
		// bit i covers units[i].
		std::vector<std::vector<uint64_t>> units;
		vb::QueueKind queue = vb::QueueKind::kInflate;
		unsigned writable_descriptors = 0;
	};

	RandomDevice(uint64_t seed, unsigned page_shift, bool chunked_wire) : FakeOs(0, 1), rng(seed),
		page_shift_(page_shift), chunked_wire_(chunked_wire)
	{
	}

	bool queue_add(vb::QueueKind queue, const vb::Segment* out, unsigned n_out, const vb::Segment* in,
		       unsigned n_in, void* token)
	{
		EXPECT_TRUE(queue == vb::QueueKind::kInflate || queue == vb::QueueKind::kDeflate);
		EXPECT_LE(n_out + n_in, ring) << "a chain longer than its ring";
		if (gone || descriptors_in_use + n_out + n_in > ring || chance(refuse_percent))
			return false;
		Chain chain{token, n_out + n_in, {}, {}, false, {}};
		chain.queue = queue;
		chain.writable_descriptors = n_in;
		const unsigned wire_per_page = 1u << (page_shift_ - 12);
		if (chunked_wire_) {
			for (unsigned i = 0; i < n_out; i++) {
				EXPECT_EQ(out[i].len % (1u << page_shift_), 0u);
				chain.units.emplace_back();
				for (uint64_t off = 0; off < out[i].len; off += 1u << page_shift_) {
					chain.guest_pages.push_back((out[i].phys_addr + off) >> page_shift_);
					chain.units.back().push_back((out[i].phys_addr + off) >>
								     page_shift_);
				}
			}
		} else {
			EXPECT_EQ(n_out, 1u);
			auto* pfns = reinterpret_cast<const uint32_t*>(out[0].phys_addr);
			const uint32_t count = out[0].len / 4;
			EXPECT_EQ(count % wire_per_page, 0u) << "a guest page split across two messages";
			for (uint32_t i = 0; i < count; i++)
				chain.units.push_back({pfns[i] / wire_per_page});
			for (uint32_t i = 0; i < count; i += wire_per_page) {
				EXPECT_EQ(pfns[i] % wire_per_page, 0u);
				for (uint32_t j = 1; j < wire_per_page && i + j < count; j++)
					EXPECT_EQ(pfns[i + j], pfns[i] + j);
				chain.guest_pages.push_back(pfns[i] / wire_per_page);
			}
		}
		if (n_in) {
			chain.bitmap = in[0];
			chain.has_bitmap = true;
		}
		EXPECT_EQ(chains.count(token), 0u) << "a token added twice";
		descriptors_in_use += chain.descriptors;
		chains[token] = chain;
		history.push_back(chain);
		pending_tokens.push_back(token);
		added++;
		return true;
	}
	void queue_kick(vb::QueueKind)
	{
		for (void* token : pending_tokens)
			in_device_tokens.push_back(token);
		pending_tokens.clear();
	}
	void* queue_get_used(vb::QueueKind, uint32_t* len)
	{
		if (gone)
			return nullptr;
		if (chance(foreign_percent))
			return foreign(len);
		if (in_device_tokens.empty() || !chance(ready_percent))
			return nullptr;
		return give_back_random(len);
	}
	void* queue_wait_used(vb::QueueKind, uint32_t* len)
	{
		if (gone || chance(gone_percent)) {
			gone = true;
			return nullptr;
		}
		if (chance(foreign_percent))
			return foreign(len);
		if (in_device_tokens.empty()) {
			ADD_FAILURE() << "the messenger waits with nothing in the device";
			return nullptr;
		}
		return give_back_random(len);
	}
	uint32_t queue_size(vb::QueueKind) { return ring; }
	void balloon_list_mark_initialised(vb::PageRun run)
	{
		for (uint64_t i = 0; i < run.count; i++)
			marked_initialised.insert(run.first_pfn + i);
	}

	bool chance(unsigned percent) { return std::uniform_int_distribution<unsigned>(0, 99)(rng) < percent; }

	std::mt19937_64 rng;
	uint32_t ring = 64;
	unsigned refuse_percent = 0;
	unsigned gone_percent = 0;
	unsigned foreign_percent = 0;
	unsigned ready_percent = 50; // queue_get_used() finds a finished buffer
	bool gone = false;
	unsigned descriptors_in_use = 0;
	uint64_t added = 0;
	std::map<void*, Chain> chains;       // on the ring, by token
	std::vector<void*> pending_tokens;   // added, not yet kicked
	std::vector<void*> in_device_tokens; // kicked, not yet returned
	std::multiset<uint64_t> returned_pages; // guest pages of chains handed back
	std::set<uint64_t> marked_initialised;
	unsigned overclaim_percent = 0;
	uint64_t overclaims = 0;
	std::set<uint64_t> may_mark; // pages whose bits the device honestly set
	std::vector<Chain> history;  // every chain added, in order
	// When set, the device writes every bitmap byte as bitmap_fill and uses the chain
	// with length used_len instead of rolling dice.
	bool scripted = false;
	uint8_t bitmap_fill = 0;
	uint32_t used_len = 0;

private:
	void* give_back_random(uint32_t* len)
	{
		// Any order: a device may finish requests as it likes.
		size_t i = std::uniform_int_distribution<size_t>(0, in_device_tokens.size() - 1)(rng);
		void* token = in_device_tokens[i];
		in_device_tokens.erase(in_device_tokens.begin() + static_cast<long>(i));
		Chain chain = chains.at(token);
		chains.erase(token);
		descriptors_in_use -= chain.descriptors;
		for (uint64_t page : chain.guest_pages)
			returned_pages.insert(page);
		*len = 0;
		if (chain.has_bitmap && scripted) {
			auto* bits = reinterpret_cast<uint8_t*>(chain.bitmap.phys_addr);
			for (uint32_t b = 0; b < chain.bitmap.len; b++)
				bits[b] = bitmap_fill;
			*len = used_len;
		} else if (chain.has_bitmap) {
			EXPECT_EQ(chain.bitmap.len, (chain.units.size() + 7) / 8)
				<< "a bitmap of ceil(n / 8) bytes";
			auto* bits = reinterpret_cast<uint8_t*>(chain.bitmap.phys_addr);
			// Mostly all set, as an honest device that discarded everything would say.
			const bool all = chance(30);
			for (uint32_t b = 0; b < chain.bitmap.len; b++)
				bits[b] = all ? 0xff : static_cast<uint8_t>(rng());
			*len = static_cast<uint32_t>(std::uniform_int_distribution<uint32_t>(0, chain.bitmap.len)(rng));
			// A hostile device claims to have written more than it was given.
			if (chance(overclaim_percent)) {
				*len = chain.bitmap.len +
				       static_cast<uint32_t>(
					       std::uniform_int_distribution<uint32_t>(1, 64)(rng));
				overclaims++;
			} else {
				// What the driver may trust: a guest page whose every unit's bit is set
				// within the bytes the device says it wrote.
				std::map<uint64_t, bool> whole;
				for (size_t i = 0; i < chain.units.size(); i++) {
					const bool set =
						i < *len * 8u && ((bits[i / 8] >> (i % 8)) & 1);
					for (uint64_t page : chain.units[i]) {
						auto [it, fresh] = whole.emplace(page, set);
						it->second = it->second && set;
					}
				}
				for (const auto& [page, set] : whole)
					if (set)
						may_mark.insert(page);
			}
		}
		return token;
	}
	void* foreign(uint32_t* len)
	{
		*len = 0;
		return &foreign_token_;
	}

	unsigned page_shift_;
	bool chunked_wire_;
	int foreign_token_ = 0;
};

static_assert(vb::BalloonOs<RandomDevice>);
using Messenger = vb::Messenger<RandomDevice>;

struct Trial {
	uint64_t features = 0;
	vb::GuestTraits traits;
	vb::QueueKind queue = vb::QueueKind::kInflate;
	std::vector<vb::PageRun> runs;
	std::set<uint64_t> pages; // every guest page of the runs
};

// Runs of guest pages, disjoint, in random order and size, some adjacent, each page named once.
Trial random_trial(std::mt19937_64& rng)
{
	Trial trial;
	auto pick = [&](uint64_t lo, uint64_t hi) { return std::uniform_int_distribution<uint64_t>(lo, hi)(rng); };
	const unsigned shifts[] = {12, 12, 14, 16};
	trial.traits.page_shift = shifts[pick(0, 3)];
	if (pick(0, 1))
		trial.features |= VB_FEATURE(VB_F_X_CHUNKED);
	// One bitmap or none: our bit 21 or the proposal's bit 7, which share it.
	switch (pick(0, 3)) {
	case 0:
	case 1:
		break;
	case 2:
		trial.features |= VB_FEATURE(VB_F_X_INIT_ON_INFLATE);
		break;
	default:
		trial.features |= VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);
		break;
	}
	trial.queue = pick(0, 1) ? vb::QueueKind::kInflate : vb::QueueKind::kDeflate;
	const size_t run_count = pick(1, 24);
	uint64_t next = pick(0, 64);
	for (size_t i = 0; i < run_count; i++) {
		const uint64_t count = pick(0, 3) ? pick(1, 40) : pick(41, 700);
		trial.runs.push_back({next, count, static_cast<uint32_t>(pick(0, 1) ? vb::kPageRunDeviceInitialised : 0)});
		for (uint64_t p = 0; p < count; p++)
			trial.pages.insert(next + p);
		next += count + (pick(0, 2) ? pick(1, 300) : 0);
	}
	std::shuffle(trial.runs.begin(), trial.runs.end(), rng);
	return trial;
}

void configure_random_device(RandomDevice& device, std::mt19937_64& rng)
{
	auto pick = [&](unsigned lo, unsigned hi) { return std::uniform_int_distribution<unsigned>(lo, hi)(rng); };
	const uint32_t rings[] = {1, 2, 3, 4, 5, 8, 16, 64, 128, 256};
	device.ring = rings[pick(0, 9)];
	device.refuse_percent = pick(0, 3) ? pick(0, 10) : pick(10, 100);
	device.gone_percent = pick(0, 2) ? 0 : pick(1, 30);
	device.foreign_percent = pick(0, 2) ? 0 : pick(1, 20);
	device.ready_percent = pick(0, 100);
	device.overclaim_percent = pick(0, 2) ? 0 : pick(1, 50);
}

// Tallies the outcomes of one call and checks the property.
struct Tally {
	std::map<uint64_t, unsigned> acknowledged, lost, never_sent;

	void check(const Trial& trial, const RandomDevice& device, const vb::HostReply& reply,
		   const std::string& where) const
	{
		for (uint64_t page : trial.pages) {
			const unsigned a = count(acknowledged, page), l = count(lost, page), n = count(never_sent, page);
			ASSERT_EQ(a + l + n, 1u) << where << ": page " << page << " acknowledged " << a << ", lost "
						 << l << ", never sent " << n;
		}
		for (const auto* outcome : {&acknowledged, &lost, &never_sent}) {
			for (const auto& [page, times] : *outcome) {
				ASSERT_TRUE(trial.pages.count(page)) << where << ": page " << page << " was never named";
			}
		}
		// Acknowledged exactly when the device returned the page's message.
		for (uint64_t page : trial.pages) {
			ASSERT_EQ(device.returned_pages.count(page), count(acknowledged, page))
				<< where << ": page " << page;
		}
		// Lost only with the device gone; never sent ones never reached the ring.
		if (!lost.empty()) {
			ASSERT_TRUE(reply.device_gone) << where;
		}
		for (const auto& chain : device.chains) {
			for (uint64_t page : chain.second.guest_pages) {
				ASSERT_EQ(count(lost, page), 1u) << where << ": page " << page
								 << " still on the ring, yet not lost";
			}
		}
		ASSERT_EQ(reply.all_acknowledged(), lost.empty() && never_sent.empty()) << where;
	}
	static unsigned count(const std::map<uint64_t, unsigned>& m, uint64_t page)
	{
		auto it = m.find(page);
		return it == m.end() ? 0 : it->second;
	}
	// Which outcomes one call saw, so a property test can show it met each of them.
	void count_into(unsigned (&seen)[3]) const
	{
		seen[0] += !acknowledged.empty();
		seen[1] += !lost.empty();
		seen[2] += !never_sent.empty();
	}
	void add_unacknowledged(const vb::HostReply& reply, const std::vector<vb::PageRun>& runs)
	{
		reply.for_each_unacknowledged(runs.data(), [&](vb::PageRun run, vb::MessageOutcome outcome) {
			auto& into = outcome == vb::MessageOutcome::kLost ? lost : never_sent;
			for (uint64_t p = 0; p < run.count; p++)
				into[run.first_pfn + p]++;
		});
	}
};

constexpr int kIterations = 1500;

TEST(MessengerProperty, EveryPageEndsInExactlyOneOutcome)
{
	std::mt19937_64 rng(0x5eed17);
	unsigned seen[3] = {}; // calls with acknowledged, lost, never sent pages
	uint64_t marked_pages = 0, overclaims = 0;
	for (int iteration = 0; iteration < kIterations; iteration++) {
		Trial trial = random_trial(rng);
		RandomDevice device(rng(), trial.traits.page_shift, trial.features & VB_FEATURE(VB_F_X_CHUNKED));
		configure_random_device(device, rng);
		vb::BalloonCounters counters;
		Messenger messenger(device, trial.features, trial.traits, counters);
		Tally tally;
		const std::string where = "iteration " + std::to_string(iteration);

		vb::HostReply reply = messenger.tell_host(trial.queue, trial.runs.data(), trial.runs.size(),
							  [&](vb::PageRun run) {
								  for (uint64_t p = 0; p < run.count; p++)
									  tally.acknowledged[run.first_pfn + p]++;
							  });
		tally.add_unacknowledged(reply, trial.runs);
		tally.check(trial, device, reply, where);
		if (::testing::Test::HasFatalFailure())
			return;
		tally.count_into(seen);
		const uint64_t messages = counters.inflate_messages.get() + counters.deflate_messages.get();
		ASSERT_EQ(messages, device.added) << where;
		// Marked initialised only what the device acknowledged (inflateq, with a bitmap).
		for (uint64_t page : device.marked_initialised) {
			ASSERT_EQ(Tally::count(tally.acknowledged, page), 1u) << where << ": page " << page;
		}
		// Exactly the pages whose every bit was honestly set: nothing of a message whose
		// used length overclaims, no bit beyond the used length or beyond the units.
		ASSERT_EQ(device.marked_initialised, device.may_mark) << where;
		ASSERT_EQ(counters.device_init_overclaims.get(), device.overclaims) << where;
		marked_pages += device.marked_initialised.size();
		overclaims += device.overclaims;
	}
	for (unsigned outcome = 0; outcome < 3; outcome++)
		EXPECT_GT(seen[outcome], kIterations / 20u) << "outcome " << outcome;
	EXPECT_GT(marked_pages, 1000u) << "the dice reached honest bitmaps";
	EXPECT_GT(overclaims, 20u) << "the dice reached overclaiming devices";
}

// The same property for the inflate's pipeline: runs handed over batch by batch, the
// device looked at without waiting in between, waits done "without the lock" by the caller.
TEST(MessengerProperty, PipelineEveryPageEndsInExactlyOneOutcome)
{
	std::mt19937_64 rng(0xba11007);
	unsigned seen[3] = {}; // calls with acknowledged, lost, never sent pages
	for (int iteration = 0; iteration < kIterations; iteration++) {
		Trial trial = random_trial(rng);
		trial.queue = vb::QueueKind::kInflate;
		RandomDevice device(rng(), trial.traits.page_shift, trial.features & VB_FEATURE(VB_F_X_CHUNKED));
		configure_random_device(device, rng);
		vb::BalloonCounters counters;
		Messenger messenger(device, trial.features, trial.traits, counters);
		Tally tally;
		const std::string where = "iteration " + std::to_string(iteration);
		auto acknowledged = [&](vb::PageRun run) {
			for (uint64_t p = 0; p < run.count; p++)
				tally.acknowledged[run.first_pfn + p]++;
		};

		Messenger::Outbox box = messenger.open_pipeline(vb::QueueKind::kInflate, trial.runs.data());
		size_t handed = 0;
		for (int rounds = 0; rounds < 100000; rounds++) {
			if (handed < trial.runs.size() && box.all_sent() && !box.blocked())
				handed = std::min(trial.runs.size(), handed + 1 + rng() % 8);
			messenger.extend(box, handed);
			messenger.collect_returned(box, acknowledged,
						   Messenger::InitialisedBits::kRecord);
			messenger.push(box, acknowledged);
			messenger.park(box);
			ASSERT_EQ(box.held_mask() & ~Messenger::kPipelineSlotMask, 0u) << where;
			ASSERT_EQ(messenger.pipeline_holds_inflateq(), box.held_mask() != 0) << where;
			if (!box.in_flight() && (box.blocked() || handed == trial.runs.size()))
				break;
			if (!box.in_flight())
				continue;
			// What came back is taken by the next round's collect_returned().
			messenger.wait(box);
		}
		vb::HostReply reply = messenger.close_pipeline(box);
		ASSERT_FALSE(messenger.pipeline_holds_inflateq()) << where;
		// Runs never handed over were never named: only those handed are checked.
		Trial named = trial;
		named.runs.resize(handed);
		named.pages.clear();
		for (const vb::PageRun& run : named.runs)
			for (uint64_t p = 0; p < run.count; p++)
				named.pages.insert(run.first_pfn + p);
		tally.add_unacknowledged(reply, named.runs);
		tally.check(named, device, reply, where);
		if (::testing::Test::HasFatalFailure())
			return;
		tally.count_into(seen);
	}
	// The dice reached every outcome, each many times.
	for (unsigned outcome = 0; outcome < 3; outcome++)
		EXPECT_GT(seen[outcome], kIterations / 20u) << "outcome " << outcome;
}

// A device that acknowledges in order and never fails, for the rules below.
struct QuietDevice : RandomDevice {
	QuietDevice() : RandomDevice(1, 12, false) { ring = 256; }
};

// The lock rule: a pipeline parked between batches with every slot it may hold in flight
// leaves tell_host() a slot, so the OOM notifier's deflate goes out and completes.
TEST(Messenger, ParkedPipelineLeavesTellHostASlot)
{
	QuietDevice device;
	device.ready_percent = 0; // the inflate's messages stay with the device
	vb::BalloonCounters counters;
	Messenger messenger(device, 0, {}, counters);
	std::vector<vb::PageRun> inflate = {{1000, 4 * Messenger::kWirePagesPerMessage, 0}};
	auto ignore = [](vb::PageRun) {};

	Messenger::Outbox box = messenger.open_pipeline(vb::QueueKind::kInflate, inflate.data());
	messenger.extend(box, inflate.size());
	messenger.push(box, ignore);
	messenger.park(box);
	ASSERT_EQ(box.held_mask(), Messenger::kPipelineSlotMask);
	EXPECT_TRUE(messenger.pipeline_holds_inflateq());
	const std::set<void*> inflate_tokens(device.in_device_tokens.begin(), device.in_device_tokens.end());

	// The deflate, while the device sits on the inflate's messages (held aside here, so
	// that it returns the deflate's only).
	std::vector<vb::PageRun> deflate = {{10, 3 * Messenger::kWirePagesPerMessage, 0}};
	uint64_t given_back = 0;
	device.ready_percent = 100;
	std::vector<void*> parked = device.in_device_tokens;
	device.in_device_tokens.clear();
	vb::HostReply reply = messenger.tell_host(vb::QueueKind::kDeflate, deflate.data(), deflate.size(),
						  [&](vb::PageRun run) { given_back += run.count; });
	EXPECT_TRUE(reply.all_acknowledged());
	EXPECT_EQ(given_back, deflate[0].count);
	EXPECT_EQ(parked.size(), 4u);
	for (const auto& [token, chain] : device.chains) {
		EXPECT_TRUE(inflate_tokens.count(token)) << "the deflate used a slot the pipeline holds";
	}

	// Now the pipeline's messages come back, and it closes with everything acknowledged.
	device.in_device_tokens = parked;
	uint64_t inflated = 0;
	auto count_inflated = [&](vb::PageRun run) { inflated += run.count; };
	while (box.in_flight())
		ASSERT_TRUE(messenger.collect(box, count_inflated, Messenger::InitialisedBits::kRecord, true));
	vb::HostReply closed = messenger.close_pipeline(box);
	EXPECT_TRUE(closed.all_acknowledged());
	EXPECT_EQ(inflated, inflate[0].count);
	EXPECT_FALSE(messenger.pipeline_holds_inflateq());
}

// A message never splits a guest page, and carries at most kWirePagesPerMessage wire pages.
TEST(Messenger, SixtyFourKiBPagesStayWhole)
{
	RandomDevice device(7, 16, false);
	device.ring = 256;
	device.ready_percent = 100;
	vb::BalloonCounters counters;
	vb::GuestTraits traits;
	traits.page_shift = 16;
	Messenger messenger(device, 0, traits, counters);
	std::vector<vb::PageRun> runs = {{5, 40, 0}, {100, 1, 0}};
	uint64_t acknowledged = 0;
	vb::HostReply reply = messenger.tell_host(vb::QueueKind::kDeflate, runs.data(), runs.size(),
						  [&](vb::PageRun run) { acknowledged += run.count; });
	EXPECT_TRUE(reply.all_acknowledged());
	EXPECT_EQ(acknowledged, 41u);
	// 41 pages of 16 wire pages, 16 pages per message: three messages.
	EXPECT_EQ(counters.deflate_messages.get(), 3u);
}

// A buffer the device was never given is counted and ignored; the call still completes.
TEST(Messenger, ForeignBufferIsCountedAndIgnored)
{
	RandomDevice device(3, 12, false);
	device.ring = 256;
	device.foreign_percent = 50;
	vb::BalloonCounters counters;
	Messenger messenger(device, 0, {}, counters);
	std::vector<vb::PageRun> runs = {{0, 3000, 0}};
	uint64_t acknowledged = 0;
	vb::HostReply reply = messenger.tell_host(vb::QueueKind::kInflate, runs.data(), runs.size(),
						  [&](vb::PageRun run) { acknowledged += run.count; });
	EXPECT_TRUE(reply.all_acknowledged());
	EXPECT_EQ(acknowledged, 3000u);
	EXPECT_GT(counters.foreign_used_buffers.get(), 0u);
}

// Bits 20 and 7 together (spec/proposals/vb-f-x-chunked.md, 5.5.6.x.3). Twelve runs that
// are not adjacent, so twelve ranges: a bitmap of two bytes.
constexpr uint64_t kChunkedDeviceInit =
	VB_FEATURE(VB_F_X_CHUNKED) | VB_FEATURE(VB_F_DEVICE_INIT_ON_INFLATE);

std::vector<vb::PageRun> twelve_separate_runs()
{
	std::vector<vb::PageRun> runs;
	for (uint64_t i = 0; i < 12; i++)
		runs.push_back({10 + 8 * i, 1 + i % 3, 0});
	return runs;
}

TEST(MessengerChunkedDeviceInit, EveryInflateEndsWithOneBitmapOfCeilRangesOver8AndADeflateWithNone)
{
	for (const vb::QueueKind queue : {vb::QueueKind::kInflate, vb::QueueKind::kDeflate}) {
		RandomDevice device(5, 12, true);
		device.ring = 256;
		device.ready_percent = 100;
		vb::BalloonCounters counters;
		Messenger messenger(device, kChunkedDeviceInit, {}, counters);
		std::vector<vb::PageRun> runs = twelve_separate_runs();
		vb::HostReply reply =
			messenger.tell_host(queue, runs.data(), runs.size(), [](vb::PageRun) {});
		EXPECT_TRUE(reply.all_acknowledged());
		ASSERT_FALSE(device.history.empty());
		size_t ranges = 0;
		for (const RandomDevice::Chain& chain : device.history) {
			ranges += chain.units.size();
			if (queue == vb::QueueKind::kDeflate) {
				EXPECT_EQ(chain.writable_descriptors, 0u)
					<< "a deflate carries no bitmap";
				continue;
			}
			EXPECT_EQ(chain.writable_descriptors, 1u) << "exactly one bitmap";
			EXPECT_EQ(chain.bitmap.len, (chain.units.size() + 7) / 8)
				<< "ceil(n/8) bytes, n the ranges (" << chain.units.size() << ")";
		}
		EXPECT_EQ(ranges, 12u) << "one range per run";
		if (queue == vb::QueueKind::kInflate) {
			EXPECT_EQ(device.history.size(), 1u);
			EXPECT_EQ(device.history[0].bitmap.len, 2u);
		}
	}
}

TEST(MessengerChunkedDeviceInit, ARangeCountsAsZeroOnlyWithItsBitSetBelowEightTimesTheUsedLength)
{
	for (const uint32_t used_len : {0u, 1u, 2u}) {
		RandomDevice device(7, 12, true);
		device.ring = 256;
		device.ready_percent = 100;
		device.scripted = true;
		device.bitmap_fill = 0xff; // every bit set, as far as the bitmap goes
		device.used_len = used_len;
		vb::BalloonCounters counters;
		Messenger messenger(device, kChunkedDeviceInit, {}, counters);
		std::vector<vb::PageRun> runs = twelve_separate_runs();
		vb::HostReply reply = messenger.tell_host(vb::QueueKind::kInflate, runs.data(),
							  runs.size(), [](vb::PageRun) {});
		EXPECT_TRUE(reply.all_acknowledged());
		ASSERT_EQ(device.history.size(), 1u);
		const RandomDevice::Chain& chain = device.history[0];
		ASSERT_EQ(chain.units.size(), 12u);
		std::set<uint64_t> expected;
		for (size_t i = 0; i < chain.units.size() && i < used_len * 8u; i++)
			expected.insert(chain.units[i].begin(), chain.units[i].end());
		EXPECT_EQ(device.marked_initialised, expected) << "used length " << used_len;
		EXPECT_EQ(counters.wire_pages_device_initialised.get(), expected.size());
	}
	// With only some bits set, exactly those ranges count.
	RandomDevice device(9, 12, true);
	device.ring = 256;
	device.ready_percent = 100;
	device.scripted = true;
	device.bitmap_fill = 0x05; // ranges 0, 2, 8 and 10
	device.used_len = 2;
	vb::BalloonCounters counters;
	Messenger messenger(device, kChunkedDeviceInit, {}, counters);
	std::vector<vb::PageRun> runs = twelve_separate_runs();
	EXPECT_TRUE(messenger
			    .tell_host(vb::QueueKind::kInflate, runs.data(), runs.size(),
				       [](vb::PageRun) {})
			    .all_acknowledged());
	ASSERT_EQ(device.history.size(), 1u);
	std::set<uint64_t> expected;
	for (const size_t i : {0u, 2u, 8u, 10u})
		expected.insert(device.history[0].units[i].begin(),
				device.history[0].units[i].end());
	EXPECT_EQ(device.marked_initialised, expected);
}

} // namespace
} // namespace vbtest
