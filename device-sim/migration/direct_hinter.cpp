// SPDX-License-Identifier: GPL-2.0
#include "migration/direct_hinter.h"

#include "memory/guest_memory.h"
#include "transport/thread_cpu_time.h"

namespace vbsim::migration
{

namespace
{
constexpr uint64_t kBlockPages = uint64_t{1} << BuddyAllocator::kMaxOrder;
} // namespace

DirectHinter::DirectHinter(BuddyAllocator& allocator, bool synchronous)
	: allocator_(allocator), synchronous_(synchronous)
{
	if (!synchronous_)
		thread_ = std::thread([this] { run(); });
}

DirectHinter::~DirectHinter()
{
	{
		std::lock_guard lock(mutex_);
		quit_ = true;
	}
	wake_.notify_all();
	if (thread_.joinable())
		thread_.join();
	for (uint64_t block : held_)
		allocator_.free_run(block, kBlockPages);
}

void DirectHinter::set_observer(FreePageEvents* observer)
{
	std::lock_guard lock(mutex_);
	observer_ = observer;
}

uint32_t DirectHinter::start_hint_round()
{
	std::unique_lock lock(mutex_);
	const uint32_t id = next_id_++;
	if (next_id_ < kFirstCmdId)
		next_id_ = kFirstCmdId;
	active_id_ = id;
	last_id_ = id;
	rounds_started_++;
	if (synchronous_) {
		lock.unlock();
		hint_round(id);
	} else {
		pending_id_ = id;
		wake_.notify_all();
	}
	return id;
}

void DirectHinter::stop_hint_round()
{
	std::lock_guard lock(mutex_);
	active_id_ = 0;
}

void DirectHinter::finish_hinting()
{
	std::lock_guard lock(mutex_);
	active_id_ = 0;
	pending_id_ = 0;
	for (uint64_t block : held_)
		allocator_.free_run(block, kBlockPages);
	held_.clear();
	finished_++;
}

uint64_t DirectHinter::pages_held() const
{
	std::lock_guard lock(mutex_);
	return held_.size() * kBlockPages;
}

// One round as the guest driver runs it: echo the id, hint free blocks until none is left
// or the host stops the round, then STOP. The lock is held per block, not across the
// round, so the host's STOP lands between two hints as it would on the queue.
void DirectHinter::hint_round(uint32_t id)
{
	const uint64_t start = thread_cpu_ns();
	{
		std::lock_guard lock(mutex_);
		if (observer_)
			observer_->hint_round_started(id);
	}
	for (;;) {
		std::lock_guard lock(mutex_);
		if (active_id_ != id || quit_)
			break;
		auto block = allocator_.allocate(BuddyAllocator::kMaxOrder);
		if (!block)
			break;
		held_.push_back(*block);
		if (observer_)
			observer_->pages_hinted(id, *block * GuestMemory::kWirePageBytes,
						kBlockPages * GuestMemory::kWirePageBytes);
	}
	{
		std::lock_guard lock(mutex_);
		if (observer_)
			observer_->hint_round_stopped(id);
	}
	guest_ns_ += thread_cpu_ns() - start;
}

void DirectHinter::run()
{
	for (;;) {
		uint32_t id;
		{
			std::unique_lock lock(mutex_);
			wake_.wait(lock, [this] { return quit_ || pending_id_ != 0; });
			if (quit_)
				return;
			id = pending_id_;
			pending_id_ = 0;
		}
		hint_round(id);
	}
}

} // namespace vbsim::migration
