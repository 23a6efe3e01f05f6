// SPDX-License-Identifier: GPL-2.0
#include "migration/channel.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <system_error>

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

// Reads the receiver's end in large blocks and hands out exact byte counts. With
// `copy_ns`, it adds there the CPU time of its reads that returned data (the copy out of
// the stream, on its thread clock).
class BufferedReader
{
public:
	explicit BufferedReader(int fd, std::atomic<uint64_t>* copy_ns = nullptr)
	    : fd_(fd), copy_ns_(copy_ns), buffer_(new uint8_t[kSize])
	{
	}

	// False at end of stream (or an error) before `n` bytes arrived.
	bool read_exact(uint8_t* to, size_t n, std::atomic<uint64_t>& counted)
	{
		while (n > 0) {
			if (begin_ == end_ && !refill(counted))
				return false;
			const size_t take = std::min(n, end_ - begin_);
			std::memcpy(to, data_ + begin_, take);
			begin_ += take;
			to += take;
			n -= take;
		}
		return true;
	}

	// `n` bytes: where they lie in the buffer if they are there whole, else read into
	// `scratch` (nullptr at end of stream). Saves a copy per page, as a reader like cat
	// makes one copy of what it reads.
	const uint8_t* take(size_t n, uint8_t* scratch, std::atomic<uint64_t>& counted)
	{
		if (begin_ == end_ && !refill(counted))
			return nullptr;
		if (end_ - begin_ >= n) {
			const uint8_t* at = data_ + begin_;
			begin_ += n;
			return at;
		}
		return read_exact(scratch, n, counted) ? scratch : nullptr;
	}

private:
	static constexpr size_t kSize = 1 << 20;

	bool refill(std::atomic<uint64_t>& counted)
	{
		for (;;) {
			const uint64_t cpu0 = copy_ns_ ? thread_cpu_ns() : 0;
			const ssize_t got = read(fd_, buffer_.get(), kSize);
			if (got > 0) {
				if (copy_ns_)
					copy_ns_->fetch_add(thread_cpu_ns() - cpu0,
							    std::memory_order_relaxed);
				data_ = buffer_.get();
				begin_ = 0;
				end_ = size_t(got);
				counted.fetch_add(uint64_t(got), std::memory_order_relaxed);
				return true;
			}
			if (got < 0 && errno == EINTR)
				continue;
			return false;
		}
	}

	int fd_;
	std::atomic<uint64_t>* copy_ns_;
	std::unique_ptr<uint8_t[]> buffer_;
	const uint8_t* data_ = nullptr;
	size_t begin_ = 0;
	size_t end_ = 0;
};

} // namespace

Channel::Channel(DestinationImage& destination, uint32_t zero_extra_bytes, ChannelStream stream)
    : destination_(destination), zero_extra_bytes_(zero_extra_bytes), stream_(stream)
{
	int fds[2];
	if (stream == ChannelStream::kPipe) {
		// The kernel's default capacity, as QEMU's exec: pipe has (never resized).
		if (pipe2(fds, O_CLOEXEC) != 0)
			throw std::system_error(errno, std::generic_category(),
						"pipe for a migration channel");
		receive_fd_ = fds[0];
		send_fd_ = fds[1];
	} else {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
			throw std::system_error(errno, std::generic_category(),
						"socketpair for a migration channel");
		send_fd_ = fds[0];
		receive_fd_ = fds[1];
	}
	queued_.reserve(1024);
	receiver_ = std::thread([this] { receive(); });
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

void Channel::write_all(struct iovec* iov, size_t count)
{
	while (count > 0) {
		ssize_t done = writev(send_fd_, iov, int(count));
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
	write_all(&iov, 1);
	lock.lock();
	synced_.wait(lock, [&] { return syncs_applied_ >= target || failed_.load(); });
	if (failed_.load())
		throw std::runtime_error("migration channel: the receiver stopped on a bad record");
}

void Channel::receive()
{
	BufferedReader reader(receive_fd_,
			      stream_ == ChannelStream::kPipe ? &reader_copy_ns_ : nullptr);
	std::unique_ptr<uint8_t[]> page(new uint8_t[kPage]);
	uint8_t fill[8];
	// A bad record: say so, and keep draining so the sender never blocks on a full socket.
	auto fail = [&] {
		failed_.store(true);
		{
			std::lock_guard lock(mutex_);
			synced_.notify_all();
		}
		while (reader.read_exact(page.get(), 1, bytes_received_)) {
		}
	};
	for (;;) {
		uint64_t header = 0;
		if (!reader.read_exact(reinterpret_cast<uint8_t*>(&header), kPageHeaderBytes, bytes_received_))
			break;
		const uint64_t flags = header & kFlagMask;
		const uint64_t page_index = header / kPage;
		if (flags == kFlagPage) {
			const uint8_t* data = reader.take(kPage, page.get(), bytes_received_);
			if (data == nullptr || !destination_.holds(page_index))
				return fail();
			destination_.receive_page(page_index, data);
		} else if (flags == kFlagZero) {
			if (!reader.read_exact(fill, zero_extra_bytes_, bytes_received_) ||
			    !destination_.holds(page_index))
				return fail();
			destination_.receive_zero_page(page_index);
		} else if (flags == kFlagSync) {
			receiver_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
			std::lock_guard lock(mutex_);
			syncs_applied_++;
			synced_.notify_all();
		} else {
			return fail();
		}
	}
	receiver_cpu_ns_.store(thread_cpu_ns(), std::memory_order_relaxed);
}

} // namespace vbsim::migration
