// SPDX-License-Identifier: GPL-2.0
//
// The free page reporter (VIRTIO_BALLOON_F_PAGE_REPORTING): the OS picks free blocks (Linux
// takes them off its free lists at pageblock order, 2 MiB), the device may discard them,
// and once it has acknowledged the report the blocks go back on the free lists, marked
// reported. Unlike inflate there is no deflate: the next user of a page simply faults it in.
#ifndef VBALLOON_CORE_FREE_PAGE_REPORTER_H
#define VBALLOON_CORE_FREE_PAGE_REPORTER_H

#include <stddef.h>
#include <stdint.h>

#include "vballoon/core/core_log.h"
#include "vballoon/core/counters.h"
#include "vballoon/core/features.h"
#include "vballoon/core/os_interface.h"
#include "vballoon/support/atomic.h"
#include "vballoon/support/mutant.h"

namespace vb {

// Own state, own queue (reporting_vq), no balloon lock.
template <BalloonOs Os> class FreePageReporter {
public:
	// Most runs in one report (Linux's PAGE_REPORTING_CAPACITY).
	static constexpr size_t kReportRunsMax = 32;

	FreePageReporter(Os& os, uint64_t negotiated_features, const GuestTraits& traits,
			 BalloonCounters& counters)
		: os_(os), features_(negotiated_features), traits_(traits),
		  wire_pages_per_page_(1u << (traits.page_shift - VB_PFN_SHIFT)), counters_(counters)
	{
	}

	FreePageReporter(const FreePageReporter&) = delete;
	FreePageReporter& operator=(const FreePageReporter&) = delete;

	// After DRIVER_OK: reports may travel from now on.
	void start() { driver_ok_.set(); }
	// Reports free blocks the OS has taken off its free lists (and that hold the guest's
	// free-page pattern when PAGE_POISON is negotiated) in one scatter-gather request, and
	// returns only once the device acknowledged it: true then, and the OS may mark the
	// blocks reported and put them back. False when the request was refused or never
	// acknowledged (device gone): the blocks are not reported; in a guest that needs a
	// pattern in free pages they have been re-initialised, as the device may have written
	// them. Sleeps on reporting_vq, never holds the balloon lock. One caller at a time.
	// Refused before start(): reports begin only after DRIVER_OK.
	// With DEVICE_INIT_REPORTED, *device_initialised (when given) says whether the device
	// zeroed every page of the report: its used length is exactly the report's bytes. A
	// shorter one says some were not, and the report does not say which: none is trusted.
	[[nodiscard]] bool report_free_pages(const PageRun* runs, size_t count,
					     bool* device_initialised = nullptr);

private:
	Os& os_;
	const uint64_t features_;
	const GuestTraits traits_;
	const uint32_t wire_pages_per_page_;
	BalloonCounters& counters_;
	Flag driver_ok_; // start() ran: DRIVER_OK is set
	uint8_t report_token_ = 0;
};

template <BalloonOs Os>
bool FreePageReporter<Os>::report_free_pages(const PageRun* runs, size_t count,
					     bool* device_initialised)
{
	if (device_initialised)
		*device_initialised = false;
	if (!has_feature(features_, VB_F_PAGE_REPORTING) || count == 0 || count > kReportRunsMax)
		return false;
	// An OS that registers its reporting before the device is live must not have its
	// first report travel early.
	if (!driver_ok_.get() && !VB_MUTANT(INIT05_REPORT_BEFORE_DRIVER_OK))
		return false;
	// A chain longer than the ring could never be added (Linux refuses reporting on a
	// ring smaller than its capacity; the OS should size its batches to the ring).
	if (count > os_.queue_size(QueueKind::kReporting)) {
		counters_.report_failures.add(1);
		return false;
	}

	// Device-writable buffers, as Linux sends them: the device takes the pages' content.
	Segment in[kReportRunsMax];
	uint64_t pages = 0;
	for (size_t i = 0; i < count; i++) {
		uint64_t bytes = runs[i].count << traits_.page_shift;
		if (runs[i].count == 0 || bytes > 0xffffffffull ||
		    runs[i].first_pfn > (~0ull >> traits_.page_shift)) {
			counters_.report_failures.add(1);
			log_to(os_, LogLevel::kError, "a reported run does not fit a descriptor\n");
			return false;
		}
		in[i] = {runs[i].first_pfn << traits_.page_shift, static_cast<uint32_t>(bytes)};
		pages += runs[i].count;
	}
	if (!os_.queue_add(QueueKind::kReporting, nullptr, 0, in, static_cast<unsigned>(count),
			   &report_token_)) {
		counters_.report_failures.add(1);
		return false;
	}
	os_.queue_kick(QueueKind::kReporting);

	// The pages may not be used before the device acknowledges the report.
	uint32_t used_len = 0;
	for (;;) {
		if (VB_MUTANT(FPR04_REPORT_ACK_NOT_AWAITED))
			break;
		uint32_t len;
		void* token = os_.queue_wait_used(QueueKind::kReporting, &len);

		if (token == &report_token_) {
			used_len = len;
			break;
		}
		if (token) {
			counters_.foreign_used_buffers.add(1);
			continue;
		}
		// Never acknowledged: the device may have written the pages, so a guest that
		// keeps a pattern in its free pages writes it again.
		counters_.report_failures.add(1);
		if (traits_.freed_pages_need_pattern) {
			for (size_t i = 0; i < count; i++)
				os_.initialise_pages(runs[i]);
		}
		return false;
	}
	counters_.reports.add(1);
	counters_.wire_pages_reported.add(pages * wire_pages_per_page_);
	if (has_feature(features_, VB_F_DEVICE_INIT_REPORTED) && used_len != 0) {
		const uint64_t bytes = pages << traits_.page_shift;
		const bool whole = used_len == bytes ||
				   (VB_MUTANT(DI_DRV04_PARTIAL_REPORT_TRUSTED) && used_len < bytes);
		if (used_len > bytes && !VB_MUTANT(DI_DRV05_OVERLONG_REPORT_TRUSTED)) {
			counters_.device_init_overclaims.add(1);
		} else if (whole || used_len > bytes) {
			counters_.wire_pages_reported_device_initialised.add(pages *
									     wire_pages_per_page_);
			if (device_initialised)
				*device_initialised = true;
		}
	}
	return true;
}

} // namespace vb

#endif
