# SPDX-License-Identifier: GPL-2.0
"""Free page reporting and free page hinting in a real guest, for both drivers.

Guest: Debian's 6.1 kernel under QEMU 7.2 (TCG), 2 GiB, booted with init_on_alloc=0 (with
Debian's default init_on_alloc=1 every hinted block is zeroed as it is taken, which dirties it
again; test_migration_compare.py measures that effect).

  - every combination of free-page-hint, free-page-reporting and deflate-on-oom: the driver
    binds, takes exactly the offered features it serves, balloons, and unloads cleanly;
  - reporting: the guest writes 1 GiB to tmpfs and deletes it; QEMU's RSS must fall by
    700 MiB within 20 s;
  - hinting: after the same, a migration to `exec:cat > /dev/null` at unlimited bandwidth
    must send at most 0.4 of the bytes of the same migration without hints (the same guest
    in the same state, its driver unloaded), in each of 3 runs; the guest must have handed
    the freed memory over and got every block back after QEMU's DONE. The stricter
    1/5 is a race on QEMU 7.2 that no driver wins every time: test_hint_race.py
    (-m hint_race) measures how often each driver loses it.
"""

from __future__ import annotations

import itertools
import time

import pytest

import free_pages
import guestvm
from free_pages import check_hinted_runs_were_sound, hint_report, hinted_migration_run
from guestvm import BALLOON_TIMEOUT_S, MIB

VIRTIO_BALLOON_F_DEFLATE_ON_OOM = 2
VIRTIO_BALLOON_F_FREE_PAGE_HINT = 3
VIRTIO_BALLOON_F_PAGE_REPORTING = 5

FILL_MIB = 1024
RSS_DROP_MIN = 700 * MIB
RSS_DROP_WITHIN_S = 20.0
HINT_RUNS = 3
# The best of the hinted migrations sends at most this share of the bytes of an unhinted one.
# Measured here for vballoon on QEMU 7.2: 0.09-0.35 in 26 runs on an idle host. Under CI's
# load, with two other guests beside it, QEMU's race (tests/guest/README.md) went against
# both drivers in whole series: a median of 0.46 on 7.3.4 (0.33-0.53) and a run of 0.98 on
# 6.1 in one CI run of 2026-12-04, where the guest had handed over 1.7-1.8 GiB every time.
HINT_BYTES_RATIO_MAX = 0.4


def _bit(features: int, bit: int) -> bool:
    return bool(features >> bit & 1)


# ----------------------------------------------------------------------------------------------
# Every device option combination


OPTION_COMBOS = list(itertools.product((False, True), repeat=3))


def _combo_id(combo) -> str:
    hint, report, oom = combo
    return "-".join(f"{name}{'+' if on else '-'}"
                    for name, on in (("hint", hint), ("report", report), ("oom", oom)))


def _props(combo) -> dict:
    hint, report, oom = combo
    return {"free-page-hint": "on" if hint else "off",
            "free-page-reporting": "on" if report else "off",
            "deflate-on-oom": "on" if oom else "off"}


@pytest.mark.parametrize("options_vm", [_props(c) for c in OPTION_COMBOS], indirect=True,
                         ids=[_combo_id(c) for c in OPTION_COMBOS])
def test_every_option_combination_binds_balloons_and_unloads(options_vm, driver):
    """The driver takes each offered free-page feature (and deflate-on-oom), inflates and
    deflates 64 MiB, then unloads: nothing may be left bound, every page returns, the kernel
    stays untainted (checked by the fixture), and it loads again."""
    vm, q, ram = options_vm, options_vm.qmp, options_vm.ram_bytes
    features = vm.negotiated_features()
    for bit, prop in ((VIRTIO_BALLOON_F_FREE_PAGE_HINT, "free-page-hint"),
                      (VIRTIO_BALLOON_F_PAGE_REPORTING, "free-page-reporting"),
                      (VIRTIO_BALLOON_F_DEFLATE_ON_OOM, "deflate-on-oom")):
        offered = vm.balloon_props[prop] == "on"
        assert _bit(features, bit) == offered, \
            f"feature bit {bit}: offered {offered}, negotiated features {features:#x}"
    total0 = vm.meminfo()["MemTotal"]
    q.balloon(ram - 64 * MIB)
    q.wait_balloon(ram - 64 * MIB, BALLOON_TIMEOUT_S)
    q.balloon(ram)
    q.wait_balloon(ram, BALLOON_TIMEOUT_S)
    vm.unload_driver(driver.drv)
    assert vm.bound_driver() is None
    assert vm.meminfo()["MemTotal"] == total0
    vm.load_driver(driver.drv)
    assert vm.negotiated_features() == features


# ----------------------------------------------------------------------------------------------
# Free page reporting


def test_reporting_hands_freed_memory_back_to_host(report_vm, record_property):
    vm = report_vm
    assert _bit(vm.negotiated_features(), VIRTIO_BALLOON_F_PAGE_REPORTING)
    free_pages.write_tmpfs(vm, FILL_MIB)
    rss0 = vm.qemu_rss_bytes()
    assert rss0 >= FILL_MIB * MIB, "the guest's data is not resident in QEMU"
    free_pages.delete_tmpfs(vm)
    drop, seconds = free_pages.wait_rss_drop(vm, rss0, RSS_DROP_MIN, RSS_DROP_WITHIN_S)
    record_property("rss_drop_mib", drop // MIB)
    record_property("rss_drop_seconds", round(seconds, 2))
    print(f"\n[{vm.name}] QEMU RSS {rss0 // MIB} MiB, fell by {drop // MIB} MiB "
          f"in {seconds:.1f} s")
    assert drop >= RSS_DROP_MIN, \
        f"QEMU RSS fell by only {drop // MIB} MiB in {RSS_DROP_WITHIN_S} s (from {rss0 // MIB})"


# ----------------------------------------------------------------------------------------------
# Free page hinting


def test_hinting_shrinks_migration(hint_vm, driver, record_property):
    """Three runs on a guest with free-page-hint=on; each compares a hinted migration with
    the unhinted migration of the same guest state (free_pages.hinted_migration_run).

    The best run must send at most HINT_BYTES_RATIO_MAX of the unhinted bytes: the hints
    work. A run over the bound is QEMU 7.2's race, not the driver: QEMU applies hints only
    where its hint thread wins the bitmap mutex (tests/guest/README.md, "Free page hinting
    is a race"), and a loaded host loses it more often, for a run or a series and for either
    driver; such a run must still show the guest handed its blocks over. What the driver
    decides is checked in every run (check_hinted_runs_were_sound: the round held the freed
    memory, every block came back). test_hint_race.py holds the strict 1/5 in every run of
    10 and counts the runs lost entirely, on demand."""
    vm = hint_vm
    assert _bit(vm.negotiated_features(), VIRTIO_BALLOON_F_FREE_PAGE_HINT)
    runs = [hinted_migration_run(vm, driver.drv, driver.label, FILL_MIB)
            for _ in range(HINT_RUNS)]
    report = hint_report(runs)
    print(report)
    record_property("baseline_bytes", [r.baseline.transferred for r in runs])
    record_property("hinted_bytes", [r.hinted.transferred for r in runs])
    record_property("hint_work_ms", [r.hint_ms for r in runs])
    check_hinted_runs_were_sound(runs)

    best = min(r.ratio for r in runs)
    too_big = [i for i, r in enumerate(runs) if r.ratio > HINT_BYTES_RATIO_MAX]
    # Lost the race: the guest did hand blocks over and QEMU still sent them.
    lost = [i for i in too_big if runs[i].handed_blocks_over]
    if too_big and driver.label == "in-tree" and lost == too_big:
        # The reference driver hands each block over as a buffer of its own, and QEMU
        # 7.2's hint thread must win the migration bitmap mutex for each one
        # (tests/guest/README.md).
        pytest.xfail(f"in-tree lost the race with the migration's first pass in runs "
                     f"{[i + 1 for i in lost]} of {HINT_RUNS}:{report}")
    assert lost == too_big, (f"runs {[i + 1 for i in too_big if i not in lost]} of "
                             f"{HINT_RUNS} sent too much and the guest handed no blocks "
                             f"over:{report}")
    assert best <= HINT_BYTES_RATIO_MAX, (f"the best hinted migration sent x{best:.3f} "
                                          f"of the unhinted bytes, more than "
                                          f"{HINT_BYTES_RATIO_MAX}:{report}")


# ----------------------------------------------------------------------------------------------
# Free pages under memory pressure while a hint round holds them

SLOW_BANDWIDTH = 1 * MIB
HOG_MIB = 1500


def test_hinted_blocks_come_back_under_memory_pressure(hint_vm, driver):
    """While a (slow) migration runs, the driver holds every free 4 MiB block as a hint until
    QEMU says DONE; a process that then needs most of the guest's memory must get it from the
    driver's shrinker, not die. Then the migration is cancelled and the guest is whole."""
    vm, q = hint_vm, hint_vm.qmp
    free0 = vm.meminfo()["MemFree"] // 1024
    assert free0 > HOG_MIB + 200, f"only {free0} MiB free to start with"
    q.migrate_set_parameters(max_bandwidth=SLOW_BANDWIDTH)
    q.migrate(free_pages.MIGRATE_URI)
    try:
        # The round takes the free blocks within tens of ms; allow a slow host 30 s.
        deadline = time.monotonic() + 30
        while (held_free := vm.meminfo()["MemFree"] // 1024) > free0 - HOG_MIB:
            assert time.monotonic() < deadline, \
                f"MemFree {held_free} MiB: the driver did not take the free blocks as hints"
            time.sleep(0.1)  # poll interval, bounded by the deadline above
        r = vm.run(f"hog {HOG_MIB}", timeout=300, check=False)
        status = q.query_migrate()["status"]
    finally:
        q.execute("migrate_cancel")
    assert r.status == 0 and f"touched {HOG_MIB}" in r.output, \
        f"the process needing {HOG_MIB} MiB did not survive (status {r.status}):\n{r.output}"
    # The blocks came back through the shrinker: QEMU had not said DONE yet.
    assert status == "active", f"migration {status} before the process finished"
    # Cancelling ends the round with DONE: every block comes back.
    deadline = time.monotonic() + 30
    while vm.meminfo()["MemFree"] // 1024 < free0 - 64:
        assert time.monotonic() < deadline, "hinted blocks not given back after DONE"
        time.sleep(0.1)  # poll interval, bounded by the deadline above
    assert vm.sh("echo alive").strip() == "alive"


# The round's block at which the injected surprise removal breaks the device.
BREAK_AT_BLOCK = 8


@pytest.mark.parametrize("driver", ["vballoon"], indirect=True)
def test_device_broken_mid_round_stops_it_and_every_block_comes_back(hint_vm, driver):
    """vballoon only (the fault is injected through its debugfs): the device breaks, as a
    surprise removal breaks it, when the round adds its 8th block.  The round must stop at
    that first failure (7 blocks hinted, not every free block of the guest), with no WARN
    (a panic under panic_on_warn); after the reset (unload) every block is back."""
    vm = hint_vm
    console0 = vm.console_bytes
    total0 = vm.meminfo()["MemTotal"]
    free0 = vm.free_kib()
    dev = vm.balloon_device()
    vm.sh(f"echo {BREAK_AT_BLOCK} > /sys/kernel/debug/vballoon/{dev}/break_after_hint_blocks")
    free_pages.migrate_to_null(vm)  # QEMU asks for hints as the migration starts
    console = vm.console_text(console0)
    assert f"device broken after {BREAK_AT_BLOCK} hint blocks" in console, vm.console_tail()
    counters = vm.vballoon_counters()
    assert counters["hint_rounds"] == 1, counters
    assert counters["hint_blocks"] == BREAK_AT_BLOCK - 1, counters
    assert counters["queue_failures"] >= 1, counters
    # Nothing more was taken: the guest has its free memory but those 7 blocks at most.
    held_kib = (BREAK_AT_BLOCK - 1) * free_pages.HINT_BLOCK_PAGES * 4
    assert vm.free_kib() >= free0 - held_kib - free_pages.FREE_BACK_SLACK_KIB
    vm.unload_driver(driver.drv)
    assert vm.meminfo()["MemTotal"] == total0
    assert vm.free_kib() >= free0 - free_pages.FREE_BACK_SLACK_KIB
    assert vm.sh("echo alive").strip() == "alive"
    console = vm.console_text(console0)
    assert not guestvm.KERNEL_TROUBLE.search(console), guestvm.kernel_trouble(console)
