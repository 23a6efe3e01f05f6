# SPDX-License-Identifier: GPL-2.0
"""Guest workloads and host-side measurements for free page hinting and reporting.

  write_tmpfs / delete_tmpfs   fill the guest's tmpfs with non-zero data, then free it all
  migrate_to_null              one live migration into `exec:cat > /dev/null` at unlimited
                               bandwidth, measured by QEMU's own counters; the guest resumes
  HintTracer                   the duration of each run of a driver's hint work item in the
                               guest, from the kernel's function_graph tracer
  wait_rss_drop                poll QEMU's resident size until it fell by a given amount
  hinted_migration_run         one comparison: the guest dirties and frees memory, migrates
                               without hints (driver unloaded), then with them; what the
                               guest held and gave back, read after QEMU's DONE

Sizes: QEMU counts pages of 4 KiB (TARGET_PAGE_SIZE on x86).
"""

from __future__ import annotations

import dataclasses
import re
import time

from guestvm import GuestVM, MIB, PAGE_BYTES

FILL_PATH = "/tmp/free-pages-fill"
# Data is written as copies of one random 1 MiB block, doubled to 32 MiB: one `cat` per
# 32 MiB keeps busybox's fork cost out of the way (writing with `yes` or per-MiB `cat` is
# many times slower under TCG).
BLOCK_MIB = 32

# Unlimited for practical purposes (QEMU 7.2 caps max-bandwidth at SIZE_MAX): the migration
# stream goes as fast as QEMU can produce it.
UNLIMITED_BANDWIDTH = 1 << 40
MIGRATE_URI = "exec:cat > /dev/null"
MIGRATION_TIMEOUT_S = 300.0

# The worker function that runs one hinting round, per driver (traced by HintTracer).
HINT_WORKER = {"in-tree": "report_free_page_func", "vballoon": "vballoon_free_page_hint_func"}
# Both drivers hint blocks of MAX_ORDER - 1 (order 10 on x86: 4 MiB); vballoon goes on with
# smaller ones (down to 64 KiB) once those run out.
HINT_BLOCK_PAGES = 1 << 10
# A hint work run that handed blocks over (a round) takes longer than this in the guest;
# answering an id with no blocks takes tens of microseconds.
HINT_ROUND_MIN_MS = 1.0
# After DONE every hinted block is free again: free memory is back to what it was before
# the migration, give or take what the guest's shell and page cache moved meanwhile.
FREE_BACK_SLACK_KIB = 32 * 1024
FREE_BACK_WITHIN_S = 30.0
# After writing and deleting 1 GiB the guest has it free in 4 MiB blocks: vballoon's round
# holds at least most of it.
HINT_HELD_MIN_MIB = 700


def write_tmpfs(vm: GuestVM, mib: int) -> None:
    """Write `mib` MiB of non-zero data into a file on the guest's tmpfs (page cache that
    only a delete frees)."""
    assert mib % BLOCK_MIB == 0, mib
    copies = " ".join(["/tmp/.blk1"] * BLOCK_MIB)
    vm.sh(f"""set -e
head -c {MIB} /dev/urandom > /tmp/.blk1
cat {copies} > /tmp/.blk32
rm /tmp/.blk1
i=0
while [ $i -lt {mib // BLOCK_MIB} ]; do cat /tmp/.blk32; i=$((i + 1)); done > {FILL_PATH}
rm /tmp/.blk32
test $(stat -c %s {FILL_PATH}) -eq {mib * MIB}
""", timeout=300)


def delete_tmpfs(vm: GuestVM) -> None:
    vm.sh(f"rm -f {FILL_PATH}")


def dirty_and_free(vm: GuestVM, mib: int) -> None:
    """The guest writes `mib` MiB of non-zero data and frees it again: free memory whose
    contents QEMU would otherwise have to keep (RSS) or send (migration)."""
    write_tmpfs(vm, mib)
    delete_tmpfs(vm)


@dataclasses.dataclass
class MigrationResult:
    """What QEMU says one migration cost (query-migrate when it completed)."""
    transferred: int       # bytes written into the migration stream for RAM
    normal_pages: int      # pages sent with their contents
    duplicate_pages: int   # zero pages (sent as a flag, no contents)
    normal_bytes: int
    total_time_ms: int
    setup_time_ms: int
    downtime_ms: int
    dirty_sync_count: int

    @classmethod
    def from_query(cls, info: dict) -> "MigrationResult":
        ram = info["ram"]
        return cls(transferred=ram["transferred"], normal_pages=ram["normal"],
                   duplicate_pages=ram["duplicate"], normal_bytes=ram["normal-bytes"],
                   total_time_ms=info["total-time"], setup_time_ms=info.get("setup-time", 0),
                   downtime_ms=info.get("downtime", 0),
                   dirty_sync_count=ram["dirty-sync-count"])


def migrate_to_null(vm: GuestVM, timeout: float = MIGRATION_TIMEOUT_S) -> MigrationResult:
    """Migrate the running guest into `cat > /dev/null` at unlimited bandwidth, wait until it
    completed, then let the guest run on (QEMU keeps it paused after a migration)."""
    q = vm.qmp
    q.migrate_set_parameters(max_bandwidth=UNLIMITED_BANDWIDTH)
    q.migrate(MIGRATE_URI)
    info = q.wait_migration(timeout)
    q.execute("cont")
    status = q.execute("query-status")
    assert status["running"], f"the guest did not resume after the migration: {status}"
    return MigrationResult.from_query(info)


class HintTracer:
    """Times every run of a driver's hint worker with the guest kernel's function_graph
    tracer, limited to that one function (set_ftrace_filter), so nothing else is slowed."""

    TRACING = "/sys/kernel/debug/tracing"
    LINE = re.compile(r"([\d.]+) us\s+\|\s+(\w+)")

    def __init__(self, vm: GuestVM, function: str):
        self.vm = vm
        self.function = function

    def start(self) -> None:
        t = self.TRACING
        self.vm.sh(f"""set -e
echo 0 > {t}/tracing_on
echo nop > {t}/current_tracer
echo {self.function} > {t}/set_ftrace_filter
echo {self.function} > {t}/set_graph_function
echo 1 > {t}/max_graph_depth
echo function_graph > {t}/current_tracer
echo > {t}/trace
echo 1 > {t}/tracing_on
""")

    def durations_ms(self) -> list[float]:
        """Wall time of each completed run so far (sleeps included), in ms."""
        out = self.vm.sh(f"cat {self.TRACING}/trace")
        return [float(m.group(1)) / 1000 for m in self.LINE.finditer(out)
                if m.group(2) == self.function]

    def stop(self) -> None:
        t = self.TRACING
        self.vm.sh(f"echo 0 > {t}/tracing_on; echo nop > {t}/current_tracer; "
                   f"echo > {t}/set_graph_function; echo > {t}/set_ftrace_filter")


def wait_rss_drop(vm: GuestVM, rss0: int, drop: int, timeout: float,
                  interval: float = 0.25) -> tuple[int, float]:
    """Poll QEMU's VmRSS until it is `drop` bytes below rss0 or `timeout` s passed.
    Returns (the largest drop seen, seconds until it first reached `drop`, or the timeout)."""
    t0 = time.monotonic()
    best = 0
    while True:
        best = max(best, rss0 - vm.qemu_rss_bytes())
        elapsed = time.monotonic() - t0
        if best >= drop or elapsed > timeout:
            return best, elapsed
        time.sleep(interval)  # poll interval, bounded by the timeout above



# QEMU's RSS is settled when it moved by less than this in `quiet_s` (free page reporting
# hands back about 256 MiB per 2 s pass).
RSS_SETTLE_SLACK = 8 * MIB
RSS_SETTLE_QUIET_S = 4.0


def wait_rss_settled(vm: GuestVM, timeout: float) -> int:
    """Poll QEMU's VmRSS until it stayed within RSS_SETTLE_SLACK for RSS_SETTLE_QUIET_S, or
    `timeout` s passed; returns it."""
    deadline = time.monotonic() + timeout
    ref, since = vm.qemu_rss_bytes(), time.monotonic()
    while True:
        time.sleep(0.5)  # poll interval, bounded by the deadline below
        rss, now = vm.qemu_rss_bytes(), time.monotonic()
        if abs(rss - ref) > RSS_SETTLE_SLACK:
            ref, since = rss, now
        elif now - since >= RSS_SETTLE_QUIET_S or now > deadline:
            return rss


@dataclasses.dataclass
class HintRun:
    """One hinted migration next to the unhinted migration of the same guest state."""
    baseline: MigrationResult       # the driver unloaded: no hints
    hinted: MigrationResult
    hint_ms: list[float]            # each run of the driver's hint work item (HintTracer)
    free_before_kib: int            # guest free memory just before the hinted migration
    free_after_kib: int             # ... once DONE gave the blocks back (or the deadline)
    counters: dict[str, int] | None  # vballoon's, after DONE; None for the in-tree driver

    @property
    def ratio(self) -> float:
        return self.hinted.transferred / self.baseline.transferred

    @property
    def handed_blocks_over(self) -> bool:
        """The guest ran a hinting round that gave the device blocks."""
        if self.counters is not None:
            return self.counters["hint_blocks"] > 0
        return any(d >= HINT_ROUND_MIN_MS for d in self.hint_ms)

    @property
    def blocks_back(self) -> bool:
        """Every block the guest held as a hint is free again."""
        if self.free_after_kib < self.free_before_kib - FREE_BACK_SLACK_KIB:
            return False
        if self.counters is None:
            return True
        c = self.counters
        return c["hint_pages_returned"] + c["hint_pages_released_early"] == c["hint_pages"]

    def describe(self, i: int) -> str:
        b, h = self.baseline, self.hinted
        held = ""
        if self.counters is not None:
            held = (f", {self.counters['hint_rounds']} rounds held "
                    f"{self.counters['hint_pages'] * PAGE_BYTES // MIB} MiB in "
                    f"{self.counters['hint_blocks']} blocks")
        return (f"  run {i + 1}: no hint {b.transferred / MIB:7.1f} MiB in {b.total_time_ms} ms, "
                f"hint {h.transferred / MIB:7.1f} MiB in {h.total_time_ms} ms "
                f"(x{self.ratio:.3f}); hint work {', '.join(f'{d:.1f}' for d in self.hint_ms)}"
                f" ms{held}; free {self.free_before_kib // 1024} -> "
                f"{self.free_after_kib // 1024} MiB")


def hinted_migration_run(vm: GuestVM, drv, label: str, fill_mib: int) -> HintRun:
    """The guest writes `fill_mib` MiB to tmpfs and deletes it; the same guest then migrates
    twice, first with its driver unloaded (the unhinted bytes of exactly this memory state),
    then with it loaded. Returns once the guest has the hinted blocks back (QEMU says DONE
    when the migration ends) or FREE_BACK_WITHIN_S passed."""
    tracer = HintTracer(vm, HINT_WORKER[label])
    dirty_and_free(vm, fill_mib)
    vm.unload_driver(drv)
    baseline = migrate_to_null(vm)
    vm.load_driver(drv)
    tracer.start()  # the function is the newly loaded module's
    free_before = vm.free_kib()
    hinted = migrate_to_null(vm)
    hint_ms = tracer.durations_ms()
    tracer.stop()
    deadline = time.monotonic() + FREE_BACK_WITHIN_S
    while True:
        run = HintRun(baseline, hinted, hint_ms, free_before, vm.free_kib(),
                      vm.vballoon_counters() if label == "vballoon" else None)
        if run.blocks_back or time.monotonic() > deadline:
            return run
        time.sleep(0.2)  # poll interval, bounded by the deadline above


def hint_report(runs: list[HintRun]) -> str:
    return "\n" + "\n".join(r.describe(i) for i, r in enumerate(runs))


def check_hinted_runs_were_sound(runs: list[HintRun]) -> None:
    """What holds in every run whatever the race did: after QEMU's DONE the guest has every
    hinted block back; and vballoon (whose counters say so) ran a round that held most of
    the freed memory."""
    report = hint_report(runs)
    for i, r in enumerate(runs):
        assert r.blocks_back, f"run {i + 1}: the hinted blocks did not all come back:{report}"
        if r.counters is not None:
            held_mib = r.counters["hint_pages"] * PAGE_BYTES // MIB
            assert r.counters["hint_rounds"] >= 1 and held_mib >= HINT_HELD_MIN_MIB, \
                f"run {i + 1}: the round held only {held_mib} MiB:{report}"
