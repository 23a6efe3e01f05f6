// SPDX-License-Identifier: GPL-2.0
//
// Free page hinting without the virtqueue: the guest's side (Linux's virtio_balloon: on a
// new command id, take free blocks of the largest order, hint each, hold them until DONE)
// and the device's side (pass each hint to the observer) in one object acting directly
// on the guest's page allocator. The model's tests and benchmark use it where no device
// is wired; the machine builder uses the balloon device's real path.
//
// Hints go out on the hinter's own thread, so they race with the senders as a guest's
// hints race with QEMU's bulk pass; `synchronous` hints everything inside
// start_hint_round() instead (tests that need the hints to win).
#ifndef VBSIM_MIGRATION_DIRECT_HINTER_H
#define VBSIM_MIGRATION_DIRECT_HINTER_H

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "balloon/free_page_events.h"
#include "buddy_allocator.h"
#include "migration/migration.h"

namespace vbsim::migration
{

class DirectHinter : public FreePageHintControl
{
public:
	static constexpr uint32_t kFirstCmdId = 2; // 0 and 1 are STOP and DONE in the spec

	DirectHinter(BuddyAllocator& allocator, bool synchronous);
	~DirectHinter() override;

	void set_observer(FreePageEvents* observer);

	uint32_t start_hint_round() override;
	void stop_hint_round() override;
	void finish_hinting() override;

	uint32_t last_cmd_id() const { return last_id_.load(); }
	unsigned rounds_started() const { return rounds_started_.load(); }
	unsigned finished() const { return finished_.load(); }
	uint64_t pages_held() const;
	// Guest CPU spent allocating and hinting, in ms.
	double guest_cpu_ms() const { return guest_ns_.load() / 1e6; }

private:
	void hint_round(uint32_t id);
	void run();

	BuddyAllocator& allocator_;
	const bool synchronous_;
	mutable std::mutex mutex_;
	std::condition_variable wake_;
	FreePageEvents* observer_ = nullptr;
	uint32_t next_id_ = kFirstCmdId;
	uint32_t pending_id_ = 0; // a round for the thread to run
	uint32_t active_id_ = 0;  // 0 once stopped
	bool quit_ = false;
	std::vector<uint64_t> held_;
	std::atomic<uint32_t> last_id_{0};
	std::atomic<unsigned> rounds_started_{0};
	std::atomic<unsigned> finished_{0};
	std::atomic<uint64_t> guest_ns_{0};
	std::thread thread_;
};

} // namespace vbsim::migration

#endif
