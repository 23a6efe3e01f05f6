#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""The timeline of real QEMU 7.2 migrations of the calibration guest, from QEMU's own trace
events: where the time of a hinted migration at an unlimited link goes, beside the same
migration without hints.

    /usr/bin/python3 tests/guest/hint_timeline.py [--workload fresh] [--runs 2] [--out FILE.json]

Boots the calibration guest (tests/guest/test_calibration.py: 2 GiB, 2 vCPUs on one TCG
thread, vballoon, init_on_alloc=0, vbwork), once with free-page-hint and once without, and
migrates each into `exec:cat > /dev/null` at unlimited bandwidth with these QEMU trace
events on (the log backend, `-msg timestamp=on`: each line has the emitting thread's id and
the host's wall clock in microseconds):

  migrate_set_state            setup, active, device (the VM stopped), completed
  migration_bitmap_sync_*      every bitmap sync (the balloon stops its hint round before
                               one and starts a new one after it)
  savevm_state_iterate         each call of ram_save_iterate: one 50 ms iteration, at whose
                               end the migration thread drops the bitmap mutex
  migration_completion_vm_stop stop-and-copy
  virtio_balloon_get_config    the guest reads the config (the new cmd id) after the
                               host's config interrupt
  virtio_queue_notify          the guest kicks a queue (vballoon: the id, every hint block
                               and STOP in one chain, one kick)
  virtqueue_pop / virtqueue_fill  the device's iothread takes a free page queue element and
                               gives it back: between them it applied the element's hints,
                               one bitmap mutex acquisition per segment
  migration_bitmap_clear_dirty the first clear of each 1 GiB chunk's dirty log

plus every QEMU thread's time on a CPU and waiting on a runqueue during the migration
(/proc/<pid>/task/<tid>/schedstat, threads named by `-name debug-threads=on`), `cat`'s CPU
(its shell's `times`, 10 ms ticks), the guest's hint work item (its function_graph tracer), the load average
before and after, and QEMU's counters. Not a test: a measurement for the migration model's
calibration (docs/migration-model.md), run by hand; it fails loudly when QEMU is missing.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import conftest  # noqa: E402
import free_pages  # noqa: E402
import guest_image  # noqa: E402
import guestvm  # noqa: E402
import qmp  # noqa: E402

EVENTS = ("migrate_set_state", "migration_bitmap_sync_start", "migration_bitmap_sync_end",
          "savevm_state_iterate", "savevm_state_setup", "migration_completion_vm_stop",
          "migration_thread_setup_complete", "savevm_state_complete_precopy",
          "virtio_balloon_get_config", "virtio_balloon_set_config", "virtio_queue_notify",
          "virtqueue_pop", "virtqueue_fill", "migration_bitmap_clear_dirty",
          "ram_save_iterate_big_wait")
UNLIMITED = 1 << 40
GUEST_RAM_MIB = 2048
# What reads the migration stream (QEMU's exec: runs it with /bin/sh -c). F_SETPIPE_SZ is
# 1031 on Linux.
READERS = {"cat": "cat > /dev/null",
           "bigpipe": "/usr/bin/python3 -S -c 'import fcntl, os; fcntl.fcntl(0, 1031, 1 << 20)\n"
                      "while os.read(0, 1 << 20): pass'"}
LINE = re.compile(r"^(\d+)@(\d+)\.(\d+):(\w+)\s*(.*)$")


def thread_schedstat(pid: int) -> dict[str, list[float]]:
    """Per thread (`name/tid`): ms on a CPU, ms waiting on a runqueue (ready but not
    running: the host's CPU contention), timeslices (/proc/.../schedstat), and voluntary
    context switches (the thread slept: on a pipe, a mutex, a condition)."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                name = f.read().strip()
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                run_ns, wait_ns, slices = (int(x) for x in f.read().split())
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                status = f.read()
        except (FileNotFoundError, ProcessLookupError, ValueError):
            continue
        sleeps = int(re.search(r"^voluntary_ctxt_switches:\s+(\d+)", status, re.M).group(1))
        out[f"{name}/{tid}"] = [run_ns / 1e6, wait_ns / 1e6, slices, sleeps]
    return out


def descendants(pid: int) -> list[int]:
    """The processes under `pid` (the exec: shell and its reader)."""
    found = []
    todo = [pid]
    while todo:
        p = todo.pop()
        for tid in os.listdir(f"/proc/{p}/task") if os.path.isdir(f"/proc/{p}/task") else []:
            try:
                with open(f"/proc/{p}/task/{tid}/children") as f:
                    kids = [int(k) for k in f.read().split()]
            except (FileNotFoundError, ProcessLookupError):
                continue
            found += kids
            todo += kids
    return found


def parse_trace(path: str, t0: float) -> list[dict]:
    events = []
    with open(path, errors="replace") as f:
        for line in f:
            m = LINE.match(line.strip())
            if not m:
                continue
            t = int(m.group(2)) + int(m.group(3)) / 1e6
            events.append({"ms": round((t - t0) * 1000, 3), "tid": int(m.group(1)),
                           "event": m.group(4), "args": m.group(5)})
    return events


def migrate_traced(vm, q, trace_log: str, cat_times: str, reader: str) -> dict:
    traced = []
    for e in EVENTS:
        try:
            q.execute("trace-event-set-state", {"name": e, "enable": True})
            traced.append(e)
        except qmp.QMPError as err:
            # Trace events come and go between QEMU versions (10.0 has no
            # savevm_state_complete_precopy): say which one this QEMU lacks, go on.
            if "unknown event" not in str(err):
                raise
            print(f"# this QEMU has no trace event {e}", file=sys.stderr)
    q.migrate_set_parameters(max_bandwidth=UNLIMITED)
    pid = vm.pid
    sched0 = thread_schedstat(pid)
    sched_last: dict[str, list[float]] = {}
    load0 = os.getloadavg()
    with open(trace_log, "a") as f:
        f.flush()
    log_start = os.path.getsize(trace_log)
    t0 = time.time()
    # `times` prints the shell's children's CPU (cat's) when cat has read the whole stream.
    q.migrate(f"exec:{reader}; times > {cat_times}")
    while True:
        info = q.query_migrate()
        if info.get("status") in ("completed", "failed", "cancelled"):
            break
        # The migration thread ends with the migration: keep each thread's last reading.
        sched_last.update(thread_schedstat(pid))
        for child in descendants(pid):
            for k, v in thread_schedstat(child).items():
                sched_last["reader " + k] = v
        time.sleep(0.01)  # poll interval; the migration takes well under a second
    sched_last.update(thread_schedstat(pid))
    load1 = os.getloadavg()
    for e in traced:
        q.execute("trace-event-set-state", {"name": e, "enable": False})
    # QEMU refuses `cont` until the completed migration is finalized (its cleanup bh).
    deadline = time.monotonic() + 10
    while q.execute("query-status")["status"] != "running":
        try:
            q.execute("cont")
        except qmp.QMPError:
            assert time.monotonic() < deadline, "the guest did not resume"
            time.sleep(0.05)  # poll interval, bounded by the deadline
    time.sleep(0.5)  # the exec child's `times` lands after QEMU closed the pipe
    with open(trace_log, errors="replace") as f:
        f.seek(log_start)
        chunk = f.read()
    tmp = trace_log + ".run"
    with open(tmp, "w") as f:
        f.write(chunk)
    events = parse_trace(tmp, t0)
    cat = None
    if os.path.exists(cat_times):
        lines = open(cat_times).read().split("\n")
        cat = lines[1].strip() if len(lines) > 1 else None
        os.unlink(cat_times)
    ram = info.get("ram", {})
    return {"status": info.get("status"), "total_time_ms": info.get("total-time"),
            "setup_time_ms": info.get("setup-time"), "downtime_ms": info.get("downtime"),
            "transferred": ram.get("transferred"), "normal_pages": ram.get("normal"),
            "zero_pages": ram.get("duplicate"), "rounds": ram.get("dirty-sync-count"),
            "load_average_before": load0, "load_average_after": load1,
            # run ms, runqueue wait ms, timeslices, sleeps per thread, from the migration's start
            # to the last poll before QEMU said completed (10 ms polls: the migration
            # thread's last few ms may be missing).
            "thread_sched": {k: [round(v[i] - sched0.get(k, [0, 0, 0, 0])[i], 2) for i in range(4)]
                             for k, v in sched_last.items()},
            "cat_times": cat, "events": events}


def summarize(run: dict) -> str:
    ev = run["events"]
    lines = [f"total {run['total_time_ms']} ms, setup {run['setup_time_ms']}, downtime "
             f"{run['downtime_ms']}, normal {run['normal_pages']}, zero {run['zero_pages']}, "
             f"syncs {run['rounds']}, load {run['load_average_before'][0]:.2f}"]
    for e in ev:
        lines.append(f"  {e['ms']:9.3f} ms  tid {e['tid']:>7}  {e['event']} {e['args'][:90]}")
    sched = {k: v for k, v in run["thread_sched"].items() if v[0] > 0.5}
    lines.append(f"  threads [run ms, runqueue wait ms, slices, sleeps]: {sched}")
    lines.append(f"  cat (user sys): {run['cat_times']}")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", default="fresh")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--strategies", default="none,hint")
    ap.add_argument("--reader", choices=sorted(READERS), default="cat",
                    help="what reads the stream: cat (the calibration's), or a reader that "
                         "first grows the pipe to 1 MiB (fewer hand-offs between QEMU and it)")
    ap.add_argument("--out", default=os.path.join(guest_image.work_dir(), "hint-timeline.json"))
    args = ap.parse_args()
    ko = guest_image.default_vballoon_ko()
    if not os.path.isfile(ko):
        sys.exit(guest_image.missing_vballoon_message(ko))
    img = guest_image.prepare(ko)
    drv = guestvm.vballoon_driver(img)
    doc = {"how": {"qemu": "7.2", "accel": guestvm.TCG_ACCEL, "guest_ram_mib": GUEST_RAM_MIB,
                   "workload": args.workload, "events": EVENTS,
                   "written": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           "runs": []}
    for strategy in args.strategies.split(","):
        props = {"free-page-hint": "on"} if strategy == "hint" else {}
        tmp = tempfile.mkdtemp(prefix="vb-timeline-")
        trace_log = os.path.join(tmp, "qemu-trace.log")
        vm = guestvm.GuestVM(img, name=f"timeline-{strategy}", ram_mib=GUEST_RAM_MIB,
                             balloon_props=props,
                             extra_args=["-msg", "timestamp=on", "-D", trace_log,
                                         "-name", "timeline,debug-threads=on"])
        vm.start()
        try:
            conftest.reset_guest(vm, drv)
            vm.sh(f"vbwork {args.workload} --ram-mib {GUEST_RAM_MIB} > /tmp/vbwork.out 2>&1 &")
            deadline = time.monotonic() + 300
            while "ready" not in vm.sh("cat /tmp/vbwork.out"):
                assert time.monotonic() < deadline, vm.sh("cat /tmp/vbwork.out")
                time.sleep(0.5)  # poll interval, bounded by the deadline
            tracer = None
            if strategy == "hint":
                tracer = free_pages.HintTracer(vm, free_pages.HINT_WORKER["vballoon"])
                tracer.start()
            for i in range(args.runs):
                run = migrate_traced(vm, vm.qmp, trace_log, os.path.join(tmp, "cat-times"),
                                     READERS[args.reader])
                run["reader"] = READERS[args.reader]
                run["strategy"] = strategy
                run["run"] = i
                if tracer:
                    run["guest_hint_work_ms"] = tracer.durations_ms()
                run["vballoon_counters"] = vm.vballoon_counters()
                doc["runs"].append(run)
                print(f"== {args.workload} {strategy} run {i}")
                print(summarize(run), flush=True)
                if tracer:
                    print(f"  guest hint work item ms: {run['guest_hint_work_ms']}")
                time.sleep(1.0)  # let the guest settle between migrations (DONE given back)
        finally:
            vm.stop()
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
