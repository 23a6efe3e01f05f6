// SPDX-License-Identifier: GPL-2.0
//
// One migration channel, as a QEMU multifd channel (or the single migration stream): a
// connected socket pair, a loopback TCP connection (QEMU's `tcp:` to a destination), or for
// QEMU's `exec:` stream a pipe of the kernel's default capacity (64 KiB). A sender thread
// writes records into one end with writev, straight from guest RAM as QEMU does. On a pipe
// or socket pair a reader thread drains the other end (cat's loop) and an applier thread
// puts what it read into the destination image; on TCP one receiving thread reads each page
// into the destination's RAM at its address, as a destination QEMU does
// (DestinationImage::ram()). Every byte counted as sent went through the stream.
//
// On a pipe (and on TCP, whose socket buffer fills the same way) the writer sleeps whenever it is full, until the reader has copied it out:
// QEMU's migration thread writing into `exec:cat > /dev/null` sleeps once per 64 KiB of
// stream (3000-3600 times for 229 MiB: tests/guest/hint_timeline.py,
// docs/migration-model.md), so the reader's copy, and on a host with an idle CPU the
// wake-ups that hand the pipe back and forth, are on the writer's critical path. The
// reader is cat's loop on a thread of its own (it only reads, into chunks it queues); an
// applier thread parses the chunks into the destination image in batches, so the image's
// work does not slow the pipe as cat's /dev/null does not. reader_copy_ns() is the
// reader's CPU time in its reads; writer_wait_ns() is what the writer really waited for
// the reader, measured on this pipe: its wall time in writes less its CPU time and less
// both threads' runqueue waits (another job's CPU is not the pipe's cost).
//
// Wire format, per record: an 8-byte header, the page's guest-physical address with flags
// in its low bits (QEMU's be64 address-and-flags; little-endian here, both ends are this
// process), then for a page its 4096 bytes, for a zero page `zero_extra_bytes` fill bytes.
// A sync record ends a round: the receiver acknowledges it once every record before it is
// in the image (QEMU's multifd sync: a page resent in a later round on another channel
// must not be overtaken by its older copy).
#ifndef VBSIM_MIGRATION_CHANNEL_H
#define VBSIM_MIGRATION_CHANNEL_H

#include <sys/uio.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "migration/destination_image.h"
#include "migration/migration.h"

namespace vbsim::migration
{

inline constexpr uint32_t kPageHeaderBytes = 8;

class Channel
{
public:
	Channel(DestinationImage& destination, uint32_t zero_extra_bytes,
		ChannelStream stream = ChannelStream::kSocketPair);
	~Channel(); // closes the sender's end, joins the receiver
	Channel(const Channel&) = delete;
	Channel& operator=(const Channel&) = delete;

	// ---- Sender side: one thread at a time -------------------------------------------
	// Queues a record; `data` (4096 bytes) must stay valid until flush().
	void queue_page(uint64_t page, const uint8_t* data);
	void queue_zero_page(uint64_t page);
	// Writes what is queued; returns the bytes written.
	uint64_t flush();
	// On a pipe or TCP: the reader's CPU time copying the stream out of it, in ns, since
	// the channel was made (0 on a socket pair). Any thread.
	uint64_t reader_copy_ns() const { return reader_copy_ns_.load(std::memory_order_relaxed); }
	// On a pipe or TCP: the writer's time off its CPU in writes, less its own runqueue
	// waits and the reader's, in ns since the channel was made (0 on a socket pair). Any
	// thread.
	uint64_t writer_wait_ns() const;
	// Writes a sync record and waits until the receiver has applied everything before it.
	void sync();

	// ---- Either side, any time ----------------------------------------------------------
	uint64_t bytes_received() const { return bytes_received_.load(std::memory_order_relaxed); }
	double receiver_cpu_ms() const { return receiver_cpu_ns_.load(std::memory_order_relaxed) / 1e6; }
	// Set if the receiver read a record it cannot apply (a bug: the run is then an error).
	bool receiver_failed() const { return failed_.load(); }

private:
	struct Chunk {
		std::unique_ptr<uint8_t[]> bytes;
		size_t size = 0;
	};
	class ChunkReader;

	void write_all(struct iovec* iov, size_t count);
	void receive();
	void read_stream();	 // the stream's reader (cat) for the applier, receive()
	void receive_into_ram(); // a destination QEMU's receiving thread (kTcp)
	// The receiving side's answers to the sender: a sync record applied, a bad record.
	void acknowledge_sync();
	void report_bad_record();
	// The applier's side of the reader's queue: the next chunk (false at end of stream);
	// `done` goes back to the reader for reuse.
	bool next_chunk(Chunk& chunk);
	bool sync_pending() const
	{
		return syncs_requested_.load(std::memory_order_acquire) !=
		       syncs_applied_.load(std::memory_order_acquire);
	}

	DestinationImage& destination_;
	const uint32_t zero_extra_bytes_;
	const ChannelStream stream_;
	std::atomic<uint64_t> reader_copy_ns_{0};
	int send_fd_ = -1;
	int receive_fd_ = -1;

	struct Record {
		uint64_t header;
		const uint8_t* data; // the page, or nullptr for a zero page
	};
	std::vector<Record> queued_;
	std::vector<uint8_t> meta_; // headers and fill bytes, built at flush
	std::vector<struct iovec> iov_;
	std::vector<uint8_t> staging_; // ThreadSanitizer builds only (channel.cpp)

	std::thread receiver_; // the applier
	std::thread stream_reader_;
	std::atomic<uint64_t> writer_wait_ns_{0};
	std::atomic<uint64_t> reader_runqueue_ns_{0};

	// The stream reader's queue of chunks for the applier.
	std::mutex chunks_mutex_;
	std::condition_variable chunks_ready_;
	std::condition_variable chunks_room_;
	std::deque<Chunk> chunks_;
	std::vector<Chunk> spare_chunks_;
	size_t queued_bytes_ = 0;
	bool stream_ended_ = false;
	std::atomic<uint64_t> syncs_requested_{0};
	std::atomic<uint64_t> bytes_received_{0};
	std::atomic<uint64_t> receiver_cpu_ns_{0};
	std::atomic<bool> failed_{false};
	std::mutex mutex_;
	std::condition_variable synced_;
	uint64_t syncs_sent_ = 0;
	// Changed under mutex_ (the sender waits on synced_), read without it by the reader.
	std::atomic<uint64_t> syncs_applied_{0};
};

} // namespace vbsim::migration

#endif
