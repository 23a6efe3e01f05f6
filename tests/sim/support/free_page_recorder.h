// SPDX-License-Identifier: GPL-2.0
//
// A FreePageEvents observer that writes down everything the device tells it, in order, for
// tests to read from their own thread.
#ifndef VBSIM_TESTS_SIM_SUPPORT_FREE_PAGE_RECORDER_H
#define VBSIM_TESTS_SIM_SUPPORT_FREE_PAGE_RECORDER_H

#include <cstdint>
#include <mutex>
#include <vector>

#include "balloon/free_page_events.h"

namespace vbsim::test
{

class FreePageRecorder final : public FreePageEvents
{
public:
	struct Event {
		enum Kind { kStarted, kHinted, kStopped, kReported } kind;
		uint32_t cmd_id = 0;
		uint64_t gpa = 0;
		uint64_t bytes = 0;
	};

	void hint_round_started(uint32_t cmd_id) override { add({Event::kStarted, cmd_id}); }
	void pages_hinted(uint32_t cmd_id, uint64_t gpa, uint64_t bytes) override
	{
		add({Event::kHinted, cmd_id, gpa, bytes});
	}
	void hint_round_stopped(uint32_t cmd_id) override { add({Event::kStopped, cmd_id}); }
	void pages_reported(uint64_t gpa, uint64_t bytes) override
	{
		add({Event::kReported, 0, gpa, bytes});
	}

	std::vector<Event> events() const
	{
		std::lock_guard lock(mutex_);
		return events_;
	}
	uint64_t bytes(Event::Kind kind, uint32_t cmd_id = 0) const
	{
		std::lock_guard lock(mutex_);
		uint64_t total = 0;
		for (const Event& e : events_)
			if (e.kind == kind && (kind == Event::kReported || e.cmd_id == cmd_id))
				total += e.bytes;
		return total;
	}
	size_t count(Event::Kind kind) const
	{
		std::lock_guard lock(mutex_);
		size_t n = 0;
		for (const Event& e : events_)
			n += e.kind == kind;
		return n;
	}

private:
	void add(const Event& event)
	{
		std::lock_guard lock(mutex_);
		events_.push_back(event);
	}

	mutable std::mutex mutex_;
	std::vector<Event> events_;
};

} // namespace vbsim::test

#endif
