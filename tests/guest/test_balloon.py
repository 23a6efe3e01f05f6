# SPDX-License-Identifier: GPL-2.0
"""The balloon in a real guest, run once for the in-tree virtio_balloon and once for vballoon.

Guest: Debian's 6.1 kernel under QEMU 7.2 (TCG), 2 GiB, booted with init_on_alloc=0.
Sizes below: QMP `balloon` takes the guest's target size; query-balloon's `actual` is RAM
minus the balloon.  /proc/meminfo values are in KiB.
"""

from __future__ import annotations

import time

import pytest

from guestvm import BALLOON_QOM_PATH, BALLOON_TIMEOUT_S, GIB, MIB
from qmp import QMPError

KIB = 1024

# Feature bits (virtio spec 5.5.3, 6).
VIRTIO_BALLOON_F_STATS_VQ = 1
VIRTIO_BALLOON_F_DEFLATE_ON_OOM = 2
VIRTIO_F_VERSION_1 = 32

# Slack for "free memory came back" comparisons made with free + per-CPU lists (see
# GuestVM.free_kib): an idle guest moves by a few hundred KiB between two reads; the
# commands we run (fork/exec of busybox, page tables, slab) take a few MiB at most.
FREE_SLACK_KIB = 16 * 1024


def _bit(features: int, bit: int) -> bool:
    return bool(features >> bit & 1)


# ----------------------------------------------------------------------------------------------
# Binding


def test_driver_binds_to_balloon_device(plain_vm, driver):
    vm = plain_vm
    dev = vm.balloon_device()
    assert vm.bound_driver() == driver.drv.sysfs_name
    vm.sh(f"test -e /sys/bus/virtio/drivers/{driver.drv.sysfs_name}/{dev}")
    assert driver.drv.module in vm.loaded_modules()
    features = vm.negotiated_features()
    assert _bit(features, VIRTIO_F_VERSION_1), f"features {features:#x}: not a modern device"
    # QEMU always offers the stats queue; a driver with every standard feature accepts it.
    assert _bit(features, VIRTIO_BALLOON_F_STATS_VQ), f"features {features:#x}"
    # Not offered on this device: a driver must not claim it.
    assert not _bit(features, VIRTIO_BALLOON_F_DEFLATE_ON_OOM), f"features {features:#x}"


def test_driver_accepts_deflate_on_oom(oom_vm, driver):
    assert oom_vm.bound_driver() == driver.drv.sysfs_name
    features = oom_vm.negotiated_features()
    assert _bit(features, VIRTIO_BALLOON_F_DEFLATE_ON_OOM), f"features {features:#x}"


# ----------------------------------------------------------------------------------------------
# Inflate and deflate


def test_inflate_to_half_then_deflate(plain_vm):
    vm, q = plain_vm, plain_vm.qmp
    ram = vm.ram_bytes
    total0 = vm.meminfo()["MemTotal"]
    free0 = vm.free_kib()

    q.balloon(ram // 2)
    q.wait_balloon(ram // 2, BALLOON_TIMEOUT_S)
    total1 = vm.meminfo()["MemTotal"]
    free1 = vm.free_kib()
    # Each balloon page leaves the kernel's managed pages: MemTotal drops by exactly the
    # balloon, as the in-tree driver does with adjust_managed_page_count().
    assert total0 - total1 == (ram - ram // 2) // KIB
    # ... and the pages came out of free memory.
    assert abs((free0 - free1) - (ram // 2) // KIB) <= FREE_SLACK_KIB, (free0, free1)

    q.balloon(ram)
    q.wait_balloon(ram, BALLOON_TIMEOUT_S)
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.free_kib() >= free0 - FREE_SLACK_KIB


def test_target_above_ram_deflates_everything(plain_vm):
    vm, q = plain_vm, plain_vm.qmp
    ram = vm.ram_bytes
    total0 = vm.meminfo()["MemTotal"]
    q.balloon(ram // 2)
    q.wait_balloon(ram // 2, BALLOON_TIMEOUT_S)
    # QEMU clamps a target above RAM to RAM: the balloon must empty completely.
    q.balloon(2 * ram)
    q.wait_balloon(ram, BALLOON_TIMEOUT_S)
    assert vm.sh("echo alive").strip() == "alive"
    assert vm.meminfo()["MemTotal"] == total0


def test_target_zero_leaves_guest_alive(oom_vm):
    """Target 0: QEMU 7.2 refuses `balloon 0` itself ("expects a size"), so the smallest
    target that reaches a driver is 1 byte, i.e. every page but one.  With deflate-on-oom the
    driver must inflate as far as the guest allows and the guest must go on answering.
    (Without deflate-on-oom nothing stops a balloon from starving a guest whose only process
    is init: the in-tree driver then panics it, "System is deadlocked on memory".)"""
    vm, q = oom_vm, oom_vm.qmp
    ram = vm.ram_bytes
    with pytest.raises(QMPError, match="size"):
        q.balloon(0)
    assert q.balloon_actual() == ram

    q.balloon(1)
    # The driver inflates until allocations fail, then keeps retrying.  It must take most of
    # the guest (the in-tree driver leaves ~170 MiB of 2 GiB) ...
    deadline = time.monotonic() + BALLOON_TIMEOUT_S
    while (actual := q.balloon_actual()) > ram // 2:
        assert time.monotonic() < deadline, (f"balloon took only {(ram - actual) // MIB} of "
                                             f"{ram // MIB} MiB in {BALLOON_TIMEOUT_S} s")
        time.sleep(0.05)  # poll interval, bounded by the deadline above
    # ... and the commands below should meet it at its limit: wait until it stops growing
    # (2 s without change), but at most 20 s, since a driver may keep nibbling at pages that
    # come free.  The guest must answer either way.
    _wait_balloon_settled(q, quiet_s=2.0, timeout=20.0)
    assert vm.run("echo alive", timeout=60).output.strip() == "alive"
    assert vm.run("cat /proc/meminfo", timeout=60).status == 0

    q.balloon(ram)
    q.wait_balloon(ram, BALLOON_TIMEOUT_S)
    assert vm.sh("echo alive").strip() == "alive"


def _wait_balloon_settled(q, quiet_s: float, timeout: float, interval: float = 0.05) -> bool:
    """Poll query-balloon until `actual` has not changed for quiet_s seconds (True), or
    give up after timeout seconds (False)."""
    deadline = time.monotonic() + timeout
    last, since = q.balloon_actual(), time.monotonic()
    while True:
        time.sleep(interval)  # poll interval, bounded by the deadline below
        now = time.monotonic()
        a = q.balloon_actual()
        if a != last:
            last, since = a, now
        elif now - since >= quiet_s:
            return True
        if now > deadline:
            return False


# ----------------------------------------------------------------------------------------------
# Host memory


def test_qemu_rss_drops_when_balloon_inflates(plain_vm):
    """The guest dirties nearly all its free memory and frees it; inflating 1 GiB must then
    hand QEMU's backing of those pages back (QEMU discards each balloon page)."""
    vm, q = plain_vm, plain_vm.qmp
    ram, size = vm.ram_bytes, GIB
    mi = vm.meminfo()
    dirty_mib = mi["MemAvailable"] // 1024 - 128
    vm.sh(f"hog {dirty_mib}", timeout=120)
    rss0 = vm.qemu_rss_bytes()
    assert rss0 >= dirty_mib * MIB, "the guest's dirtied memory is not resident in QEMU"

    q.balloon(ram - size)
    q.wait_balloon(ram - size, BALLOON_TIMEOUT_S)
    rss1 = vm.qemu_rss_bytes()
    # Balloon pages come from free memory; of that, at most (free before hog - hog) was never
    # dirtied, so the rest of the balloon was resident in QEMU and must have been dropped.
    # 32 MiB for QEMU's own growth meanwhile (translated code, buffers).
    never_dirtied = max(mi["MemFree"] * KIB - dirty_mib * MIB, 0)
    expected_min = size - never_dirtied - 32 * MIB
    assert rss0 - rss1 >= expected_min, \
        f"QEMU RSS {rss0 // MIB} -> {rss1 // MIB} MiB, expected a drop of >= {expected_min // MIB}"


# ----------------------------------------------------------------------------------------------
# Statistics

# QEMU reports a stat the guest never sent as -1, which QOM prints as an unsigned 64-bit value.
STAT_ABSENT = (-1, (1 << 64) - 1)

STATS_REQUIRED = ("stat-swap-in", "stat-swap-out", "stat-major-faults", "stat-minor-faults",
                  "stat-free-memory", "stat-total-memory", "stat-available-memory",
                  "stat-disk-caches")


def _wait_stats_update(q, after: int, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        s = q.qom_get(BALLOON_QOM_PATH, "guest-stats")
        if s["last-update"] > after:
            return s
        if time.monotonic() > deadline:
            raise TimeoutError(f"guest-stats not updated after {timeout} s: {s}")
        time.sleep(0.1)  # poll interval, bounded by the deadline above


def test_guest_stats_present_and_plausible(plain_vm):
    vm, q = plain_vm, plain_vm.qmp
    ram = vm.ram_bytes
    try:
        q.qom_set(BALLOON_QOM_PATH, "guest-stats-polling-interval", 2)
        first = q.qom_get(BALLOON_QOM_PATH, "guest-stats")["last-update"]
        s = _wait_stats_update(q, first, timeout=20)
        mi = vm.meminfo()
        st = s["stats"]
        missing = [k for k in STATS_REQUIRED if st.get(k, -1) in STAT_ABSENT]
        assert not missing, f"stats not reported: {missing} in {st}"
        total = st["stat-total-memory"]
        # Total is totalram: exactly MemTotal while the balloon is empty.
        assert total == mi["MemTotal"] * KIB
        assert 0.9 * ram <= total <= ram
        assert 0 < st["stat-free-memory"] <= total
        assert 0 < st["stat-available-memory"] <= total
        assert 0 <= st["stat-disk-caches"] <= total
        # Sampled at another moment than meminfo: per-CPU lists can move MemFree by ~2x27 MiB.
        assert abs(st["stat-free-memory"] - mi["MemFree"] * KIB) <= 64 * MIB
        assert abs(st["stat-available-memory"] - mi["MemAvailable"] * KIB) <= 64 * MIB
        # The guest has no swap device.
        assert st["stat-swap-in"] == 0 and st["stat-swap-out"] == 0
        for k in ("stat-htlb-pgalloc", "stat-htlb-pgfail"):  # optional; no hugetlbfs in use
            assert st.get(k, -1) in STAT_ABSENT + (0,), f"{k} = {st[k]}"
        assert st["stat-minor-faults"] > 0 and st["stat-major-faults"] >= 0

        # Fault 64 MiB in 4 KiB pages: the next report must count every one of them.
        vm.sh("hog 64 nohuge")
        done = q.qom_get(BALLOON_QOM_PATH, "guest-stats")["last-update"]
        s2 = _wait_stats_update(q, done, timeout=20)["stats"]
        assert s2["stat-minor-faults"] - st["stat-minor-faults"] >= 64 * MIB // 4096
    finally:
        q.qom_set(BALLOON_QOM_PATH, "guest-stats-polling-interval", 0)


# ----------------------------------------------------------------------------------------------
# Deflate on OOM


def test_deflate_on_oom_lets_allocation_succeed(oom_vm):
    """Leave the guest ~400 MiB, then allocate 256 MiB more than everything it could free
    without the balloon: the process must survive and the balloon must give back at least
    those 256 MiB (nothing else can provide them: there is no swap)."""
    vm, q = oom_vm, oom_vm.qmp
    target = 400 * MIB
    q.balloon(target)
    q.wait_balloon(target, BALLOON_TIMEOUT_S)
    mi = vm.meminfo()
    without_balloon_mib = (mi["MemFree"] + mi["Cached"] + mi["Buffers"]
                           + mi["SReclaimable"]) // 1024
    beyond_mib = 256
    events0 = len(q.events)

    # Always overcommit, so the test is about page allocation (the OOM path) and not about
    # the mmap-time heuristic, which compares the request with MemTotal: a driver that takes
    # balloon pages out of MemTotal would otherwise see the mmap itself refused.
    vm.sh("echo 1 > /proc/sys/vm/overcommit_memory")
    try:
        r = vm.run(f"hog {without_balloon_mib + beyond_mib}", timeout=300, check=False)
    finally:
        vm.sh("echo 0 > /proc/sys/vm/overcommit_memory")
    assert r.status == 0, f"the allocating process did not survive (status {r.status}):\n" \
                          f"{r.output}\nconsole:\n{vm.console_tail()}"
    assert f"touched {without_balloon_mib + beyond_mib}" in r.output

    actual = q.balloon_actual()
    assert actual - target >= beyond_mib * MIB, \
        f"balloon gave back only {(actual - target) // MIB} MiB"
    # The host hears about it: a BALLOON_CHANGE above the target (QEMU sends at most one
    # such event per second, so allow a few seconds).
    q.wait_event("BALLOON_CHANGE", timeout=5, start=events0,
                 predicate=lambda e: e["data"]["actual"] > target)
    assert vm.sh("echo alive").strip() == "alive"


# ----------------------------------------------------------------------------------------------
# Unloading


def test_rmmod_while_inflated_returns_every_page(plain_vm, driver):
    vm, q = plain_vm, plain_vm.qmp
    ram = vm.ram_bytes
    total0 = vm.meminfo()["MemTotal"]
    free0 = vm.free_kib()
    q.balloon(ram // 2)
    q.wait_balloon(ram // 2, BALLOON_TIMEOUT_S)

    vm.unload_driver(driver.drv)
    assert driver.drv.module not in vm.loaded_modules()
    assert vm.bound_driver() is None
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.free_kib() >= free0 - FREE_SLACK_KIB
    # The driver told the device before letting go: the host sees an empty balloon.
    assert q.balloon_actual() == ram


def _leak_snapshot(vm) -> dict:
    # What waits for an RCU grace period (the task_structs of the shell's own exited
    # processes among it) is freed before meminfo is read.
    vm.sh("sync; echo 3 > /proc/sys/vm/drop_caches; hog rcu-settle > /dev/null")
    mi = vm.meminfo()
    return {"MemTotal": mi["MemTotal"], "free": vm.free_kib(), "SUnreclaim": mi["SUnreclaim"],
            "VmallocUsed": mi["VmallocUsed"]}


# Cycles before the measured ones (caches that the first loads populate grow for a while),
# the cycles measured, and those at each end with a snapshot after them.
LEAK_WARMUP_CYCLES = 10
LEAK_CYCLES = 36
LEAK_WINDOW = 8
# VmallocUsed counts whole pages, so a vmalloc leak is at least a page per cycle: 84 KiB
# over the 21 cycles between the windows' nearest members. The bound stays under that and
# above the drift seen without a leak (7.3.4 moved it by 68 KiB once, lazily freed areas
# not yet purged).
LEAK_VMALLOC_BOUND_KIB = (LEAK_CYCLES - 2 * LEAK_WINDOW + 1) * 4 - 4


def _leak_bounds(kver: str) -> tuple[int, int]:
    """(free KiB, SUnreclaim KiB) a run of LEAK_CYCLES may drift by without a leak.
    7.x drifts more on its own: on 7.3.4 our module moved free memory by 112-344 KiB and
    SUnreclaim by 12-204 KiB over the 21 cycles in eight fresh guests (three builds that
    differ only in code that allocates nothing, keep_blocks_whole=0 among them), and the
    in-tree driver by 64-168 KiB (SUnreclaim up to 128); so there the bounds catch 4.6
    pages or 12 KiB of slab per cycle (a virtqueue ring, the core's 48 KiB of runs), not 2
    pages."""
    if int(kver.split(".")[0]) >= 7:
        return 384, 256
    return 160, 128


def test_load_unload_cycles_leak_nothing(plain_vm, driver):
    """36 cycles of: insmod, bind, inflate 64 MiB (the target set before probing), rmmod
    while inflated, after 10 such cycles of warm-up.  Balloon pages must all come back
    (MemTotal exact).  Some snapshots of SUnreclaim read 80 KiB above the others, even after
    an RCU grace period, and the next ones read the floor again, so a leak is measured between
    the floors (for free memory the ceilings) of the snapshots after the first 8 and the last
    8 cycles, whose nearest members are 21 cycles apart.  The bounds (160 and 128 KiB on 6.x;
    7.x drifts more, _leak_bounds()) then
    catch a leak of 2 pages or 6.1 KiB of slab per cycle, e.g. a virtqueue ring, a stats
    buffer or the device struct; a single 4 KiB page per cycle is below this resolution.
    Measured so, twice each: SUnreclaim moved by 28-32 KiB with the in-tree driver and 20 KiB
    with ours, free memory by 24-52 KiB and 40-48 KiB."""
    vm, q = plain_vm, plain_vm.qmp
    drv = driver.drv
    ram = vm.ram_bytes
    target = ram - 64 * MIB

    def cycle():
        if drv.module not in vm.loaded_modules():
            vm.load_driver(drv)
        q.wait_balloon(target, BALLOON_TIMEOUT_S)
        vm.unload_driver(drv)
        assert q.balloon_actual() == ram

    q.balloon(target)
    for _ in range(LEAK_WARMUP_CYCLES):
        cycle()
    first, last = [], []
    for i in range(LEAK_CYCLES):
        cycle()
        if i < LEAK_WINDOW:
            first.append(_leak_snapshot(vm))
        elif i >= LEAK_CYCLES - LEAK_WINDOW:
            last.append(_leak_snapshot(vm))
    assert {s["MemTotal"] for s in first + last} == {first[0]["MemTotal"]}, (first, last)

    def window(snaps):
        return {"free": max(s["free"] for s in snaps),
                "SUnreclaim": min(s["SUnreclaim"] for s in snaps),
                "VmallocUsed": min(s["VmallocUsed"] for s in snaps)}

    before = window(first)
    after = window(last)
    print(f"[{driver.label}] leak check: free {before['free'] - after['free']} KiB, "
          f"SUnreclaim {after['SUnreclaim'] - before['SUnreclaim']} KiB, "
          f"VmallocUsed {after['VmallocUsed'] - before['VmallocUsed']} KiB over "
          f"{LEAK_CYCLES} cycles")
    free_bound, slab_bound = _leak_bounds(driver.image.kver)
    assert before["free"] - after["free"] <= free_bound, (before, after, first, last)
    assert after["SUnreclaim"] - before["SUnreclaim"] <= slab_bound, (before, after, first, last)
    assert after["VmallocUsed"] - before["VmallocUsed"] <= LEAK_VMALLOC_BOUND_KIB, \
        (before, after, first, last)
