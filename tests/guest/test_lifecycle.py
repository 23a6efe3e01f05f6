# SPDX-License-Identifier: GPL-2.0
"""The balloon under stress and across the device's life, once for the in-tree virtio_balloon
and once for vballoon: data integrity around inflate/deflate cycles, deflates the host really
sees, compaction of ballooned pages, machine reset and hot-unplug while inflated, stats
polling during inflate, and a legacy-only device.

Every test ends with the guest alive, a kernel log free of warnings (WARNING, BUG, Call
Trace, ...) and, where it unloads the driver, every balloon page back in MemTotal.

Suspend to RAM boots the guest from the bzImage: with the suite's direct ELF (PVH) boot, a
guest in S3 that gets `system_wakeup` boots afresh instead of resuming (and with -no-reboot
QEMU exits), while through the bzImage's boot path it resumes.
"""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

import guest_image
import guestvm
from conftest import GUEST_RAM_MIB
from guestvm import (BALLOON_QOM_PATH, BALLOON_ROOT_PORT, BALLOON_TIMEOUT_S, DEFLATE_QUEUE,
                     INFLATE_QUEUE, KERNEL_TROUBLE, MIB, GuestVM, kernel_trouble)

KIB = 1024
PFNS_PER_MESSAGE = 256  # both drivers send at most 256 PFNs per inflate/deflate descriptor
# Slack for free-memory comparisons (see test_balloon.FREE_SLACK_KIB).
FREE_SLACK_KIB = 16 * 1024
# `hog holes`: half of it stays held, the other half is single free pages for the balloon.
HOLED_MIB = 768


def assert_kernel_quiet(vm: GuestVM, since: int) -> None:
    """No warning, oops or stack trace on the console since byte offset `since`."""
    console = vm.console_text(since)
    assert not KERNEL_TROUBLE.search(console), \
        f"the guest kernel complained:\n{kernel_trouble(console)}"


def balloon_to(vm: GuestVM, target: int) -> None:
    vm.qmp.balloon(target)
    vm.qmp.wait_balloon(target, BALLOON_TIMEOUT_S)


# ----------------------------------------------------------------------------------------------
# Data integrity


def wait_for_line(vm: GuestVM, path: str, want: str, timeout: float) -> str:
    """The first line of the guest file `path` that starts with `want`."""
    deadline = time.monotonic() + timeout
    while True:
        lines = vm.sh(f"cat {path}").splitlines()
        for line in lines:
            if line.startswith(want):
                return line
        assert time.monotonic() < deadline, f"{path} never showed {want!r}: {lines}"
        time.sleep(0.2)  # poll interval, bounded by the deadline above


def stop_background(vm: GuestVM, pid_file: str) -> None:
    """SIGTERM to the process whose PID is in `pid_file`, and wait until it is gone."""
    vm.sh(f"kill -TERM $(cat {pid_file}); "
          f"while kill -0 $(cat {pid_file}) 2>/dev/null; do sleep 0.1; done", timeout=60)


class PatternKeeper:
    """`hog keep` in the guest: memory filled with a pattern every byte of which it can check."""

    def __init__(self, vm: GuestVM, mib: int):
        self.vm = vm
        self.checks = 0
        vm.sh(f"hog keep {mib} > /tmp/keep.out 2>&1 & echo $! > /tmp/keep.pid")
        self._wait_line(f"filled {mib}", timeout=180)

    def _wait_line(self, want: str, timeout: float) -> str:
        return wait_for_line(self.vm, "/tmp/keep.out", want, timeout)

    def verify(self) -> None:
        self.checks += 1
        self.vm.sh("kill -USR1 $(cat /tmp/keep.pid)")
        line = self._wait_line(f"verified {self.checks} ", timeout=180)
        assert line == f"verified {self.checks} ok", line

    def finish(self) -> None:
        self.checks += 1
        self.vm.sh("kill -TERM $(cat /tmp/keep.pid)")
        line = self._wait_line(f"verified {self.checks} ", timeout=180)
        assert line == f"verified {self.checks} ok", line
        self.vm.sh("while kill -0 $(cat /tmp/keep.pid) 2>/dev/null; do sleep 0.1; done",
                   timeout=60)


def test_patterned_memory_survives_inflate_deflate_cycles(plain_vm):
    """The guest fills most of its free memory with a pattern it keeps; the balloon then takes
    nearly all the rest and gives it back, three times.  Every byte must still check after
    each inflate and each deflate, and MemTotal must come back exactly."""
    vm = plain_vm
    ram = vm.ram_bytes
    console0 = vm.console_bytes
    total0 = vm.meminfo()["MemTotal"]
    keep_mib = vm.meminfo()["MemAvailable"] * 6 // 10 // KIB
    keeper = PatternKeeper(vm, keep_mib)
    try:
        for _ in range(3):
            free_mib = vm.free_kib() // KIB
            balloon_mib = free_mib - 160  # what a busybox guest needs to keep running
            assert balloon_mib >= 256, f"only {free_mib} MiB free next to the pattern"
            balloon_to(vm, ram - balloon_mib * MIB)
            keeper.verify()
            balloon_to(vm, ram)
            keeper.verify()
        keeper.finish()
    finally:
        vm.run("kill -TERM $(cat /tmp/keep.pid) 2>/dev/null", check=False)
    assert vm.meminfo()["MemTotal"] == total0
    assert_kernel_quiet(vm, console0)


# ----------------------------------------------------------------------------------------------
# Deflate reaches the host


def _used_delta(before: dict, after: dict) -> int:
    return (after["used-idx"] - before["used-idx"]) % 65536


def test_deflate_moves_the_deflate_queues_used_index(plain_vm, driver):
    """Deflating 256 MiB must put at least 256 MiB / 4 KiB / 256 descriptors through the
    deflate queue, as QEMU itself counts them (its used index), and nothing through the
    inflate queue."""
    vm = plain_vm
    ram, size = vm.ram_bytes, 256 * MIB
    console0 = vm.console_bytes
    balloon_to(vm, ram - size)
    if driver.label == "vballoon":
        sent0 = vm.vballoon_counters()["deflate_messages"]
    deflate0 = vm.balloon_queue_status(DEFLATE_QUEUE)
    inflate0 = vm.balloon_queue_status(INFLATE_QUEUE)

    balloon_to(vm, ram)
    deflate1 = vm.balloon_queue_status(DEFLATE_QUEUE)
    inflate1 = vm.balloon_queue_status(INFLATE_QUEUE)
    used = _used_delta(deflate0, deflate1)
    assert used >= size // guestvm.PAGE_BYTES // PFNS_PER_MESSAGE, (deflate0, deflate1)
    assert deflate1["inuse"] == 0, deflate1
    assert _used_delta(inflate0, inflate1) == 0, (inflate0, inflate1)
    if driver.label == "vballoon":
        # Every descriptor the driver sent came back used, and no other.
        assert used == vm.vballoon_counters()["deflate_messages"] - sent0
    assert_kernel_quiet(vm, console0)


# ----------------------------------------------------------------------------------------------
# Compaction


PAGEBLOCK_PAGES = 512  # x86-64: 2 MiB


@pytest.mark.parametrize("driver", ["vballoon"], indirect=True)
def test_whole_blocks_are_split_when_a_deflate_is_refused(plain_vm, driver):
    """vballoon only (debugfs): inflate keeps free pageblocks whole, off balloon compaction's
    list (whole_block_pages, a multiple of a pageblock, most of a balloon taken from a fresh
    guest). A deflate the host accepts gives each block back in one piece, though each of its
    PFN messages covers half a block (whole_blocks_freed counts every block, none split). A
    deflate takes whole blocks first; when the host refuses it, the blocks it took are split
    and held page by page (held_pages), each page counted once: nothing leaves the balloon,
    MemTotal, `Balloon:` and `actual` stay. Once the host accepts again every page comes back,
    whole or held: MemTotal exact, no block and no held page left, no WARN."""
    vm = plain_vm
    ram = vm.ram_bytes
    half_pages = (ram // 2) // guestvm.PAGE_BYTES
    console0 = vm.console_bytes
    total0 = vm.meminfo()["MemTotal"]
    dev = vm.balloon_device()
    refuse = f"/sys/kernel/debug/vballoon/{dev}/refuse_deflates"
    try:
        balloon_to(vm, ram // 2)
        counters = vm.vballoon_counters()
        whole_blocks = counters["whole_block_pages"] // PAGEBLOCK_PAGES
        assert whole_blocks > 0, counters
        balloon_to(vm, ram)
        after = vm.vballoon_counters()
        assert after["whole_block_pages"] == 0, after
        assert after["whole_blocks_split"] == counters["whole_blocks_split"], after
        assert after["whole_blocks_freed"] - counters["whole_blocks_freed"] == whole_blocks, after
        _assert_balloon_accounted(vm, total0, 0)

        balloon_to(vm, ram // 2)
        counters = vm.vballoon_counters()
        whole = counters["whole_block_pages"]
        print(f"{whole} of {half_pages} balloon pages in whole blocks")
        assert counters["balloon_pfns"] == half_pages
        assert whole % PAGEBLOCK_PAGES == 0, counters
        assert whole >= half_pages // 2, counters
        _assert_balloon_accounted(vm, total0, ram // 2)

        vm.sh(f"echo Y > {refuse}")
        failures0 = counters["queue_failures"]
        deflated0 = counters["pages_deflated"]
        vm.qmp.balloon(ram)  # every deflate step is refused from here on
        deadline = time.monotonic() + BALLOON_TIMEOUT_S
        while vm.vballoon_counters()["queue_failures"] == failures0:
            assert time.monotonic() < deadline, "no deflate was refused"
            time.sleep(0.5)  # poll interval of a bounded watch
        counters = vm.vballoon_counters()
        held = counters["held_pages"]
        assert held > 0 and held % PAGEBLOCK_PAGES == 0, counters
        # The held pages came out of whole blocks, which the deflate takes first.
        assert counters["whole_block_pages"] == whole - held, counters
        assert counters["balloon_pfns"] == half_pages
        assert counters["pages_deflated"] == deflated0
        _assert_balloon_accounted(vm, total0, ram // 2)
        assert_kernel_quiet(vm, console0)

        vm.sh(f"echo N > {refuse}")
        vm.qmp.wait_balloon(ram, BALLOON_TIMEOUT_S)
        counters = vm.vballoon_counters()
        assert counters["whole_block_pages"] == 0, counters
        assert counters["held_pages"] == 0, counters
        assert counters["balloon_pfns"] == 0
        _assert_balloon_accounted(vm, total0, 0)
        assert_kernel_quiet(vm, console0)
    finally:
        if vm.driver is not None:
            vm.run(f"echo N > {refuse}", check=False)


def _page_at_a_time(drv: guestvm.Driver) -> guestvm.Driver:
    if drv.module != "vballoon":
        return drv  # virtio_balloon always allocates a page at a time
    params = " ".join(p for p in drv.params.split() if not p.startswith("max_chunk_order="))
    return dataclasses.replace(drv, params=f"{params} max_chunk_order=0".strip())


def _assert_balloon_accounted(vm, total0: int, ballooned_bytes: int) -> None:
    """MemTotal, the kernel's own balloon count (`Balloon:` in /proc/meminfo, from 6.15; on
    7.x mm keeps it through every enqueue, dequeue and migration) and the host's `actual`
    all say the same balloon."""
    # NR_BALLOON_PAGES is a node counter with per-CPU deltas that /proc/meminfo does not
    # fold in (up to the stat threshold per CPU): fold them first.
    vm.sh("if [ -e /proc/sys/vm/stat_refresh ]; then echo 1 > /proc/sys/vm/stat_refresh; fi")
    meminfo = vm.meminfo()
    assert meminfo["MemTotal"] == total0 - ballooned_bytes // KIB
    if "Balloon" in meminfo:
        assert meminfo["Balloon"] == ballooned_bytes // KIB, meminfo["Balloon"]
    assert vm.qmp.balloon_actual() == vm.ram_bytes - ballooned_bytes


# Compaction passes over the inflated balloon: each moves pages the last one left behind,
# and the accounting must balance after every one (on 7.x mm does the balloon list's part of
# each move; a driver that still did it too would double-insert and underflow a refcount).
COMPACTION_PASSES = 3


def test_compaction_migrates_balloon_pages_and_accounting_balances(plain_vm, driver):
    """With a page-at-a-time balloon of 1 GiB whose pages sit in half-free blocks,
    /proc/sys/vm/compact_memory run in a loop must move some ballooned pages (balloon_migrate
    grows, and for vballoon its own migration count with it); after every pass MemTotal,
    `Balloon:` (where the kernel has it) and the host's `actual` say the same balloon, and
    after a full deflate and an unload, MemTotal and free memory are back, the host sees an
    empty balloon and the kernel printed no WARN or BUG."""
    vm = plain_vm
    ram = vm.ram_bytes
    console0 = vm.console_bytes
    vm.unload_driver(driver.drv)
    drv = _page_at_a_time(driver.drv)
    vm.load_driver(drv)
    total0 = vm.meminfo()["MemTotal"]
    free0 = vm.free_kib()
    try:
        # Compaction moves pages only out of blocks it can empty into blocks that are
        # partly free; a balloon taken from memory that is free in whole blocks (as the
        # guest's memory is after a block-wise deflate) is already compact, and compaction
        # rightly moves nothing. So the balloon's pages are put between pages a process
        # holds, and the process then exits: the balloon's blocks are left half free.
        vm.sh(f"hog holes {HOLED_MIB} > /tmp/holes.out 2>&1 & echo $! > /tmp/holes.pid")
        wait_for_line(vm, "/tmp/holes.out", f"holed {HOLED_MIB}", timeout=180)
        balloon_to(vm, ram // 2)
        stop_background(vm, "/tmp/holes.pid")
        migrated0 = vm.vmstat()["balloon_migrate"]
        if drv.module == "vballoon":
            ours0 = vm.vballoon_counters()["migrations"]
        for _ in range(COMPACTION_PASSES):
            vm.sh("echo 1 > /proc/sys/vm/compact_memory", timeout=180)
            _assert_balloon_accounted(vm, total0, ram // 2)
            if drv.module == "vballoon":
                counters = vm.vballoon_counters()
                # Only our driver migrates balloon pages in this guest.
                assert counters["migrations"] - ours0 == \
                    vm.vmstat()["balloon_migrate"] - migrated0
                assert counters["balloon_pfns"] == (ram // 2) // guestvm.PAGE_BYTES
            assert_kernel_quiet(vm, console0)
        migrated = vm.vmstat()["balloon_migrate"] - migrated0
        print(f"{migrated} balloon pages migrated in {COMPACTION_PASSES} compaction passes")
        assert migrated > 0, "compaction moved no balloon page"

        balloon_to(vm, ram)
        _assert_balloon_accounted(vm, total0, 0)
        if drv.module == "vballoon":
            assert vm.vballoon_counters()["balloon_pfns"] == 0
    finally:
        vm.run("kill -TERM $(cat /tmp/holes.pid) 2>/dev/null", check=False)
        vm.unload_driver(drv)
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.meminfo().get("Balloon", 0) == 0
    assert vm.free_kib() >= free0 - FREE_SLACK_KIB
    assert vm.qmp.balloon_actual() == ram
    assert_kernel_quiet(vm, console0)


# Deflates the host refuses (debugfs refuse_deflates) while compaction runs: 30 s at one retry
# per 200 ms is about 150 refused steps of 1024 pages each. A full compaction pass over the
# 2 GiB guest takes 10-20 s under TCG here, but over 30 s on a slower CI machine (each of the
# balloon's isolated pages fails its migration and is retried), so the watch goes on past
# 30 s until one pass has ended, within a bound that says the pass hung.
REFUSED_DEFLATE_S = 30
COMPACTION_PASS_BOUND_S = 300
MIN_REFUSED_STEPS = 50
MIN_COMPACTION_PASSES = 1


@pytest.mark.parametrize("driver", ["vballoon"], indirect=True)
def test_refused_deflates_under_compaction_stay_off_the_list(plain_vm, driver):
    """vballoon only (the fault is injected through its debugfs): the host refuses every
    deflate while /proc/sys/vm/compact_memory runs in a loop over a page-at-a-time balloon
    whose pages sit in half-free blocks.  A refused step's pages were put back with
    balloon_page_list_enqueue(), whose BUG_ON(!trylock_page()) fires when compaction holds
    such a page's lock; now they are held off the balloon list (debugfs held_pages), retried
    first, and the balloon, MemTotal and the host's `actual` do not move.  Unloading while
    deflates are still refused resets the device: every page comes back, no oops, no WARN."""
    vm = plain_vm
    ram = vm.ram_bytes
    half_pages = (ram // 2) // guestvm.PAGE_BYTES
    console0 = vm.console_bytes
    vm.unload_driver(driver.drv)
    drv = _page_at_a_time(driver.drv)
    vm.load_driver(drv)
    total0 = vm.meminfo()["MemTotal"]
    free0 = vm.free_kib()
    dev = vm.balloon_device()
    refuse = f"/sys/kernel/debug/vballoon/{dev}/refuse_deflates"
    try:
        vm.sh(f"hog holes {HOLED_MIB} > /tmp/holes.out 2>&1 & echo $! > /tmp/holes.pid")
        wait_for_line(vm, "/tmp/holes.out", f"holed {HOLED_MIB}", timeout=180)
        balloon_to(vm, ram // 2)
        stop_background(vm, "/tmp/holes.pid")
        vmstat0 = vm.vmstat()
        migrated0 = vmstat0["balloon_migrate"]
        isolated0 = vmstat0["compact_isolated"]
        failures0 = vm.vballoon_counters()["queue_failures"]

        vm.sh(f"echo Y > {refuse}")
        vm.sh("rm -f /tmp/compact.stop; "
              "(n=0; while [ ! -e /tmp/compact.stop ]; do echo 1 > /proc/sys/vm/compact_memory; "
              "n=$((n+1)); echo $n > /tmp/compact.n; done) > /dev/null 2>&1 & "
              "echo $! > /tmp/compact.pid")
        vm.qmp.balloon(ram)  # every deflate step is refused from here on
        start = time.monotonic()
        passes_seen = 0

        def compaction_passes() -> int:
            return int(vm.sh("cat /tmp/compact.n 2>/dev/null || true").strip() or 0)

        while True:
            counters = vm.vballoon_counters()
            assert counters["balloon_pfns"] == half_pages
            assert counters["held_pages"] in (0, 1024), counters
            assert_kernel_quiet(vm, console0)
            elapsed = time.monotonic() - start
            if elapsed >= COMPACTION_PASS_BOUND_S:
                break
            # The counter file is rewritten by every pass (truncated, then written): a read
            # between the two sees nothing, so the highest count read is the one kept.
            passes_seen = max(passes_seen, compaction_passes())
            if elapsed >= REFUSED_DEFLATE_S and passes_seen >= MIN_COMPACTION_PASSES:
                break
            time.sleep(1)  # poll interval of a bounded watch
        counters = vm.vballoon_counters()
        passes = max(passes_seen, compaction_passes())
        refused = counters["queue_failures"] - failures0
        print(f"{refused} refused deflate steps and {passes} compaction passes in "
              f"{time.monotonic() - start:.0f} s")
        assert refused >= MIN_REFUSED_STEPS, f"only {refused} refused deflate steps"
        assert passes >= MIN_COMPACTION_PASSES, \
            f"only {passes} compaction passes in {time.monotonic() - start:.0f} s"
        # One step's worth (1024 pages) is held apart, asked for again at every retry;
        # the rest stays on the list, where compaction still moves pages.
        assert counters["held_pages"] == 1024, counters
        assert counters["balloon_pfns"] == half_pages
        assert counters["pages_deflated"] == 0
        # Compaction isolates (and locks) balloon pages all along; their migrations fail,
        # since the host refuses the old page's deflate too, and they go back on the list.
        vmstat = vm.vmstat()
        assert vmstat["compact_isolated"] > isolated0, "compaction isolated nothing"
        assert vmstat["balloon_migrate"] == migrated0
        # The held pages are still ballooned: `Balloon:` (where the kernel has it) counts
        # them although they are off the balloon list.
        _assert_balloon_accounted(vm, total0, ram // 2)

        # Remove with deflates still refused: release_all() gets nothing back, the reset
        # gives back the list and the held pages, compaction still running.
        vm.unload_driver(drv)
        vm.sh("touch /tmp/compact.stop; "
              "while kill -0 $(cat /tmp/compact.pid) 2>/dev/null; do sleep 0.1; done", timeout=180)
    finally:
        vm.run("touch /tmp/compact.stop; kill -TERM $(cat /tmp/holes.pid) 2>/dev/null",
               check=False)
        if vm.driver is not None:
            vm.run(f"echo N > {refuse}", check=False)
            vm.unload_driver(drv)
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.free_kib() >= free0 - FREE_SLACK_KIB
    # The reset left QEMU's `actual` where the refused deflates left it; the driver bound
    # again writes the empty balloon's.
    vm.load_driver(driver.drv)
    vm.qmp.wait_balloon(ram, BALLOON_TIMEOUT_S)
    assert vm.meminfo()["MemTotal"] == total0
    assert_kernel_quiet(vm, console0)


# ----------------------------------------------------------------------------------------------
# Statistics while inflating


def test_stats_polled_every_second_during_inflate(plain_vm):
    """Stats polling at 1 s while 1 GiB inflates: the inflate completes, reports keep coming
    (each one newer than the last), and the first report after it shows the smaller guest."""
    vm, q = plain_vm, plain_vm.qmp
    ram = vm.ram_bytes
    console0 = vm.console_bytes
    total0 = vm.meminfo()["MemTotal"]
    try:
        q.qom_set(BALLOON_QOM_PATH, "guest-stats-polling-interval", 1)
        first = q.qom_get(BALLOON_QOM_PATH, "guest-stats")["last-update"]
        q.balloon(ram - 1024 * MIB)
        updates = {first}
        deadline = time.monotonic() + BALLOON_TIMEOUT_S
        while q.balloon_actual() != ram - 1024 * MIB:
            assert time.monotonic() < deadline, "the inflate did not finish"
            updates.add(q.qom_get(BALLOON_QOM_PATH, "guest-stats")["last-update"])
            time.sleep(0.1)  # poll interval, bounded by the deadline above
        done = time.time()
        # Three more reports after the inflate, each with a later timestamp.
        deadline = time.monotonic() + 30
        while len([u for u in updates if u > done]) < 3:
            assert time.monotonic() < deadline, f"stats stopped: updates {sorted(updates)}"
            updates.add(q.qom_get(BALLOON_QOM_PATH, "guest-stats")["last-update"])
            time.sleep(0.1)  # poll interval, bounded by the deadline above
        stats = q.qom_get(BALLOON_QOM_PATH, "guest-stats")["stats"]
        # Without deflate-on-oom, both drivers take balloon pages out of totalram.
        assert stats["stat-total-memory"] == (total0 - 1024 * MIB // KIB) * KIB
        balloon_to(vm, ram)
    finally:
        q.qom_set(BALLOON_QOM_PATH, "guest-stats-polling-interval", 0)
    assert vm.meminfo()["MemTotal"] == total0
    assert_kernel_quiet(vm, console0)


# ----------------------------------------------------------------------------------------------
# Machine reset and hot-unplug while inflated


def test_system_reset_while_inflated(lifecycle_vm, driver):
    """A machine reset with half the guest in the balloon: the guest boots again with all its
    memory, the driver binds again and follows the host's (unchanged) target, and deflates."""
    vm, q = lifecycle_vm, lifecycle_vm.qmp
    ram = vm.ram_bytes
    total0 = vm.meminfo()["MemTotal"]
    balloon_to(vm, ram // 2)

    # -no-reboot turns a reset into an exit: let this one reboot.
    q.execute("set-action", {"reboot": "reset"})
    try:
        q.execute("system_reset")
        vm.wait_rebooted()
    finally:
        q.execute("set-action", {"reboot": "shutdown"})
    console0 = vm.console_bytes
    # A fresh kernel: no balloon driver, every page its own.
    assert driver.drv.module not in vm.loaded_modules()
    assert vm.meminfo()["MemTotal"] == total0
    vm.load_driver(driver.drv)
    q.wait_balloon(ram // 2, BALLOON_TIMEOUT_S)
    assert vm.meminfo()["MemTotal"] == total0 - (ram // 2) // KIB
    balloon_to(vm, ram)
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.sh("echo alive").strip() == "alive"
    assert_kernel_quiet(vm, console0)


def test_device_del_while_inflated(lifecycle_vm, driver):
    """Hot-unplug the balloon with half the guest in it: the driver's remove gives every page
    back, the guest keeps running, and a balloon plugged in again binds and works."""
    vm, q = lifecycle_vm, lifecycle_vm.qmp
    ram = vm.ram_bytes
    console0 = vm.console_bytes
    total0 = vm.meminfo()["MemTotal"]
    free0 = vm.free_kib()
    balloon_to(vm, ram // 2)
    events0 = len(q.events)

    q.execute("device_del", {"id": "balloon0"})
    # The guest's pciehp waits 5 s after the attention button before it powers the slot off.
    q.wait_event("DEVICE_DELETED", timeout=60, start=events0,
                 predicate=lambda e: e["data"].get("device") == "balloon0")
    out = vm.sh("for d in /sys/bus/virtio/devices/*; do cat $d/device; done 2>/dev/null; true")
    assert "0x0005" not in out.split(), out
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.free_kib() >= free0 - FREE_SLACK_KIB
    assert driver.drv.module in vm.loaded_modules()

    q.execute("device_add", {"driver": "virtio-balloon-pci", "id": "balloon0",
                             "bus": BALLOON_ROOT_PORT})
    vm.wait_bound(driver.drv, 60)
    balloon_to(vm, ram - 256 * MIB)
    assert vm.meminfo()["MemTotal"] == total0 - 256 * MIB // KIB
    vm.unload_driver(driver.drv)
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.sh("echo alive").strip() == "alive"
    assert_kernel_quiet(vm, console0)


# ----------------------------------------------------------------------------------------------
# Suspend to RAM


def _wait_run_state(q, want: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while (state := q.execute("query-status")["status"]) != want:
        assert time.monotonic() < deadline, f"QEMU stayed {state!r}, waiting for {want!r}"
        time.sleep(0.1)  # poll interval, bounded by the deadline above


def _s3_guest(driver, name: str) -> GuestVM:
    """A guest booted from the bzImage, where S3 resumes (see the module docstring)."""
    bzimage = os.path.join(guest_image.unpack_kernel(driver.image.kver, guest_image.work_dir()),
                           "boot", f"vmlinuz-{driver.image.kver}")
    img = dataclasses.replace(driver.image, vmlinux=bzimage)
    vm = GuestVM(img, name=f"{driver.label}-{name}", ram_mib=GUEST_RAM_MIB,
                 append="no_console_suspend")
    return vm.start()


def _suspend_and_wake(vm: GuestVM, since: int) -> None:
    q = vm.qmp
    assert "deep" in vm.sh("cat /sys/power/mem_sleep"), "the guest offers no S3"
    # Waking goes through a machine reset, which -no-reboot would turn into an exit.
    q.execute("set-action", {"reboot": "reset"})
    vm.sh("echo deep > /sys/power/mem_sleep; "
          "(sleep 1; echo mem > /sys/power/state) > /tmp/s3.out 2>&1 &")
    _wait_run_state(q, "suspended", 60)
    q.execute("system_wakeup")
    _wait_run_state(q, "running", 30)
    vm.resync()
    assert "Waking up from system sleep state S3" in vm.console_text(since), vm.console_tail()


def test_suspend_to_ram_while_inflated(driver):
    """S3 with half the guest in the balloon, then wake-up.  The driver's freeze gives every
    page back and resets the device, its restore brings the queues back and inflates to the
    host's target again; the guest then deflates and unloads the driver with every page back.
    """
    vm = _s3_guest(driver, "s3")
    try:
        q = vm.qmp
        ram = vm.ram_bytes
        console0 = vm.console_bytes
        vm.load_driver(driver.drv)
        total0 = vm.meminfo()["MemTotal"]
        balloon_to(vm, ram // 2)
        _suspend_and_wake(vm, console0)
        assert vm.sh("cat /sys/power/suspend_stats/success").strip() == "1", \
            vm.sh("cat /tmp/s3.out; cat /sys/power/suspend_stats/last_failed_step")

        # Restored: the driver follows the unchanged target again.
        q.wait_balloon(ram // 2, BALLOON_TIMEOUT_S)
        assert vm.meminfo()["MemTotal"] == total0 - (ram // 2) // KIB
        balloon_to(vm, ram)
        assert vm.meminfo()["MemTotal"] == total0
        vm.unload_driver(driver.drv)
        assert vm.meminfo()["MemTotal"] == total0
        assert vm.sh("echo alive").strip() == "alive"
        assert_kernel_quiet(vm, console0)
    finally:
        vm.stop()


VIRTIO_CONFIG_S_FAILED = 0x80


@pytest.mark.parametrize("driver", ["vballoon"], indirect=True)
def test_failed_restore_leaves_nothing_that_inflates(driver):
    """vballoon only (the fault is injected through its debugfs): a restore that fails with
    the queues already up leaves the device failed, the balloon empty and no work behind: a
    new target inflates nothing and warns nothing, and the driver still unloads cleanly."""
    vm = _s3_guest(driver, "failed-restore")
    try:
        q = vm.qmp
        ram = vm.ram_bytes
        console0 = vm.console_bytes
        vm.load_driver(driver.drv)
        total0 = vm.meminfo()["MemTotal"]
        balloon_to(vm, ram // 2)
        dev = vm.balloon_device()
        vm.sh(f"echo Y > /sys/kernel/debug/vballoon/{dev}/fail_next_restore")
        _suspend_and_wake(vm, console0)
        assert "restore fails as asked" in vm.console_text(console0)
        status = int(vm.sh(f"cat /sys/bus/virtio/devices/{dev}/status").strip(), 16)
        assert status & VIRTIO_CONFIG_S_FAILED, f"device status {status:#x}"
        # Freeze gave every page back; nothing came back into the balloon.
        assert vm.meminfo()["MemTotal"] == total0
        inflated0 = vm.vballoon_counters()["pages_inflated"]
        assert vm.vballoon_counters()["balloon_pfns"] == 0

        # A new target: no work item may run against the missing queues.  Watch for 3 s.
        q.balloon(ram - 256 * MIB)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            assert vm.vballoon_counters()["pages_inflated"] == inflated0
            assert vm.meminfo()["MemTotal"] == total0
            time.sleep(0.2)  # poll interval of a bounded watch
        vm.unload_driver(driver.drv)
        assert vm.meminfo()["MemTotal"] == total0
        assert vm.sh("echo alive").strip() == "alive"
        assert_kernel_quiet(vm, console0)
    finally:
        vm.stop()


# ----------------------------------------------------------------------------------------------
# A legacy-only device


def test_legacy_device(driver):
    """A legacy-only balloon (disable-modern=on).  vballoon refuses it with a clear message
    and binds nothing (spec/requirements.md, legacy rows); virtio_balloon drives it."""
    vm = GuestVM(driver.image, name=f"{driver.label}-legacy", ram_mib=GUEST_RAM_MIB,
                 balloon_props={"disable-modern": "on", "disable-legacy": "off"})
    vm.start()
    try:
        console0 = vm.console_bytes
        features = None
        if driver.label == "vballoon":
            vm.sh(" && ".join(f"insmod {p}" for p in driver.drv.insmod))
            deadline = time.monotonic() + 30
            while "legacy virtio-balloon device" not in vm.console_text(console0):
                assert time.monotonic() < deadline, vm.console_tail()
                time.sleep(0.1)  # poll interval, bounded by the deadline above
            assert vm.bound_driver() is None
            assert "vballoon" in vm.loaded_modules()
            vm.unload_driver(driver.drv)
        else:
            vm.load_driver(driver.drv)
            features = vm.negotiated_features()
            assert not features >> 32 & 1, f"features {features:#x}: a modern device"
            balloon_to(vm, vm.ram_bytes - 128 * MIB)
            balloon_to(vm, vm.ram_bytes)
        assert vm.sh("echo alive").strip() == "alive"
        console = vm.console_text(console0)
        assert not KERNEL_TROUBLE.search(console), kernel_trouble(console)
    finally:
        vm.stop()


@pytest.fixture(autouse=True)
def _note_timing(request):
    """Wall time per test, printed with -v -s; part of the suite's CI budget."""
    t0 = time.monotonic()
    yield
    print(f"\n[{request.node.name}] {time.monotonic() - t0:.1f} s")
