// SPDX-License-Identifier: GPL-2.0
//
// The virtio-balloon device of the simulated host, on the transport of transport/.
//
//  inflateq  PFN arrays -> pages become host-owned and are discarded (inflate_queue.h)
//  deflateq  PFN arrays -> pages are handed back when the request is acked
//            (deflate_queue.h)
//  statsq    the one buffer the driver primes; returned to ask for fresh stats, on a
//            timerfd interval or on request (stats_queue.h)
//  free_page_vq  command ids and hinted blocks, recorded and told to the FreePageEvents
//            observer; rounds are started, stopped and finished by the host controls
//            below (free_page_hint_queue.h)
//  reporting_vq  reported ranges are discarded before the ack, unless a non-zero
//            poison_val must survive (free_page_report_queue.h)
//
// Transport queue indices are dense over the negotiated features (vb_queue_index).
// With `legacy.transitional` the device also serves a driver without VERSION_1, under the
// balloon's legacy rules (legacy_interface.h).
//
// The host side (tests, the CLI) uses the methods below from any thread: set the target,
// read `actual`, ask for stats, check which pages the host holds, and hold deflate acks
// back to open the MUST_TELL_HOST race window on purpose.
#ifndef VBSIM_BALLOON_BALLOON_DEVICE_H
#define VBSIM_BALLOON_BALLOON_DEVICE_H

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

#include "balloon/balloon_device_counters.h"
#include "balloon/balloon_profile.h"
#include "balloon/deflate_queue.h"
#include "balloon/free_page_events.h"
#include "balloon/free_page_hint_queue.h"
#include "balloon/free_page_report_queue.h"
#include "balloon/fault_injector.h"
#include "balloon/fault_plan.h"
#include "balloon/guest_stats.h"
#include "balloon/host_page_ownership.h"
#include "balloon/huge_page_tracker.h"
#include "balloon/inflate_queue.h"
#include "balloon/legacy_interface.h"
#include "balloon/page_discarder.h"
#include "balloon/stats_queue.h"
#include "transport/device_backend.h"
#include "transport/transport.h"
#include "vballoon/spec/virtio_balloon.h"

namespace vbsim
{

class GuestMemory;

// A QEMU OnOffAuto property.
enum class OnOffAuto : uint8_t { kOff, kOn, kAuto };

struct BalloonDeviceOptions {
	BalloonProfile profile = full_profile();
	DiscardMode discard_mode = DiscardMode::kMergeRuns;
	// How often the device asks for fresh stats; zero: only when request_stats() is called.
	std::chrono::milliseconds stats_polling_interval{0};
	// Refuse FEATURES_OK when MUST_TELL_HOST is offered but not accepted, which the spec
	// allows (5.5.3.1). Off by default, as no real host does it.
	bool require_must_tell_host = false;
	uint32_t initial_target_wire_pages = 0;
	// Size of the host pages backing guest RAM. Above 4 KiB (2 MiB for THP or hugetlbfs) the
	// device discards a host page only once all of it is ballooned (huge_page_tracker.h).
	uint64_t host_page_bytes = 4096;
	// Faults injected on purpose (fault_plan.h); none by default.
	FaultPlan faults{};
	// A transitional device that also serves legacy drivers (legacy_interface.h); off:
	// modern only. require_must_tell_host never applies to a legacy driver.
	LegacyInterface legacy{};
	// mst's device properties, added to what the profile offers:
	// `device-init-on-inflate` (bool) offers DEVICE_INIT_ON_INFLATE (bit 7);
	// `x-device-init-reported` offers DEVICE_INIT_REPORTED (bit 6): on always, auto when
	// the profile offers PAGE_REPORTING (free-page-reporting=on), off never. QEMU's default
	// is auto; ours is off, so the profiles keep offering what their hosts offer today.
	bool device_init_on_inflate = false;
	OnOffAuto device_init_reported = OnOffAuto::kOff;
	// Discards inhibited from the start (set_discards_inhibited() changes it later).
	bool discards_inhibited = false;
};

// The features a device built with `options` offers: the profile's and the properties'.
uint64_t offered_features(const BalloonDeviceOptions& options);

class BalloonDevice final : private DeviceBackend
{
public:
	// Starts the device thread. Throws std::invalid_argument for an inconsistent profile.
	BalloonDevice(GuestMemory& memory, BalloonDeviceOptions options);
	~BalloonDevice();
	BalloonDevice(const BalloonDevice&) = delete;
	BalloonDevice& operator=(const BalloonDevice&) = delete;

	// The guest reaches the device through this.
	Transport& transport() { return transport_; }
	const Transport& transport() const { return transport_; }
	const BalloonProfile& profile() const { return options_.profile; }
	DiscardMode discard_mode() const { return discarder_.mode(); }

	// ---- Host controls (any thread) --------------------------------------------------
	// Sets num_pages and raises a config-change interrupt (once DRIVER_OK is set).
	void set_target_wire_pages(uint32_t num_pages);
	uint32_t target_wire_pages() const;
	// `actual` as the host takes it: the driver's last complete write. A legacy driver
	// writing it a byte at a time has written it only with its most significant byte.
	uint32_t actual_wire_pages() const { return actual_.load(); }
	// poison_val as the driver wrote it (0 when the config space has no such field).
	uint32_t poison_value() const;
	// QEMU's virtio_balloon_inhibited() (postcopy, background snapshot, a device that needs
	// guest RAM to stay): while true no page is discarded, inflate bitmaps stay clear and
	// reports are returned with used length 0.
	void set_discards_inhibited(bool inhibited) { discarder_.set_inhibited(inhibited); }

	// Returns the held stats buffer on the device thread, asking the driver for new stats.
	void request_stats();
	GuestStats last_stats() const { return stats_.last(); }
	bool wait_for_stats_update(uint64_t update_count, std::chrono::milliseconds timeout) const
	{
		return stats_.wait_for_update(update_count, timeout);
	}

	bool host_owns(uint64_t pfn) const { return ownership_.owns(pfn); }
	uint64_t host_owned_in_run(uint64_t first_pfn, uint64_t count) const
	{
		return ownership_.owned_in_run(first_pfn, count);
	}
	uint64_t host_owned_wire_pages() const { return ownership_.owned_wire_pages(); }

	// The deflate gate. While held, deflate requests are received (counted, pages still
	// host-owned) but not acked; release acks everything held, in order, and lets later
	// requests through. A test closes the gate, deflates, waits until the device holds the
	// request, checks the guest keeps its hands off, then releases: the race window of
	// MUST_TELL_HOST, opened deterministically.
	void hold_deflate_acks();
	void release_deflate_acks();
	size_t held_deflate_acks() const { return deflate_.held_acks(); }
	bool wait_for_held_deflate_acks(size_t count, std::chrono::milliseconds timeout) const
	{
		return deflate_.wait_for_held_acks(count, timeout);
	}

	// ---- Free page hinting and reporting (any thread) ------------------------------------
	// Who hears what the device learns about free guest memory (the migration model).
	// Called on the device thread; set it before the driver binds, or null to stop.
	void set_free_page_events(FreePageEvents* events) { events_.store(events); }
	// Starts a hint round: a fresh command id (2 or more; ids only grow, so none is issued
	// twice) in free_page_hint_cmd_id and a config-change interrupt. Returns the id, or 0
	// when the profile does not offer FREE_PAGE_HINT.
	uint32_t start_hint_round();
	// STOP: the driver stops hinting and keeps the hinted pages.
	void stop_hint_round();
	// DONE: the host no longer needs the hints; the driver may reuse every hinted page.
	void finish_hinting();
	// free_page_hint_cmd_id as the device holds it (0 when the field does not exist).
	uint32_t hint_cmd_id() const;
	// The free_page_vq gate: while held, the device leaves free_page_vq chains in the ring
	// (a slow host), so a round fills the ring and waits; release serves them all. How a
	// test shows that a waiting round blocks nothing else.
	void hold_free_page_queue();
	// Device-thread CPU time spent on free_page_vq so far (thread clock), in ms.
	double free_page_queue_cpu_ms() const { return free_page_queue_cpu_ns_.load() / 1e6; }
	void release_free_page_queue();

	// ---- Observers -------------------------------------------------------------------
	const BalloonDeviceCounters& counters() const { return counters_; }
	const FaultCounters& fault_counters() const { return faults_.counters(); }
	// Transport index of a queue under the features negotiated at the last activation;
	// -1 when that queue does not exist (or the device was never activated).
	int queue_index(vb_queue_kind kind) const;
	// Per-queue transport counters, by kind; zero when the queue does not exist.
	uint64_t kicks_received(vb_queue_kind kind) const;
	uint64_t interrupts_sent(vb_queue_kind kind) const;
	uint64_t interrupt_ns(vb_queue_kind kind) const;
	uint64_t chains_processed(vb_queue_kind kind) const;
	uint64_t ring_rejections(vb_queue_kind kind, RingRejection reason) const;

private:
	// DeviceBackend
	bool accept_features(uint64_t driver_features) override;
	uint16_t queue_max_size(unsigned index, uint64_t driver_features) const override;
	bool config_write_allowed(uint32_t offset, uint32_t len, uint64_t driver_features,
				  uint8_t status) const override;
	void config_written(uint32_t offset, uint32_t len, const uint8_t* config) override;
	void reset() override;
	void activate(uint64_t negotiated_features) override;
	void queue_notified(unsigned index) override;
	void timer_expired() override;

	void drain_queue(unsigned index, vb_queue_kind kind);
	void drain_queue_chains(unsigned index, vb_queue_kind kind);
	void handle_chain(DeviceQueue& queue, vb_queue_kind kind, const DescriptorChain& chain);
	bool negotiated(unsigned bit) const { return (negotiated_ & VB_FEATURE(bit)) != 0; }
	bool send_stats_request();
	void write_hint_cmd_id(uint32_t id);
	// The byte order of the config fields: little-endian for every driver, legacy ones
	// included (BAL-DEV-LEG-03).
	ByteOrder config_byte_order() const;
	// The byte order of stats entries and hint command ids under this activation.
	ByteOrder payload_order() const { return payload_byte_order(options_.legacy, negotiated_); }
	void write_config_field(uint32_t offset, uint32_t value);
	uint32_t read_config_field(uint32_t offset) const;

	BalloonDeviceOptions options_;
	BalloonDeviceCounters counters_;
	HostPageOwnership ownership_;
	PageDiscarder discarder_;
	std::unique_ptr<HugePageTracker> huge_pages_; // null with 4 KiB host pages
	InflateQueue inflate_;
	DeflateQueue deflate_;
	StatsQueue stats_;
	FreePageHintQueue hint_queue_;
	FreePageReportQueue report_queue_;
	std::atomic<FreePageEvents*> events_{nullptr};
	std::atomic<uint32_t> last_cmd_id_{VB_CMD_ID_DONE};
	FaultInjector faults_;

	// Used only inside DeviceBackend callbacks and posted tasks, i.e. under the transport's
	// state lock: the device thread, or the guest thread resetting the device.
	DescriptorChain chain_;
	uint64_t negotiated_ = 0;

	std::atomic<uint64_t> last_negotiated_{0};
	std::atomic<uint32_t> actual_{0};
	std::atomic<bool> hold_free_page_queue_{false};
	std::atomic<uint64_t> free_page_queue_cpu_ns_{0};

	Transport transport_; // last: its device thread stops before the members above go
};

} // namespace vbsim

#endif
