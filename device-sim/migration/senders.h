// SPDX-License-Identifier: GPL-2.0
#ifndef VBSIM_MIGRATION_SENDERS_H
#define VBSIM_MIGRATION_SENDERS_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "memory/guest_memory.h"
#include "migration/channel.h"
#include "migration/migration.h"
#include "migration/page_bitmap.h"
#include "migration/residency.h"

namespace vbsim::migration
{

class DestinationImage;

// What the senders did in the running round, summed over their threads as they go (the
// model clock reads the bytes while the round runs).
struct RoundCounters {
	std::atomic<uint64_t> pages_sent{0};
	std::atomic<uint64_t> zero_pages{0};
	std::atomic<uint64_t> skipped_reported{0};
	std::atomic<uint64_t> bytes{0};
	std::atomic<uint64_t> scan_ns{0};
	std::atomic<uint64_t> send_ns{0};

	void reset()
	{
		for (auto* counter :
		     {&pages_sent, &zero_pages, &skipped_reported, &bytes, &scan_ns, &send_ns})
			counter->store(0, std::memory_order_relaxed);
	}
};

// The sender threads, one per channel: each round they take chunks of the to-send bitmap
// until none is left (or the iteration's model time is up), and write every page they send
// into their channel's socket. Their CPU time is measured per thread with the thread
// clock, so other jobs on the machine do not inflate it. On a kPipe stream the hand-off to
// the reader (its copy out of the pipe, and the wake-ups between them: the writer's
// measured wait) is serial with its writer (channel.h) and counts in the writer's busy time.
class Senders
{
public:
	Senders(const MigrationConfig& config, PageBitmap& to_send, DestinationImage& destination,
		const GuestMemory& memory, const Residency& residency);
	~Senders();

	// A round starts from the bitmap's first word.
	void begin_round(RoundCounters& counters);

	// One iteration: the senders go on until the bitmap is done or `over` says the
	// iteration's time is up (checked before each chunk). True when the round is done.
	bool run_iteration(const std::function<bool()>& over);

	// End of a round: every channel's receiver has applied all it was sent (QEMU's
	// multifd sync), so a page resent next round cannot be overtaken by its older copy.
	// Returns the bytes the sync records took.
	uint64_t sync_channels();

	// Largest busy time of one sender in the round so far, in ns: its CPU time plus its
	// sleeping on a kPipe stream's reader (the round's critical path when each sender has a
	// core, as QEMU's channel threads would).
	uint64_t max_thread_cpu_ns() const;

	// The readers' copy out of kPipe streams in the round so far, in ns (0 on sockets).
	uint64_t reader_copy_ns_in_round(size_t channel) const;
	uint64_t reader_copy_ns_in_round() const;
	// What a kPipe stream's writer spent on its reader in the round so far, in ns: the
	// wait it measured (Channel::writer_wait_ns), at least the reader's copy (0 on sockets).
	uint64_t handoff_ns_in_round(size_t channel) const;
	uint64_t handoff_ns_in_round() const;

	uint64_t bytes_received() const;
	double receiver_cpu_ms() const;

private:
	void run(unsigned index);
	const uint8_t* source_page(uint64_t page) const;
	void send_chunk(unsigned index, uint64_t first_word, std::vector<uint64_t>& pages,
			RoundCounters& counters);

	const MigrationConfig& config_;
	PageBitmap& to_send_;
	const Residency& residency_;
	const uint8_t* base_;
	const uint64_t zero_pages_;
	uint8_t* zero_block_ = nullptr;
	std::vector<std::unique_ptr<Channel>> channels_;
	std::vector<std::atomic<uint64_t>> per_thread_cpu_ns_;
	// Read by the model clock's callers from any thread, as per_thread_cpu_ns_ is.
	std::vector<std::atomic<uint64_t>> copy_at_round_start_;
	std::vector<std::atomic<uint64_t>> wait_at_round_start_;
	std::vector<std::thread> threads_;
	std::atomic<uint64_t> cursor_{0};

	std::mutex mutex_;
	std::condition_variable wake_;
	std::condition_variable done_;
	uint64_t generation_ = 0;
	size_t busy_ = 0;
	bool quit_ = false;
	RoundCounters* counters_ = nullptr;
	const std::function<bool()>* over_ = nullptr;
};

} // namespace vbsim::migration

#endif
