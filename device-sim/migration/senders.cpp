// SPDX-License-Identifier: GPL-2.0
#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <system_error>

#include <sys/mman.h>

#include "migration/destination_image.h"
#include "migration/senders.h"
#include "migration/zero_page.h"
#include "transport/thread_cpu_time.h"

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
// A sender claims this many bitmap words at a time: 512 pages, 2 MiB (a multifd packet
// holds 128 pages by default; bigger claims keep the clock reads per page negligible).
constexpr uint64_t kChunkWords = 8;
constexpr uint64_t kChunkPages = kChunkWords * 64;
// QEMU's QEMUFile (migration/qemu-file.c): MAX_IOV_SIZE 64 iovecs, IO_BUF_SIZE 32 KiB.
constexpr size_t kQemuFilePagesPerWrite = 32;
constexpr size_t kQemuFileBufferBytes = 32 << 10;
// Larger than the last-level cache, so reading it runs at memory speed.
constexpr uint64_t kPopulatedZeroPages = (256ull << 20) / kPage;

} // namespace

Senders::Senders(const MigrationConfig& config, PageBitmap& to_send, DestinationImage& destination,
		 const GuestMemory& memory, const Residency& residency)
    : config_(config), to_send_(to_send), residency_(residency),
      base_(memory.translate(0, memory.size())),
      zero_pages_(config.untouched_page_reads == UntouchedPageReads::kSharedZeroPage
			  ? kChunkPages
			  : std::min(kPopulatedZeroPages, memory.size() / kPage)),
      per_thread_cpu_ns_(std::max(1u, config.sender_threads)),
      copy_at_round_start_(std::max(1u, config.sender_threads)),
      wait_at_round_start_(std::max(1u, config.sender_threads))
{
	void* map = mmap(nullptr, zero_pages_ * kPage, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (map == MAP_FAILED)
		throw std::system_error(errno, std::generic_category(), "mapping the zero region");
	zero_block_ = static_cast<uint8_t*>(map);
	madvise(zero_block_, zero_pages_ * kPage, MADV_HUGEPAGE);
	// Populate it now (a write fault per page), so the senders read memory.
	std::memset(zero_block_, 0, zero_pages_ * kPage);
	const unsigned threads = std::max(1u, config.sender_threads);
	for (unsigned i = 0; i < threads; i++)
		channels_.push_back(std::make_unique<Channel>(
			destination, config.zero_page_extra_bytes, config.stream));
	for (unsigned i = 0; i < threads; i++)
		threads_.emplace_back([this, i] { run(i); });
}

Senders::~Senders()
{
	{
		std::lock_guard lock(mutex_);
		quit_ = true;
	}
	wake_.notify_all();
	for (std::thread& thread : threads_)
		thread.join();
	channels_.clear(); // the receivers drain and stop
	munmap(zero_block_, zero_pages_ * kPage);
}

void Senders::begin_round(RoundCounters& counters)
{
	std::lock_guard lock(mutex_);
	counters_ = &counters;
	cursor_.store(0, std::memory_order_relaxed);
	for (auto& cpu : per_thread_cpu_ns_)
		cpu.store(0, std::memory_order_relaxed);
	for (size_t i = 0; i < channels_.size(); i++) {
		copy_at_round_start_[i].store(channels_[i]->reader_copy_ns(),
					      std::memory_order_relaxed);
		wait_at_round_start_[i].store(channels_[i]->writer_wait_ns(),
					      std::memory_order_relaxed);
	}
}

bool Senders::run_iteration(const std::function<bool()>& over)
{
	std::unique_lock lock(mutex_);
	over_ = &over;
	busy_ = threads_.size();
	generation_++;
	wake_.notify_all();
	done_.wait(lock, [this] { return busy_ == 0; });
	over_ = nullptr;
	return cursor_.load(std::memory_order_relaxed) >= to_send_.words();
}

uint64_t Senders::sync_channels()
{
	for (auto& channel : channels_)
		channel->sync();
	return channels_.size() * kPageHeaderBytes;
}

uint64_t Senders::max_thread_cpu_ns() const
{
	uint64_t most = 0;
	for (size_t i = 0; i < per_thread_cpu_ns_.size(); i++)
		most = std::max(most, per_thread_cpu_ns_[i].load(std::memory_order_relaxed) +
					      handoff_ns_in_round(i));
	return most;
}

uint64_t Senders::handoff_ns_in_round(size_t channel) const
{
	const uint64_t now = channels_[channel]->writer_wait_ns();
	const uint64_t start = wait_at_round_start_[channel].load(std::memory_order_relaxed);
	return std::max(reader_copy_ns_in_round(channel), now > start ? now - start : 0);
}

uint64_t Senders::handoff_ns_in_round() const
{
	uint64_t n = 0;
	for (size_t i = 0; i < channels_.size(); i++)
		n += handoff_ns_in_round(i);
	return n;
}

uint64_t Senders::reader_copy_ns_in_round(size_t channel) const
{
	return channels_[channel]->reader_copy_ns() -
	       copy_at_round_start_[channel].load(std::memory_order_relaxed);
}

uint64_t Senders::reader_copy_ns_in_round() const
{
	uint64_t n = 0;
	for (size_t i = 0; i < channels_.size(); i++)
		n += reader_copy_ns_in_round(i);
	return n;
}

uint64_t Senders::bytes_received() const
{
	uint64_t n = 0;
	for (const auto& channel : channels_)
		n += channel->bytes_received();
	return n;
}

double Senders::receiver_cpu_ms() const
{
	double ms = 0;
	for (const auto& channel : channels_)
		ms += channel->receiver_cpu_ms();
	return ms;
}

void Senders::run(unsigned index)
{
	std::vector<uint64_t> pages;
	pages.reserve(kChunkPages);
	uint64_t seen_generation = 0;
	for (;;) {
		RoundCounters* counters;
		const std::function<bool()>* over;
		{
			std::unique_lock lock(mutex_);
			wake_.wait(lock, [&] { return quit_ || generation_ != seen_generation; });
			if (quit_)
				return;
			seen_generation = generation_;
			counters = counters_;
			over = over_;
		}
		while (!(*over)()) {
			const uint64_t first_word =
				cursor_.fetch_add(kChunkWords, std::memory_order_relaxed);
			if (first_word >= to_send_.words()) {
				cursor_.store(to_send_.words(), std::memory_order_relaxed);
				break;
			}
			send_chunk(index, first_word, pages, *counters);
		}
		std::lock_guard lock(mutex_);
		if (--busy_ == 0)
			done_.notify_all();
	}
}

const uint8_t* Senders::source_page(uint64_t page) const
{
	return residency_.resident(page) ? base_ + page * kPage
					 : zero_block_ + (page % zero_pages_) * kPage;
}

void Senders::send_chunk(unsigned index, uint64_t first_word, std::vector<uint64_t>& pages,
			 RoundCounters& counters)
{
	const uint64_t t0 = thread_cpu_ns();
	// Take the chunk's bits now: a hint that lands after this is too late for them.
	pages.clear();
	const uint64_t end_word = std::min(first_word + kChunkWords, to_send_.words());
	for (uint64_t w = first_word; w < end_word; w++)
		for (uint64_t bits = to_send_.take_word(w); bits != 0; bits &= bits - 1)
			pages.push_back(w * 64 + std::countr_zero(bits));
	if (pages.empty()) {
		per_thread_cpu_ns_[index].fetch_add(thread_cpu_ns() - t0,
						    std::memory_order_relaxed);
		return;
	}

	Channel& channel = *channels_[index];
	const bool zero_detect = uses_zero_detection(config_.strategy);
	const bool skip_absent = uses_reports(config_.strategy) &&
				 config_.reported_pages == ReportedPages::kSkippedUnscanned;
	// Into a stream that waits on its reader, write as QEMU's QEMUFile does: a writev once
	// 64 iovecs are queued (MAX_IOV_SIZE: a page's header and the page take two, so every
	// 32 pages) or its 32 KiB buffer of headers is full, so the reader drains the stream
	// while the writer goes on checking pages, as cat does QEMU's.
	const bool qemu_file_batches = waits_on_reader(config_.stream);
	const size_t zero_record = kPageHeaderBytes + config_.zero_page_extra_bytes;
	uint64_t whole = 0, zero = 0, absent = 0, bytes = 0, flush_ns = 0;
	size_t queued_whole = 0, queued_zero = 0;
	auto flush = [&] {
		const uint64_t before = thread_cpu_ns();
		bytes += channel.flush();
		flush_ns += thread_cpu_ns() - before;
		queued_whole = queued_zero = 0;
	};
	for (uint64_t page : pages) {
		if (skip_absent && !residency_.resident(page)) {
			absent++;
		} else if (zero_detect && page_is_zero(source_page(page))) {
			channel.queue_zero_page(page);
			zero++;
			queued_zero++;
		} else {
			// The page is read by the kernel's copy into the socket, racing the guest's
			// writes as QEMU's writev does (the dirty log sends it again if so).
			channel.queue_page(page, source_page(page));
			whole++;
			queued_whole++;
		}
		if (qemu_file_batches &&
		    (queued_whole >= kQemuFilePagesPerWrite ||
		     (queued_zero + queued_whole) * zero_record >= kQemuFileBufferBytes))
			flush();
	}
	flush();
	const uint64_t t2 = thread_cpu_ns();
	const uint64_t send_ns = std::min(flush_ns, t2 - t0);
	counters.pages_sent.fetch_add(whole, std::memory_order_relaxed);
	counters.zero_pages.fetch_add(zero, std::memory_order_relaxed);
	counters.skipped_reported.fetch_add(absent, std::memory_order_relaxed);
	counters.bytes.fetch_add(bytes, std::memory_order_relaxed);
	counters.scan_ns.fetch_add(t2 - t0 - send_ns, std::memory_order_relaxed);
	counters.send_ns.fetch_add(send_ns, std::memory_order_relaxed);
	per_thread_cpu_ns_[index].fetch_add(t2 - t0, std::memory_order_relaxed);
}

} // namespace vbsim::migration
