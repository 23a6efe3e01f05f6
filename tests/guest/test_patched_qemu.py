# SPDX-License-Identifier: GPL-2.0
"""vballoon's chunked inflate and deflate against a real device: QEMU 7.2 with qemu/patches
(qemu/build-patched-qemu.sh), virtio-balloon-pci with x-vb-chunked=on.

Marked `patched_qemu` and left out of the default run (pytest.ini): `-m patched_qemu`. The
binary is $VBALLOON_PATCHED_QEMU, else the one the build script caches for the current
patches; when it is missing every test FAILS with the build command.

What is checked, each against what the host itself shows:
- the features (bit 20 negotiated) and that requests really were chunks: more pages per
  message than a PFN array holds, and QEMU's used index moving by the driver's message count;
- inflate/deflate to target, `actual` and MemTotal exact;
- a pattern kept in guest memory through inflate/deflate cycles and through compaction of a
  page-at-a-time balloon (ballooned pages migrated, ranges then no longer contiguous);
- QEMU's RSS dropping by about the inflated size (the device discarded the ranges);
- migration to a file while inflated and a restore from it: `actual` preserved, the pattern
  intact, the balloon deflating on the destination;
- system_reset while inflated: the module rebinds, re-inflates to the target, nothing lost;
- a request the device must refuse (a range 2 KiB short, injected through vballoon's debugfs
  `misalign_next_inflate`): counted in x-vb-rejected-requests, the guest unharmed;
- the in-tree driver on the same device (it never accepts bit 20): PFN arrays as before;
- DEVICE_INIT_ON_INFLATE (bit 7) with chunks: every discarded range promised, counted by the
  module (device_init=1 in an init_on_free=1 guest), nothing refused.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile

import pytest

import guestvm
from conftest import GUEST_RAM_MIB, VMHolder, _vm_fixture, fail
from guestvm import (BALLOON_QOM_PATH, BALLOON_TIMEOUT_S, DEFLATE_QUEUE, GIB, INFLATE_QUEUE,
                     MIB, GuestVM)
from test_lifecycle import (HOLED_MIB, PatternKeeper, assert_kernel_quiet, balloon_to,
                            stop_background, wait_for_line)

pytestmark = pytest.mark.patched_qemu

KIB = 1024
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD_SCRIPT = os.path.join(REPO, "qemu", "build-patched-qemu.sh")
VB_F_X_CHUNKED = 20
VB_F_DEVICE_INIT_ON_INFLATE = 7   # mst's branch (virtio-spec issue 242)
PFNS_PER_ARRAY = 256   # what one PFN-array message carries at most (both drivers)
CHUNKED_PROPS = {"x-vb-chunked": "on"}


def patched_qemu_path() -> str:
    """The patched binary, or a failure that says how to build it."""
    path = os.environ.get("VBALLOON_PATCHED_QEMU")
    if not path:
        res = subprocess.run([BUILD_SCRIPT, "--print-path"], capture_output=True, text=True)
        path = res.stdout.strip()
    if not path or not os.access(path, os.X_OK):
        fail(f"the patched QEMU is missing ({path or 'no path'}): build it with\n"
             f"    {BUILD_SCRIPT}\n(about 6-15 minutes on 2 cores; or set "
             f"$VBALLOON_PATCHED_QEMU)")
    return path


@pytest.fixture(scope="session")
def patched_qemu() -> str:
    return patched_qemu_path()


@pytest.fixture(scope="session")
def chunked_holder(driver, patched_qemu):
    h = VMHolder(driver, "patched", CHUNKED_PROPS, qemu=patched_qemu)
    yield h
    h.close()


@pytest.fixture
def chunked_vm(chunked_holder, driver):
    yield from _vm_fixture(chunked_holder, driver)


def rejected_requests(vm: GuestVM) -> int:
    return vm.qmp.qom_get(guestvm.BALLOON_VIRTIO_PATH, "x-vb-rejected-requests")


def _used_delta(before: dict, after: dict) -> int:
    return (after["used-idx"] - before["used-idx"]) % 65536


def _assert_chunked(vm: GuestVM) -> None:
    features = vm.negotiated_features()
    assert features >> VB_F_X_CHUNKED & 1, f"bit 20 not negotiated: features {features:#x}"


vballoon_only = pytest.mark.parametrize("driver", ["vballoon"], indirect=True)


@vballoon_only
def test_chunked_inflate_and_deflate_to_target(chunked_vm):
    """1 GiB in and out: every message the driver sent was used by the device, each carried
    more pages than a PFN array can, `actual` and MemTotal are exact, nothing was refused."""
    vm, ram, size = chunked_vm, chunked_vm.ram_bytes, GIB
    console0 = vm.console_bytes
    _assert_chunked(vm)
    total0 = vm.meminfo()["MemTotal"]
    c0 = vm.vballoon_counters()
    inflate0 = vm.balloon_queue_status(INFLATE_QUEUE)
    balloon_to(vm, ram - size)
    c1 = vm.vballoon_counters()
    inflate1 = vm.balloon_queue_status(INFLATE_QUEUE)
    messages = c1["inflate_messages"] - c0["inflate_messages"]
    pages = c1["pages_inflated"] - c0["pages_inflated"]
    assert pages == size // guestvm.PAGE_BYTES
    assert c1["balloon_pfns"] == size // guestvm.PAGE_BYTES
    assert _used_delta(inflate0, inflate1) == messages, (inflate0, inflate1, messages)
    assert 0 < messages < pages // PFNS_PER_ARRAY, f"{messages} messages for {pages} pages"
    assert vm.meminfo()["MemTotal"] == total0 - size // KIB

    deflate0 = vm.balloon_queue_status(DEFLATE_QUEUE)
    balloon_to(vm, ram)
    c2 = vm.vballoon_counters()
    deflate1 = vm.balloon_queue_status(DEFLATE_QUEUE)
    dmessages = c2["deflate_messages"] - c1["deflate_messages"]
    assert c2["pages_deflated"] - c1["pages_deflated"] == size // guestvm.PAGE_BYTES
    assert _used_delta(deflate0, deflate1) == dmessages
    assert 0 < dmessages < size // guestvm.PAGE_BYTES // PFNS_PER_ARRAY
    assert c2["balloon_pfns"] == 0
    assert vm.meminfo()["MemTotal"] == total0
    assert rejected_requests(vm) == 0
    assert_kernel_quiet(vm, console0)


@vballoon_only
def test_host_rss_drops_by_the_inflated_size(chunked_vm):
    """The guest dirties and frees nearly all its free memory; a chunked inflate of 1 GiB must
    then drop QEMU's RSS by about 1 GiB (the ranges were discarded), and a deflate plus a
    rewrite must bring it back up (the ranges are ordinary memory again)."""
    vm, q = chunked_vm, chunked_vm.qmp
    ram, size = vm.ram_bytes, GIB
    mi = vm.meminfo()
    dirty_mib = mi["MemAvailable"] // KIB - 128
    vm.sh(f"hog {dirty_mib}", timeout=180)
    rss0 = vm.qemu_rss_bytes()
    assert rss0 >= dirty_mib * MIB, "the guest's dirtied memory is not resident in QEMU"
    balloon_to(vm, ram - size)
    rss1 = vm.qemu_rss_bytes()
    # As test_balloon.test_qemu_rss_drops_when_balloon_inflates: the balloon may hold pages
    # that were never dirtied (not resident), 32 MiB for QEMU's own growth meanwhile.
    never_dirtied = max(mi["MemFree"] * KIB - dirty_mib * MIB, 0)
    expected_min = size - never_dirtied - 32 * MIB
    assert rss0 - rss1 >= expected_min, \
        f"QEMU RSS {rss0 // MIB} -> {rss1 // MIB} MiB, expected a drop of >= {expected_min // MIB}"
    # The drop is the balloon's doing: not more than it holds (plus the same 32 MiB).
    assert rss0 - rss1 <= size + 32 * MIB, f"RSS fell {(rss0 - rss1) // MIB} MiB"
    balloon_to(vm, ram)
    vm.sh(f"hog {dirty_mib}", timeout=180)
    rss2 = vm.qemu_rss_bytes()
    assert rss2 - rss1 >= expected_min, f"RSS {rss1 // MIB} -> {rss2 // MIB} MiB after deflate"


@vballoon_only
def test_pattern_survives_chunked_cycles_and_compaction(chunked_vm, driver):
    """A pattern the guest keeps in memory checks byte for byte after each of three chunked
    inflates and deflates; then a page-at-a-time balloon between a process's pages is
    compacted (balloon pages migrate, so later deflates send ranges that are no longer
    the inflated ones) and deflated: the pattern still checks, MemTotal is exact."""
    vm = chunked_vm
    ram = vm.ram_bytes
    console0 = vm.console_bytes
    total0 = vm.meminfo()["MemTotal"]
    keep_mib = vm.meminfo()["MemAvailable"] * 2 // 10 // KIB
    keeper = PatternKeeper(vm, keep_mib)
    try:
        for _ in range(3):
            balloon_mib = vm.free_kib() // KIB - 160
            assert balloon_mib >= 256
            balloon_to(vm, ram - balloon_mib * MIB)
            keeper.verify()
            balloon_to(vm, ram)
            keeper.verify()

        vm.unload_driver(driver.drv)
        drv = guestvm.Driver(driver.drv.label, driver.drv.module, driver.drv.sysfs_name,
                             driver.drv.insmod, "max_chunk_order=0")
        vm.load_driver(drv)
        _assert_chunked(vm)
        # As test_lifecycle's compaction test: the balloon's pages go between the pages a
        # process holds, which then exits, so compaction has blocks to empty.
        holed = min(HOLED_MIB, vm.free_kib() // KIB // 2)
        vm.sh(f"hog holes {holed} > /tmp/holes.out 2>&1 & echo $! > /tmp/holes.pid")
        wait_for_line(vm, "/tmp/holes.out", f"holed {holed}", timeout=180)
        target = ram - (vm.free_kib() // KIB - 200) * MIB
        balloon_to(vm, target)
        stop_background(vm, "/tmp/holes.pid")
        migrated0 = vm.vmstat()["balloon_migrate"]
        ours0 = vm.vballoon_counters()["migrations"]
        vm.sh("echo 1 > /proc/sys/vm/compact_memory", timeout=180)
        migrated = vm.vmstat()["balloon_migrate"] - migrated0
        assert migrated > 0, "compaction moved no balloon page"
        assert vm.vballoon_counters()["migrations"] - ours0 == migrated
        keeper.verify()
        # Inflate more on top of the compacted balloon, then all the way back.
        balloon_to(vm, target - 128 * MIB)
        keeper.verify()
        balloon_to(vm, ram)
        keeper.verify()
        assert vm.vballoon_counters()["balloon_pfns"] == 0
        keeper.finish()
        vm.unload_driver(drv)
    finally:
        vm.run("kill -TERM $(cat /tmp/keep.pid) $(cat /tmp/holes.pid) 2>/dev/null", check=False)
    assert vm.meminfo()["MemTotal"] == total0
    assert rejected_requests(vm) == 0
    assert_kernel_quiet(vm, console0)


@vballoon_only
def test_migration_to_a_file_while_inflated(driver, patched_qemu):
    """Save the inflated guest to a file (migrate to exec:), restore it in a new QEMU with
    -incoming: `actual` is the same, the kept pattern checks, the module still talks chunks
    to the restored device and deflates everything."""
    src = GuestVM(driver.image, name="vballoon-patched-migsrc", ram_mib=GUEST_RAM_MIB,
                  balloon_props=CHUNKED_PROPS, qemu=patched_qemu).start()
    dst = None
    state = tempfile.NamedTemporaryFile(prefix="vballoon-state-", dir=os.path.dirname(
        src.console_log), delete=False).name
    try:
        ram, size = src.ram_bytes, GIB
        src.load_driver(driver.drv)
        _assert_chunked(src)
        keeper = PatternKeeper(src, 256)
        balloon_to(src, ram - size)
        keeper.verify()
        balloon_pfns = src.vballoon_counters()["balloon_pfns"]
        src.qmp.migrate_set_parameters(max_bandwidth=1 << 40)
        src.qmp.migrate(f"exec:cat > {state}")
        info = src.qmp.wait_migration(120)
        assert info["status"] == "completed"
        src.stop()

        dst = GuestVM(driver.image, name="vballoon-patched-migdst", ram_mib=GUEST_RAM_MIB,
                      balloon_props=CHUNKED_PROPS, qemu=patched_qemu,
                      incoming=f"exec:cat {state}").start()
        console0 = dst.console_bytes
        dst.driver = driver.drv
        assert dst.qmp.balloon_actual() == ram - size
        assert dst.vballoon_counters()["balloon_pfns"] == balloon_pfns
        _assert_chunked(dst)
        keeper.vm = dst
        keeper.verify()
        m0 = dst.vballoon_counters()["deflate_messages"]
        balloon_to(dst, ram)
        assert dst.vballoon_counters()["deflate_messages"] > m0
        assert dst.vballoon_counters()["balloon_pfns"] == 0
        balloon_to(dst, ram - size // 2)   # the restored device takes chunks too
        balloon_to(dst, ram)
        keeper.finish()
        assert rejected_requests(dst) == 0
        assert_kernel_quiet(dst, console0)
    finally:
        src.stop()
        if dst is not None:
            dst.stop()
        os.unlink(state)


@vballoon_only
def test_system_reset_while_inflated(chunked_vm, driver):
    """A machine reset with half the guest ballooned: the new kernel has all its memory, the
    module binds again, negotiates chunks again, re-inflates to the unchanged target and
    deflates; a pattern written after the reboot survives that."""
    vm, q = chunked_vm, chunked_vm.qmp
    ram = vm.ram_bytes
    total0 = vm.meminfo()["MemTotal"]
    balloon_to(vm, ram // 2)
    q.execute("set-action", {"reboot": "reset"})   # -no-reboot would make the reset an exit
    try:
        q.execute("system_reset")
        vm.wait_rebooted()
    finally:
        q.execute("set-action", {"reboot": "shutdown"})
    console0 = vm.console_bytes
    assert driver.drv.module not in vm.loaded_modules()
    assert vm.meminfo()["MemTotal"] == total0
    keeper = PatternKeeper(vm, 256)
    try:
        vm.load_driver(driver.drv)
        _assert_chunked(vm)
        q.wait_balloon(ram // 2, BALLOON_TIMEOUT_S)
        assert vm.meminfo()["MemTotal"] == total0 - (ram // 2) // KIB
        keeper.verify()
        balloon_to(vm, ram)
        keeper.finish()
    finally:
        vm.run("kill -TERM $(cat /tmp/keep.pid) 2>/dev/null", check=False)
    assert vm.meminfo()["MemTotal"] == total0
    assert rejected_requests(vm) == 0
    assert_kernel_quiet(vm, console0)


@vballoon_only
def test_device_refuses_and_counts_a_misaligned_range(chunked_vm):
    """vballoon's debugfs misalign_next_inflate sends the next inflate's first range 2 KiB
    short. The device must refuse that request whole (x-vb-rejected-requests goes up by
    exactly one, QEMU logs why) and go on serving the others; the guest is unharmed and
    deflates everything."""
    vm = chunked_vm
    ram = vm.ram_bytes
    console0 = vm.console_bytes
    rejected0 = rejected_requests(vm)
    knob = f"/sys/kernel/debug/vballoon/{vm.balloon_device()}/misalign_next_inflate"
    vm.sh(f"echo 1 > {knob}")
    balloon_to(vm, ram - 256 * MIB)
    assert vm.sh(f"cat {knob}").strip() == "N", "the fault was never injected"
    assert rejected_requests(vm) == rejected0 + 1
    # The rest of the traffic is served as usual.
    balloon_to(vm, ram - 512 * MIB)
    assert rejected_requests(vm) == rejected0 + 1
    balloon_to(vm, ram)
    assert vm.vballoon_counters()["balloon_pfns"] == 0
    assert vm.sh("echo alive").strip() == "alive"
    assert "as asked (debugfs)" in vm.console_text(console0)
    assert_kernel_quiet(vm, console0)


@pytest.mark.parametrize("driver", ["in-tree"], indirect=True)
def test_intree_driver_ignores_the_chunked_bit(chunked_vm):
    """The in-tree driver does not know bit 20: it must not negotiate it and must balloon
    with PFN arrays against the patched device as against any QEMU."""
    vm = chunked_vm
    ram = vm.ram_bytes
    assert not vm.negotiated_features() >> VB_F_X_CHUNKED & 1
    inflate0 = vm.balloon_queue_status(INFLATE_QUEUE)
    balloon_to(vm, ram - 256 * MIB)
    inflate1 = vm.balloon_queue_status(INFLATE_QUEUE)
    assert _used_delta(inflate0, inflate1) >= 256 * MIB // guestvm.PAGE_BYTES // PFNS_PER_ARRAY
    balloon_to(vm, ram)
    assert rejected_requests(vm) == 0


@vballoon_only
def test_device_init_on_inflate_promises_every_discarded_range(driver, patched_qemu):
    """DEVICE_INIT_ON_INFLATE (bit 7) with chunks in a real device: a guest that zeroes freed
    pages (init_on_free=1) and opts in (device_init=1) negotiates bit 7, the device sets the
    bit of every range it discarded, so the module counts every inflated page as host
    initialised and zeroes none of them itself (zero_on_inflate=1 would otherwise); the pages
    come back through deflate with the pattern kept elsewhere intact and nothing refused."""
    drv = dataclasses.replace(driver.drv, params="device_init=1 zero_on_inflate=1")
    vm = GuestVM(driver.image, name="vballoon-patched-devinit", ram_mib=GUEST_RAM_MIB,
                 balloon_props={**CHUNKED_PROPS, "device-init-on-inflate": "on"},
                 append="init_on_free=1", qemu=patched_qemu).start()
    try:
        console0 = vm.console_bytes
        vm.load_driver(drv)
        vm.driver = drv
        features = vm.negotiated_features()
        assert features >> VB_F_X_CHUNKED & 1 and features >> VB_F_DEVICE_INIT_ON_INFLATE & 1, \
            f"bits 20 and 7 not both negotiated: {features:#x}"
        ram, size = vm.ram_bytes, GIB // 2
        keeper = PatternKeeper(vm, 64)
        c0 = vm.vballoon_counters()
        balloon_to(vm, ram - size)
        c1 = vm.vballoon_counters()
        pages = size // guestvm.PAGE_BYTES
        assert c1["pages_inflated"] - c0["pages_inflated"] == pages
        assert c1["pages_device_initialised"] - c0["pages_device_initialised"] == pages
        assert c1["device_init_overclaims"] == 0
        keeper.verify()
        balloon_to(vm, ram)
        assert vm.vballoon_counters()["balloon_pfns"] == 0
        keeper.finish()
        assert rejected_requests(vm) == 0
        assert_kernel_quiet(vm, console0)
    finally:
        vm.stop()
