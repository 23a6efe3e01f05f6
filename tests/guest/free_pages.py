# SPDX-License-Identifier: GPL-2.0
"""Guest workloads and host-side measurements for free page hinting and reporting.

  write_tmpfs / delete_tmpfs   fill the guest's tmpfs with non-zero data, then free it all
  migrate_to_null              one live migration into `exec:cat > /dev/null` at unlimited
                               bandwidth, measured by QEMU's own counters; the guest resumes
  HintTracer                   the duration of each run of a driver's hint work item in the
                               guest, from the kernel's function_graph tracer
  wait_rss_drop                poll QEMU's resident size until it fell by a given amount

Sizes: QEMU counts pages of 4 KiB (TARGET_PAGE_SIZE on x86).
"""

from __future__ import annotations

import dataclasses
import re
import time

from guestvm import GuestVM, MIB

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
