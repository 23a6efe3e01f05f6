# SPDX-License-Identifier: GPL-2.0
"""Calibration of the migration model against real QEMU 7.2: the same workload program the
model runs (vbwork, built from the simulator's own generator) in a 2 GiB guest with
vballoon, migrated into `exec:cat > /dev/null`, with QEMU's own counters per migration.

  workload   fresh, freed, busy (vbwork's defaults, sizes relative to 2048 MiB)
  strategy   none, hint (free-page-hint), report (free-page-reporting), hint+report
  link       unlimited (max-bandwidth 1 TiB/s) and 1 Gbit/s (max-bandwidth 125000000)
  runs       3 of each

One boot per workload and strategy; its vbwork process runs through all six migrations
(the guest resumes with `cont` after each completed migration, as QEMU 7.2 allows), so
every migration sees the same state: fresh and freed do not change while they wait; busy
runs at its steady state (warmed up for warmup_ms before the first migration, and given
BUSY_RESUME_S after each `cont` to catch up on what it owed while the guest was paused).
With reporting the migration starts once QEMU's RSS stopped falling (the guest reported
what it freed); without it the guest's free memory is left as it is.

Every migration records the machine's load average (2 cores shared with other jobs: times
are noisy; bytes and page counts are what the model is compared on) and, for busy, the
rates vbwork reached (SIGUSR1). Written as JSON ($VBALLOON_CALIBRATION_JSON, default
<work>/calibration.json); the committed figures are tests/guest/calibration/qemu-7.2*.json
(the latest, on an idle machine, in one sitting with the model's run:
qemu-7.2-idle-20261203.json).

Marked calibration and left out of the default run: `pytest tests/guest -m calibration`
(about 11 minutes here, load average 5-11). With `VBALLOON_QEMU=$(ci/install-qemu10.sh)` the
same runs go through QEMU 10.0 (multifd off, its default, into the same pipe; the JSON names
the QEMU): tests/guest/calibration/qemu-10.0-*.json.
"""

from __future__ import annotations

import json
import os
import platform
import time

import pytest

import conftest
import free_pages
import guest_image
import guestvm
import vbwork_run
from guestvm import MIB

WORKLOADS = ("fresh", "freed", "busy")
STRATEGIES = (("none", {}),
              ("hint", {"free-page-hint": "on"}),
              ("report", {"free-page-reporting": "on"}),
              ("hint+report", {"free-page-hint": "on", "free-page-reporting": "on"}))
UNLIMITED = 1 << 40
GBIT = 125_000_000
LINKS = (("unlimited", UNLIMITED), ("1gbit", GBIT))
RUNS = int(os.environ.get("VBALLOON_CALIBRATION_RUNS", "3"))
GUEST_RAM_MIB = 2048
MIGRATE_URI = "exec:cat > /dev/null"
# A migration that has not converged after this long is cancelled and recorded as such
# (QEMU 7.2 keeps iterating forever unless it converges).
MIGRATION_TIMEOUT_S = 240.0
BUSY_RESUME_S = 3.0
SETTLE_TIMEOUT_S = 60.0
# VBALLOON_CALIBRATION_SHUFFLE=1 boots with page_alloc.shuffle=1 (the model's
# --shuffle-free-list); rows say which.
SHUFFLE = os.environ.get("VBALLOON_CALIBRATION_SHUFFLE") == "1"

ROWS: list[dict] = []


def json_path() -> str:
    return os.environ.get("VBALLOON_CALIBRATION_JSON",
                          os.path.join(guest_image.work_dir(), "calibration.json"))


def _migrate(vm, bandwidth: int) -> dict:
    q = vm.qmp
    q.migrate_set_parameters(max_bandwidth=bandwidth)
    load_before = os.getloadavg()
    q.migrate(MIGRATE_URI)
    deadline = time.monotonic() + MIGRATION_TIMEOUT_S
    status = None
    while True:
        info = q.query_migrate()
        status = info.get("status")
        if status in ("completed", "failed", "cancelled"):
            break
        if time.monotonic() > deadline:
            q.execute("migrate_cancel")
            while q.query_migrate().get("status") not in ("cancelled", "failed", "completed"):
                time.sleep(0.2)  # poll interval: cancelling takes an iteration
            info = q.query_migrate()
            status = "timed-out"
            break
        time.sleep(0.05)  # poll interval, bounded by the deadline above
    if q.execute("query-status")["status"] != "running":
        q.execute("cont")
    assert q.execute("query-status")["running"], "the guest did not resume"
    ram = info.get("ram", {})
    return {"status": status, "transferred": ram.get("transferred"),
            "normal_pages": ram.get("normal"), "zero_pages": ram.get("duplicate"),
            "normal_bytes": ram.get("normal-bytes"), "rounds": ram.get("dirty-sync-count"),
            "total_time_ms": info.get("total-time"), "downtime_ms": info.get("downtime"),
            "setup_time_ms": info.get("setup-time"), "mbps": ram.get("mbps"),
            "load_average_before": load_before, "load_average_after": os.getloadavg()}


CASES = [(w, s, p) for w in WORKLOADS for s, p in STRATEGIES]


@pytest.mark.calibration
@pytest.mark.parametrize("workload,strategy,props", CASES,
                         ids=[f"{w}-{s}" for w, s, _ in CASES])
def test_calibration(vballoon_image, workload, strategy, props):
    dut = vballoon_image
    holder = conftest.VMHolder(dut, f"cal-{workload}-{strategy}", props,
                               append="page_alloc.shuffle=1" if SHUFFLE else "")
    try:
        vm = holder.get()
        conftest.reset_guest(vm, dut.drv)
        used_kib = vm.meminfo()["MemTotal"] - vm.meminfo()["MemFree"]
        params = vbwork_run.start(vm, f"{workload} --ram-mib {GUEST_RAM_MIB}")
        vm_counters = []
        for run in range(RUNS):
            for link, bandwidth in LINKS:
                if "free-page-reporting" in props:
                    free_pages.wait_rss_settled(vm, SETTLE_TIMEOUT_S)
                stats = vbwork_run.stats(vm) if workload == "busy" else None
                r = _migrate(vm, bandwidth)
                if workload == "busy":
                    time.sleep(BUSY_RESUME_S)  # vbwork catches up after the pause (pacing)
                counters = vm.vballoon_counters()
                vm_counters.append(counters)
                row = dict(r, workload=workload, strategy=strategy, link=link,
                           max_bandwidth=bandwidth, run=run, vbwork_stats=stats,
                           guest_used_kib_at_boot=used_kib, vbwork_params=params,
                           shuffled_free_lists=SHUFFLE,
                           hint_rounds=counters.get("hint_rounds"),
                           hint_blocks=counters.get("hint_blocks"))
                ROWS.append(row)
                print(f"{workload} {strategy} {link} run {run}: {r['status']} "
                      f"{(r['transferred'] or 0) / MIB:.1f} MiB normal {r['normal_pages']} "
                      f"zero {r['zero_pages']} rounds {r['rounds']} {r['total_time_ms']} ms "
                      f"load {r['load_average_before'][0]:.1f}", flush=True)
                _write_json()
        vbwork_run.stop(vm)
        taint = vm.taint() & guestvm.TAINT_BAD
        assert not taint, f"the guest kernel got tainted {guestvm.taint_letters(taint)}"
    finally:
        holder.close()
    mine = [r for r in ROWS if r["workload"] == workload and r["strategy"] == strategy]
    assert len(mine) == RUNS * len(LINKS)
    assert all(r["status"] == "completed" for r in mine), \
        [(r["link"], r["run"], r["status"]) for r in mine]


def _write_json() -> None:
    path = json_path()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    doc = {"how": {"qemu": _qemu_version(), "accel": guestvm.TCG_ACCEL, "guest_ram_mib": GUEST_RAM_MIB,
                   "smp": 2, "driver": "vballoon", "boot": "init_on_alloc=0",
                   "migration": f"{MIGRATE_URI}, max-bandwidth unlimited ({UNLIMITED}) "
                                f"or 1 Gbit/s ({GBIT}), QEMU 7.2 defaults otherwise "
                                "(downtime-limit 300 ms, no multifd)",
                   "workload": "tests/guest/vbwork (device-sim/migration/workload_generator.c)",
                   "host": platform.node(), "cpus": os.cpu_count(),
                   "note": "2 cores shared with other jobs: times are noisy, see load_average",
                   "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           "rows": ROWS}
    with open(path + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def _qemu_version() -> str:
    import migration_table  # noqa: PLC0415
    return migration_table._qemu_version()
