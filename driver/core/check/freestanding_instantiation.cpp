// SPDX-License-Identifier: GPL-2.0
//
// Instantiates the whole core against an OS that is only declared, and is compiled with
// kernel-like flags (no libstdc++, no libc headers): any dependency the core grows on a
// hosted environment fails this build before it can fail the module's.
#include "vballoon/core/balloon.h"

namespace vb_check {

struct DeclaredOnlyOs {
	bool alloc_pages(unsigned order, vb::PageUse use, vb::Reclaim reclaim, uint64_t* pfn);
	void free_page_run(vb::PageRun run);
	void balloon_list_insert(vb::PageRun run);
	size_t balloon_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages);
	void balloon_list_mark_initialised(vb::PageRun run);
	void balloon_hold(vb::PageRun run);
	size_t balloon_held_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages);
	void balloon_list_replace(uint64_t old_pfn, uint64_t new_pfn);
	void adjust_managed_pages(vb::PageRun run, bool add);
	void hint_list_insert(vb::PageRun run);
	size_t hint_list_take(vb::PageRun* runs, size_t max_runs, uint64_t max_pages);
	uint64_t free_pages_kept();
	void pressure_sample(vb::PressureSample* sample);
	void initialise_pages(vb::PageRun run);
	uint64_t phys_addr(const void* buffer);
	bool queue_add(vb::QueueKind queue, const vb::Segment* out, unsigned n_out,
		       const vb::Segment* in, unsigned n_in, void* token);
	void queue_kick(vb::QueueKind queue);
	void* queue_get_used(vb::QueueKind queue, uint32_t* len);
	void* queue_wait_used(vb::QueueKind queue, uint32_t* len);
	bool queue_broken(vb::QueueKind queue);
	uint32_t queue_size(vb::QueueKind queue);
	uint32_t config_read32(uint32_t offset);
	void config_write32(uint32_t offset, uint32_t value);
	void memory_stats(vb::MemoryStats* stats);
	void lock();
	void unlock();
	bool try_lock();
	void vlog(vb::LogLevel level, const char* fmt, va_list args);
};

} // namespace vb_check

template class vb::Balloon<vb_check::DeclaredOnlyOs>;
// Each part on its own too, so a member the facade does not reach is compiled as well.
template class vb::PageBalloon<vb_check::DeclaredOnlyOs>;
template class vb::Messenger<vb_check::DeclaredOnlyOs>;
template class vb::FreePageHinter<vb_check::DeclaredOnlyOs>;
template class vb::FreePageReporter<vb_check::DeclaredOnlyOs>;
