// SPDX-License-Identifier: GPL-2.0
#include "migration/channel.h"

#include <fcntl.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <tuple>
#include <utility>

#include "memory/guest_memory.h"
#include "migration/zero_page.h"
#include "transport/thread_cpu_time.h"

// ThreadSanitizer sees writev read guest RAM that the guest may be writing: the race QEMU has
// too, and intended (the dirty log sends the page again). Under TSan the pages go through a
// staging copy it does not watch (copy_guest_page); elsewhere straight from guest RAM.
#if defined(__SANITIZE_THREAD__)
#define VB_STAGE_PAGES 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VB_STAGE_PAGES 1
#endif
#endif

namespace vbsim::migration
{

namespace
{

constexpr uint64_t kPage = GuestMemory::kWirePageBytes;
// Flags in the header's low bits (QEMU's RAM_SAVE_FLAG_ZERO, _PAGE, _EOS).
constexpr uint64_t kFlagZero = 0x02;
constexpr uint64_t kFlagPage = 0x08;
constexpr uint64_t kFlagSync = 0x10;
constexpr uint64_t kFlagMask = kPage - 1;

} // namespace

namespace
{
// The stream's reader reads as cat does, into buffers of cat's size (a read of a pipe returns
// at most what it holds, 64 KiB); the applier wakes for a batch of them, for a sync, or at
// the end, so that it rarely runs while the two ends hand the stream back and forth; the
// reader waits for room only if the applier falls a long way behind.
constexpr size_t kReadBytes = 128 << 10;
constexpr size_t kApplyBatchBytes = 4 << 20;
constexpr size_t kMostQueuedBytes = 256 << 20;
constexpr unsigned kReadsPerRunqueueSample = 16;
} // namespace

// The applier's view of the reader's chunks as one stream.
class Channel::ChunkReader
{
public:
	explicit ChunkReader(Channel& channel) : channel_(channel) {}
	~ChunkReader() { give_back(); }
	ChunkReader(const ChunkReader&) = delete;
	ChunkReader& operator=(const ChunkReader&) = delete;

	// False at the end of the stream before `n` bytes came.
	bool read_exact(uint8_t* to, size_t n)
	{
		while (n > 0) {
			if (begin_ == chunk_.size && !refill())
				return false;
			const size_t take = std::min(n, chunk_.size - begin_);
			std::memcpy(to, chunk_.bytes.get() + begin_, take);
			begin_ += take;
			to += take;
			n -= take;
		}
		return true;
	}

	// `n` bytes: where they lie in the chunk if they are there whole, else copied into
	// `scratch` (nullptr at the end of the stream).
	const uint8_t* take(size_t n, uint8_t* scratch)
	{
		if (begin_ == chunk_.size && !refill())
			return nullptr;
		if (chunk_.size - begin_ >= n) {
			const uint8_t* at = chunk_.bytes.get() + begin_;
			begin_ += n;
			return at;
		}
		return read_exact(scratch, n) ? scratch : nullptr;
	}

private:
	bool refill()
	{
		give_back();
		begin_ = 0;
		return channel_.next_chunk(chunk_);
	}

	void give_back()
	{
		if (!chunk_.bytes)
			return;
		std::lock_guard lock(channel_.chunks_mutex_);
		chunk_.size = 0;
		channel_.spare_chunks_.push_back(std::move(chunk_));
		chunk_ = Chunk{};
	}

	Channel& channel_;
	Chunk chunk_;
	size_t begin_ = 0;
};

namespace
{

// A loopback TCP connection, as a QEMU source and its destination on one host have:
// {sender's end, receiver's end}.
std::pair<int, int> loopback_tcp_connection()
{
	auto fail = [](const char* what) {
		throw std::system_error(errno, std::generic_category(), what);
	};
	const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (listener < 0)
		fail("socket for a migration channel's listener");
	sockaddr_in address{};
	address.sin_family = AF_INET;
	address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	address.sin_port = 0;
	socklen_t length = sizeof(address);
	if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0 ||
	    listen(listener, 1) != 0 ||
	    getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) {
		close(listener);
		fail("listening on loopback for a migration channel");
	}
	const int sender = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sender < 0 ||
	    connect(sender, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
		if (sender >= 0)
			close(sender);
		close(listener);
		fail("connecting a migration channel over loopback");
	}
	const int receiver = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
	close(listener);
	if (receiver < 0) {
		close(sender);
		fail("accepting a migration channel over loopback");
	}
	return {sender, receiver};
}

} // namespace

Channel::Channel(DestinationImage& destination, uint32_t zero_extra_bytes, ChannelStream stream)
    : destination_(destination), zero_extra_bytes_(zero_extra_bytes), stream_(stream)
{
	int fds[2];
	switch (stream) {
	case ChannelStream::kPipe:
		// The kernel's default capacity, as QEMU's exec: pipe has (never resized).
		if (pipe2(fds, O_CLOEXEC) != 0)
			throw std::system_error(errno, std::generic_category(),
						"pipe for a migration channel");
		receive_fd_ = fds[0];
		send_fd_ = fds[1];
		break;
	case ChannelStream::kTcp:
		std::tie(send_fd_, receive_fd_) = loopback_tcp_connection();
		break;
	case ChannelStream::kSocketPair:
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
			throw std::system_error(errno, std::generic_category(),
						"socketpair for a migration channel");
		send_fd_ = fds[0];
		receive_fd_ = fds[1];
		break;
	}
	queued_.reserve(1024);
	if (stream == ChannelStream::kTcp) {
		// A destination QEMU's receiving thread: it reads pages into its RAM itself.
		destination_.ram();
		receiver_ = std::thread([this] { receive_into_ram(); });
	} else {
		receiver_ = std::thread([this] { receive(); });
		stream_reader_ = std::thread([this] { read_stream(); });
	}
}

Channel::~Channel()
{
	// The receiver sees the end of the stream.
	if (stream_ == ChannelStream::kPipe) {
		close(send_fd_);
		send_fd_ = -1;
	} else {
		shutdown(send_fd_, SHUT_WR);
	}
	if (stream_reader_.joinable())
		stream_reader_.join();
	receiver_.join();
	if (send_fd_ >= 0)
		close(send_fd_);
	close(receive_fd_);
}

void Channel::queue_page(uint64_t page, const uint8_t* data)
{
	queued_.push_back({page * kPage | kFlagPage, data});
}

void Channel::queue_zero_page(uint64_t page)
{
	queued_.push_back({page * kPage | kFlagZero, nullptr});
}

uint64_t Channel::flush()
{
	if (queued_.empty())
		return 0;
	const size_t zero_record = kPageHeaderBytes + zero_extra_bytes_;
	meta_.assign(queued_.size() * zero_record, 0);
#ifdef VB_STAGE_PAGES
	staging_.resize(queued_.size() * kPage);
	size_t staged = 0;
	for (Record& record : queued_)
		if (record.data) {
			copy_guest_page(staging_.data() + staged * kPage, record.data);
			record.data = staging_.data() + (staged++) * kPage;
		}
#endif
	iov_.clear();
	uint64_t bytes = 0;
	size_t meta_used = 0;
	for (const Record& record : queued_) {
		uint8_t* header = meta_.data() + meta_used;
		std::memcpy(header, &record.header, kPageHeaderBytes);
		const size_t n = record.data ? kPageHeaderBytes : zero_record;
		meta_used += n;
		// Headers of neighbouring records share one iovec.
		if (!iov_.empty() && static_cast<uint8_t*>(iov_.back().iov_base) + iov_.back().iov_len == header)
			iov_.back().iov_len += n;
		else
			iov_.push_back({header, n});
		bytes += n;
		if (record.data) {
			iov_.push_back({const_cast<uint8_t*>(record.data), kPage});
			bytes += kPage;
		}
	}
	for (size_t first = 0; first < iov_.size(); first += IOV_MAX)
		write_all(iov_.data() + first, std::min<size_t>(IOV_MAX, iov_.size() - first));
	queued_.clear();
	return bytes;
}

uint64_t Channel::writer_wait_ns() const
{
	const uint64_t waited = writer_wait_ns_.load(std::memory_order_relaxed);
	const uint64_t queued = reader_runqueue_ns_.load(std::memory_order_relaxed);
	return waited > queued ? waited - queued : 0;
}

void Channel::write_all(struct iovec* iov, size_t count)
{
	const bool measured = waits_on_reader(stream_);
	while (count > 0) {
		const uint64_t wall0 = measured ? monotonic_ns() : 0;
		const uint64_t cpu0 = measured ? thread_cpu_ns() : 0;
		const uint64_t queued0 = measured ? thread_runqueue_wait_ns() : 0;
		ssize_t done = writev(send_fd_, iov, int(count));
		if (measured) {
			// Signed: the two clocks tick apart, so a write that never slept can show
			// a little more CPU than wall time.
			const int64_t waited = int64_t(monotonic_ns() - wall0) -
					       int64_t(thread_cpu_ns() - cpu0) -
					       int64_t(thread_runqueue_wait_ns() - queued0);
			if (waited > 0)
				writer_wait_ns_.fetch_add(uint64_t(waited),
							  std::memory_order_relaxed);
		}
		if (done < 0) {
			if (errno == EINTR)
				continue;
			throw std::system_error(errno, std::generic_category(), "writing a migration channel");
		}
		while (count > 0 && size_t(done) >= iov->iov_len) {
			done -= ssize_t(iov->iov_len);
			iov++;
			count--;
		}
		if (count > 0) {
			iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + done;
			iov->iov_len -= size_t(done);
		}
	}
}

void Channel::sync()
{
	uint64_t header = kFlagSync;
	struct iovec iov = {&header, kPageHeaderBytes};
	std::unique_lock lock(mutex_);
	const uint64_t target = ++syncs_sent_;
	lock.unlock();
	// Before the record is in the pipe: the reader's read of it then wakes the applier.
	syncs_requested_.fetch_add(1, std::memory_order_release);
	write_all(&iov, 1);
	lock.lock();
	synced_.wait(lock, [&] {
		return syncs_applied_.load(std::memory_order_relaxed) >= target || failed_.load();
	});
	if (failed_.load())
		throw std::runtime_error("migration channel: the receiver stopped on a bad record");
}

void Channel::read_stream()
{
	unsigned reads = 0;
	const uint64_t queued_at_start = thread_runqueue_wait_ns();
	auto publish_runqueue_wait = [&] {
		reader_runqueue_ns_.store(thread_runqueue_wait_ns() - queued_at_start,
					  std::memory_order_relaxed);
	};
	for (;;) {
		Chunk chunk;
		{
			std::unique_lock lock(chunks_mutex_);
			chunks_room_.wait(lock, [&] { return queued_bytes_ < kMostQueuedBytes; });
			if (!spare_chunks_.empty()) {
				chunk = std::move(spare_chunks_.back());
				spare_chunks_.pop_back();
			}
		}
		if (!chunk.bytes)
			chunk.bytes.reset(new uint8_t[kReadBytes]);
		const uint64_t cpu0 = thread_cpu_ns();
		const ssize_t got = read(receive_fd_, chunk.bytes.get(), kReadBytes);
		if (got < 0 && errno == EINTR)
			continue;
		if (got <= 0) {
			publish_runqueue_wait();
			std::lock_guard lock(chunks_mutex_);
			stream_ended_ = true;
			chunks_ready_.notify_all();
			return;
		}
		if (waits_on_reader(stream_))
			reader_copy_ns_.fetch_add(thread_cpu_ns() - cpu0,
						  std::memory_order_relaxed);
		bytes_received_.fetch_add(uint64_t(got), std::memory_order_relaxed);
		chunk.size = size_t(got);
		const bool syncing = sync_pending();
		if (syncing || ++reads % kReadsPerRunqueueSample == 0)
			publish_runqueue_wait();
		bool wake;
		{
			std::lock_guard lock(chunks_mutex_);
			queued_bytes_ += chunk.size;
			chunks_.push_back(std::move(chunk));
			wake = syncing || queued_bytes_ >= kApplyBatchBytes;
		}
		if (wake)
			chunks_ready_.notify_one();
	}
}

bool Channel::next_chunk(Chunk& chunk)
{
	std::unique_lock lock(chunks_mutex_);
	chunks_ready_.wait(lock, [&] {
		return stream_ended_ ||
		       (!chunks_.empty() && (queued_bytes_ >= kApplyBatchBytes || sync_pending()));
	});
	if (chunks_.empty())
		return false; // ended, all applied
	chunk = std::move(chunks_.front());
	chunks_.pop_front();
	const bool had_no_room = queued_bytes_ >= kMostQueuedBytes;
	queued_bytes_ -= chunk.size;
	if (had_no_room)
		chunks_room_.notify_one();
	return true;
}

void Channel::acknowledge_sync()
{
	receiver_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
	std::lock_guard lock(mutex_);
	syncs_applied_.fetch_add(1, std::memory_order_release);
	synced_.notify_all();
}

void Channel::report_bad_record()
{
	failed_.store(true);
	std::lock_guard lock(mutex_);
	synced_.notify_all();
}

void Channel::receive_into_ram()
{
	// QEMU's destination reads each page into its guest RAM at the page's address (multifd:
	// straight from the socket), writes zeros only over a page that had data, and checks
	// nothing else; that work is the receiving thread's, between its reads of the socket, so
	// it is what holds the sender back when the socket is full. Its CPU time is the
	// reader's copy. Verification's digests are taken at each sync, of what the RAM holds,
	// outside that time.
	uint8_t* const ram = destination_.ram();
	std::unique_ptr<uint8_t[]> buffer(new uint8_t[kReadBytes]);
	size_t begin = 0, end = 0;
	uint64_t cpu_mark = thread_cpu_ns();
	auto count_copy = [&] {
		const uint64_t now = thread_cpu_ns();
		reader_copy_ns_.fetch_add(now - cpu_mark, std::memory_order_relaxed);
		cpu_mark = now;
	};
	auto read_exact = [&](uint8_t* to, size_t n) {
		while (n > 0) {
			if (begin == end) {
				count_copy();
				const ssize_t got = read(receive_fd_, buffer.get(), kReadBytes);
				if (got < 0 && errno == EINTR)
					continue;
				if (got <= 0)
					return false;
				bytes_received_.fetch_add(uint64_t(got), std::memory_order_relaxed);
				begin = 0;
				end = size_t(got);
			}
			const size_t take = std::min(n, end - begin);
			std::memcpy(to, buffer.get() + begin, take);
			begin += take;
			to += take;
			n -= take;
		}
		return true;
	};
	std::vector<uint64_t> arrived; // pages a record reached since the last sync
	auto digest_arrivals = [&] {
		count_copy();
		for (uint64_t page : arrived)
			if (destination_.ram_written(page))
				destination_.receive_page(page, ram + page * kPage);
			else
				destination_.receive_zero_page(page);
		arrived.clear();
		cpu_mark = thread_cpu_ns();
	};
	uint8_t fill[8];
	uint8_t scratch[kPageHeaderBytes];
	for (;;) {
		uint64_t header = 0;
		if (!read_exact(reinterpret_cast<uint8_t*>(&header), kPageHeaderBytes))
			break;
		const uint64_t flags = header & kFlagMask;
		const uint64_t page = header / kPage;
		bool bad = false;
		if (flags == kFlagPage) {
			bad = !destination_.holds(page);
			if (!bad && !read_exact(ram + page * kPage, kPage))
				break;
			if (!bad) {
				destination_.mark_ram_written(page);
				arrived.push_back(page);
			}
		} else if (flags == kFlagZero) {
			if (!read_exact(fill, zero_extra_bytes_))
				break;
			bad = !destination_.holds(page);
			if (!bad) {
				if (destination_.ram_written(page))
					std::memset(ram + page * kPage, 0, kPage);
				arrived.push_back(page);
			}
		} else if (flags == kFlagSync) {
			digest_arrivals();
			acknowledge_sync();
		} else {
			bad = true;
		}
		if (bad) {
			// Say so, and keep draining so the sender never blocks on a full socket.
			report_bad_record();
			while (read_exact(scratch, 1)) {
			}
			break;
		}
	}
	digest_arrivals();
	receiver_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
}

void Channel::receive()
{
	ChunkReader reader(*this);
	std::unique_ptr<uint8_t[]> page(new uint8_t[kPage]);
	uint8_t fill[8];
	// A bad record: say so, and keep draining so the sender never blocks on a full socket.
	auto fail = [&] {
		report_bad_record();
		while (reader.read_exact(page.get(), 1)) {
		}
	};
	for (;;) {
		uint64_t header = 0;
		if (!reader.read_exact(reinterpret_cast<uint8_t*>(&header), kPageHeaderBytes))
			break;
		const uint64_t flags = header & kFlagMask;
		const uint64_t page_index = header / kPage;
		if (flags == kFlagPage) {
			const uint8_t* data = reader.take(kPage, page.get());
			if (data == nullptr || !destination_.holds(page_index))
				return fail();
			destination_.receive_page(page_index, data);
		} else if (flags == kFlagZero) {
			if (!reader.read_exact(fill, zero_extra_bytes_) ||
			    !destination_.holds(page_index))
				return fail();
			destination_.receive_zero_page(page_index);
		} else if (flags == kFlagSync) {
			acknowledge_sync();
		} else {
			return fail();
		}
	}
	receiver_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
}

} // namespace vbsim::migration
