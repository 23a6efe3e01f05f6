# SPDX-License-Identifier: GPL-2.0
"""Fixtures of the guest suite: every test runs once per balloon driver.

  driver    session scope, params "in-tree" and "vballoon": the guest image and how to load
            the driver.  "vballoon" needs <repo>/vballoon.ko (or $VBALLOON_KO): when it is
            missing, every vballoon test fails (never skips) and says how to build it.
  plain_vm  a 2 GiB guest with a plain virtio-balloon-pci (QEMU's defaults: stats queue on,
            deflate-on-oom off, free page reporting off), shared by the tests of one driver.
  oom_vm    the same with deflate-on-oom=on (the in-tree driver then stops taking balloon
            pages out of MemTotal, so MemTotal tests use plain_vm).
  lifecycle_vm  a plain balloon behind a PCIe root port, so it can be unplugged, for the tests
            that reset, unplug or suspend the machine (test_lifecycle.py).

Sharing: pytest orders the session-scoped parametrized fixtures so that all in-tree tests run,
then all vballoon tests; each driver's guests are stopped before the next driver's boot.
Before each test the guest is brought to a known state: the driver loaded and bound, the
target at full RAM and the balloon empty.  A guest that died or whose command channel timed
out is replaced by a fresh boot, so one failure does not cascade.  After each test the guest
kernel must not have been tainted by a warning, oops or bad page (an out-of-tree module's
O and E taints are expected).
"""

from __future__ import annotations

import dataclasses
import os

import pytest

import guest_image
import guestvm
from guestvm import BALLOON_TIMEOUT_S, GuestError, GuestVM

DRIVERS = ("in-tree", "vballoon")
GUEST_RAM_MIB = 2048


class HarnessFailed(pytest.fail.Exception):
    """The guest or the driver could not be set up: a missing vballoon.ko, QEMU missing or not
    booting, a guest that cannot be reset.  Reported as a test FAILURE (not a setup ERROR, and
    never a skip): each affected test is red and says why."""


def fail(msg: str):
    raise HarnessFailed(msg, pytrace=False)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    if call.excinfo is not None and call.excinfo.errisinstance(HarnessFailed):
        outcome.get_result().harness_failed = True


def pytest_report_teststatus(report, config):
    if getattr(report, "harness_failed", False) and report.failed:
        return "failed", "F", "FAILED"
    return None


@dataclasses.dataclass
class DriverUnderTest:
    label: str
    image: guest_image.GuestImage
    drv: guestvm.Driver


@pytest.fixture(scope="session", params=DRIVERS)
def driver(request) -> DriverUnderTest:
    label = request.param
    ko = None
    if label == "vballoon":
        ko = guest_image.default_vballoon_ko()
        if not os.path.isfile(ko):
            fail(guest_image.missing_vballoon_message(ko))
    error = None
    try:
        img = guest_image.prepare(ko)
    except guest_image.ImageError as e:
        error = f"preparing the guest image failed: {e}"
    if error:
        fail(error)
    drv = guestvm.vballoon_driver(img) if ko else guestvm.intree_driver(img)
    return DriverUnderTest(label, img, drv)


class VMHolder:
    """One shared guest per (driver, kind), rebooted if a test killed or wedged it."""

    def __init__(self, dut: DriverUnderTest, kind: str, balloon_props: dict, **vm_kwargs):
        self.dut = dut
        self.kind = kind
        self.balloon_props = balloon_props
        self.vm_kwargs = vm_kwargs  # more GuestVM arguments (init_on_alloc_off, ...)
        self.vm: GuestVM | None = None
        self.boots = 0
        self.boot_error: str | None = None

    def get(self) -> GuestVM:
        if self.boot_error:
            fail(self.boot_error)
        if self.vm is not None and (not self.vm.alive() or self.vm.broken):
            self.vm.stop()
            self.vm = None
        if self.vm is None:
            self.boots += 1
            name = f"{self.dut.label}-{self.kind}" + (f"-{self.boots}" if self.boots > 1 else "")
            vm = GuestVM(self.dut.image, name=name, ram_mib=GUEST_RAM_MIB,
                         balloon_props=self.balloon_props, **self.vm_kwargs)
            try:
                vm.start()
            except GuestError as e:
                self.boot_error = f"the {name} guest did not boot: {e}"
            if self.boot_error:
                fail(self.boot_error)
            self.vm = vm
        return self.vm

    def close(self):
        if self.vm is not None:
            self.vm.stop()
            self.vm = None


def reset_guest(vm: GuestVM, drv: guestvm.Driver) -> None:
    """Driver loaded and bound, target = RAM, balloon empty, stats polling off."""
    vm.qmp.poll_events()
    vm.qmp.qom_set(guestvm.BALLOON_QOM_PATH, "guest-stats-polling-interval", 0)
    # Target first: a driver loaded below would otherwise inflate to a stale target at probe.
    vm.qmp.balloon(vm.ram_bytes)
    if drv.module not in vm.loaded_modules():
        vm.load_driver(drv)
    else:
        vm.wait_bound(drv, BALLOON_TIMEOUT_S)
        vm.driver = drv
    vm.qmp.wait_balloon(vm.ram_bytes, BALLOON_TIMEOUT_S)


def _vm_fixture(holder: VMHolder, dut: DriverUnderTest):
    vm = holder.get()
    try:
        reset_guest(vm, dut.drv)
    except Exception as e:  # noqa: BLE001 - any failure: retry once on a fresh guest
        # Most likely an earlier test left this guest in a state it cannot leave: start over
        # with a fresh boot, so that failure does not spill into this test.
        first = f"{type(e).__name__}: {e}"
        vm.broken = True
        vm = holder.get()
        error = None
        try:
            reset_guest(vm, dut.drv)
        except Exception as e2:  # noqa: BLE001
            vm.broken = True
            error = (f"bringing a fresh {vm.name} guest to the start state failed: "
                     f"{type(e2).__name__}: {e2}\n(the previous guest failed with: {first})")
        if error:
            fail(error)
    taint0 = vm.taint()
    console0 = vm.console_bytes
    yield vm
    # Whatever the test asserted, the kernel must not have warned, oopsed or hit a bad page.
    if vm.alive() and not vm.broken:
        new = vm.taint() & ~taint0 & guestvm.TAINT_BAD
        if new:
            vm.broken = True
            fail(f"the guest kernel got tainted {guestvm.taint_letters(new)} during the test; "
                 f"console:\n{guestvm.kernel_trouble(vm.console_text(console0))}")


@pytest.fixture(scope="session")
def vballoon_image() -> DriverUnderTest:
    """Our module alone, for the tests that measure it rather than compare drivers (the
    calibration, the VM profile)."""
    ko = guest_image.default_vballoon_ko()
    if not os.path.isfile(ko):
        fail(guest_image.missing_vballoon_message(ko))
    try:
        img = guest_image.prepare(ko)
    except guest_image.ImageError as e:
        fail(f"preparing the guest image failed: {e}")
    return DriverUnderTest("vballoon", img, guestvm.vballoon_driver(img))


@pytest.fixture(scope="session")
def plain_holder(driver):
    h = VMHolder(driver, "plain", {})
    yield h
    h.close()


@pytest.fixture(scope="session")
def oom_holder(driver):
    h = VMHolder(driver, "oom", {"deflate-on-oom": "on"})
    yield h
    h.close()


@pytest.fixture(scope="session")
def lifecycle_holder(driver):
    h = VMHolder(driver, "lifecycle", {}, hotpluggable_balloon=True)
    yield h
    h.close()


def fresh_vm(dut: DriverUnderTest, kind: str, balloon_props: dict, *,
             init_on_alloc_off: bool = True):
    """A guest of its own for one test (a device configuration no other test shares), with
    the driver loaded and the balloon empty; stopped when the test ends.  The same checks
    as the shared guests: it must not get tainted."""
    holder = VMHolder(dut, kind, balloon_props, init_on_alloc_off=init_on_alloc_off)
    try:
        yield from _vm_fixture(holder, dut)
    finally:
        holder.close()


@pytest.fixture
def plain_vm(plain_holder, driver):
    yield from _vm_fixture(plain_holder, driver)


@pytest.fixture
def lifecycle_vm(lifecycle_holder, driver):
    yield from _vm_fixture(lifecycle_holder, driver)


@pytest.fixture
def oom_vm(oom_holder, driver):
    yield from _vm_fixture(oom_holder, driver)


# Guests of their own, one per test: device configurations no other test shares.

@pytest.fixture
def report_vm(driver):
    """free-page-reporting=on."""
    yield from fresh_vm(driver, "report", {"free-page-reporting": "on"})


@pytest.fixture
def hint_vm(driver):
    """free-page-hint=on (with the iothread QEMU requires for it)."""
    yield from fresh_vm(driver, "hint", {"free-page-hint": "on"})


@pytest.fixture
def options_vm(driver, request):
    """Balloon device properties given by indirect parametrization (a dict)."""
    yield from fresh_vm(driver, "options", request.param)


@pytest.fixture
def compare_vm(driver, request):
    """A guest for the migration comparison: request.param is (kind, balloon properties,
    boot with init_on_alloc=0)."""
    kind, props, init_on_alloc_off = request.param
    yield from fresh_vm(driver, kind, props, init_on_alloc_off=init_on_alloc_off)


# The migration comparison's rows, collected over the session (test_migration_compare.py),
# printed as a table at the end and written as JSON.
MIGRATION_COMPARE_ROWS: list[dict] = []


def migration_compare_json_path() -> str:
    return os.environ.get("VBALLOON_MIGRATION_JSON",
                          os.path.join(guest_image.work_dir(), "migration_compare.json"))


def pytest_terminal_summary(terminalreporter):
    if not MIGRATION_COMPARE_ROWS:
        return
    import migration_table  # noqa: PLC0415 - only when the comparison ran
    path = migration_compare_json_path()
    migration_table.write_json(MIGRATION_COMPARE_ROWS, path)
    terminalreporter.section("migration comparison")
    terminalreporter.write_line(migration_table.format_table(MIGRATION_COMPARE_ROWS))
    terminalreporter.write_line(f"JSON: {path}")
