#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A running VM's own profile, as the workload description `vballoon-sim compare` takes.

Reads a running QEMU guest over QMP and writes the flat JSON description of
docs/migration-model.md ("Described workloads"), so a user can ask what hints would buy for
this VM on a given link:

    tools/vm_profile.py --qmp /run/vm1/qmp.sock --qemu-pid 1234 -o vm1.json
    build/tools/vballoon-sim compare --workload-file vm1.json --link-gbit 10

What it reads and what each key comes from (docs/migration-model.md, "A running VM's profile",
says how close it comes on a guest running a known description):
- `ram_mib`: query-memory-size-summary's base memory.
- the balloon's statistics (guest-stats of the virtio-balloon device, polled once a second
  while the profile is taken, then left as they were): total, free, available and disk-cache
  memory. Needs a balloon driver with the stats queue in the guest (Linux's or vballoon).
- `hot_mib_s`, `hot_mib`: calc-dirty-rate over a short window and a long one: the pages the
  guest wrote, each counted once per window. By default in page-sampling mode (4096 pages
  per GiB hashed at the window's start and end; works on any accelerator), or
  `--dirty-mode dirty-bitmap` (every page, through the dirty log; QEMU 7.2 dereferences a
  NULL KVM state there under TCG and dies, so only with KVM). The short window's rate
  is how fast the guest dirties memory; the pages dirtied in the long window, a hot set that
  was rewritten in a cycle shorter than it, otherwise a lower bound that already covers what
  a migration's rounds see. Every write is taken as the hot set's: a page cache rewritten in
  place cannot be told apart from outside the guest.
- `cache_mib`: the disk caches, held and not rewritten (their writes are in the hot set).
- `working_set_mib`: memory in use (total less free), less the caches and the hot set.
- `freed_mib`: memory the guest wrote and then freed, which zero detection must scan and
  send while hints and reports skip it. Only the host sees it: the pages of guest RAM QEMU
  has touched (the Rss of the RAM mapping in /proc/PID/smaps, `--qemu-pid`) less those the
  guest holds, i.e. touched + free - RAM: memory outside the guest's total (the kernel's
  image, its page structures, firmware) is taken as touched, so what of it was not (firmware
  holes, crash kernel reserves) is missing from the estimate. Memory freed and then handed
  out again is held, not freed, as it is in the model. Without the pid, a previous
  completed migration's normal pages stand in for touched (query-migrate); without either,
  0, and the comment says so.
- `init_on_free`, `init_on_alloc`: not visible over QMP; `--init-on-free`/`--init-on-alloc`
  say what the guest kernel booted with (default: neither, Debian's default is
  init_on_alloc=1).

Everything measured goes into the description's `comment`, and with `--report` also to stderr.
Exit status 2 on a bad argument, 1 when QEMU refuses what the profile needs (the error says
which command and why).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
# The project's QMP client (Debian 12 packages no QMP library), kept with the guest suite.
sys.path.insert(0, os.path.join(REPO, "tests", "guest"))

from qmp import QMP, QMPError  # noqa: E402

MIB = 1 << 20
PAGE_BYTES = 4096
BALLOON_TYPES = ("virtio-balloon-pci", "virtio-balloon-pci-transitional",
                 "virtio-balloon-pci-non-transitional", "virtio-balloon-ccw",
                 "virtio-balloon-device")
STATS_WANTED = ("stat-total-memory", "stat-free-memory", "stat-available-memory",
                "stat-disk-caches")
# QEMU's most (its range is 128..4096): 256 samples in a 64 MiB hot set.
SAMPLE_PAGES_PER_GIB = 4096
DIRTY_MODES = ("page-sampling", "dirty-bitmap")
# A dirty rate below this is the guest's background (timers, logging): no hot set.
IDLE_MIB_S = 1.0
# The long window's rate under this share of the short one's: the hot set was rewritten
# within the long window, so its pages dirtied there are the hot set itself.
SATURATED_SHARE = 0.8


class ProfileError(RuntimeError):
    """QEMU could not give what the profile needs; says which command and why."""


def find_balloon(qmp: QMP) -> str:
    """The QOM path of the guest's balloon device (with or without an id)."""
    for parent in ("/machine/peripheral", "/machine/peripheral-anon"):
        try:
            children = qmp.execute("qom-list", {"path": parent})
        except QMPError:
            continue
        for child in children:
            kind = child.get("type", "")
            if kind.startswith("child<") and kind[6:-1] in BALLOON_TYPES:
                return f"{parent}/{child['name']}"
    raise ProfileError("no virtio-balloon device in /machine/peripheral or "
                       "/machine/peripheral-anon (give its path with --balloon-path)")


def balloon_stats(qmp: QMP, path: str, timeout_s: float) -> dict:
    """One fresh set of the balloon's statistics, in bytes. Polls them once a second for as
    long as it takes, then puts the polling interval back as it was."""
    old_interval = qmp.qom_get(path, "guest-stats-polling-interval")
    first = qmp.qom_get(path, "guest-stats").get("last-update", 0)
    qmp.qom_set(path, "guest-stats-polling-interval", 1)
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            s = qmp.qom_get(path, "guest-stats")
            stats = s.get("stats", {})
            fresh = s.get("last-update", 0) > first
            if fresh and all(stats.get(k, -1) >= 0 for k in STATS_WANTED[:2]):
                return {k: stats.get(k, -1) for k in STATS_WANTED}
            if time.monotonic() > deadline:
                raise ProfileError(
                    f"the balloon's guest-stats at {path} gave no total and free memory within "
                    f"{timeout_s:.0f} s (is a balloon driver with the stats queue loaded in "
                    f"the guest?): {s}")
            time.sleep(0.2)  # poll interval, bounded by the deadline above
    finally:
        qmp.qom_set(path, "guest-stats-polling-interval", old_interval)


def dirty_rate_mib_s(qmp: QMP, window_s: int, mode: str, timeout_s: float) -> float:
    """The guest's dirty rate over `window_s` seconds: the pages it wrote, each once, per
    second (calc-dirty-rate)."""
    args = {"calc-time": window_s, "mode": mode}
    if mode == "page-sampling":
        args["sample-pages"] = SAMPLE_PAGES_PER_GIB
    try:
        qmp.execute("calc-dirty-rate", args)
    except QMPError as e:
        raise ProfileError(f"calc-dirty-rate refused: {e}") from e
    deadline = time.monotonic() + window_s + timeout_s
    while True:
        r = qmp.execute("query-dirty-rate")
        if r.get("status") == "measured":
            return float(r["dirty-rate"])
        if time.monotonic() > deadline:
            raise ProfileError(f"query-dirty-rate not measured {timeout_s:.0f} s after its "
                               f"{window_s} s window: {r}")
        time.sleep(0.1)  # poll interval, bounded by the deadline above


def ram_mapping_rss_bytes(pid: int, ram_bytes: int) -> int:
    """Rss of QEMU's guest RAM mapping: the mapping of exactly the RAM's size (the main RAM
    block; below 4 GiB on x86 QEMU maps it whole and aliases the hole)."""
    path = f"/proc/{pid}/smaps"
    best = None
    size = None
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "-" in line.split(" ", 1)[0] and ":" not in line.split(" ", 1)[0]:
                    lo, hi = (int(x, 16) for x in line.split(" ", 1)[0].split("-"))
                    size = hi - lo
                elif line.startswith("Rss:") and size is not None:
                    if size >= ram_bytes and (best is None or size < best[0]):
                        best = (size, int(line.split()[1]) * 1024)
                    size = None
    except OSError as e:
        raise ProfileError(f"cannot read {path}: {e}") from e
    if best is None:
        raise ProfileError(f"no mapping of at least {ram_bytes // MIB} MiB in {path}: "
                           f"is {pid} the guest's QEMU?")
    return best[1]


def profile(qmp: QMP, *, qemu_pid: int | None = None, short_window_s: int = 1,
            long_window_s: int = 5, dirty_mode: str = "page-sampling",
            balloon_path: str | None = None,
            init_on_free: bool = False, init_on_alloc: bool = False,
            name: str = "vm-profile", timeout_s: float = 30.0) -> tuple[dict, dict]:
    """(description, measurements) of the guest behind `qmp`."""
    ram_bytes = int(qmp.execute("query-memory-size-summary")["base-memory"])
    path = balloon_path or find_balloon(qmp)
    stats = balloon_stats(qmp, path, timeout_s)
    short = dirty_rate_mib_s(qmp, short_window_s, dirty_mode, timeout_s)
    long = dirty_rate_mib_s(qmp, long_window_s, dirty_mode, timeout_s)
    previous = qmp.query_migrate()

    total, free = stats["stat-total-memory"], stats["stat-free-memory"]
    caches = max(0, stats["stat-disk-caches"])
    touched_from = None
    touched = None
    if qemu_pid is not None:
        touched = ram_mapping_rss_bytes(qemu_pid, ram_bytes)
        touched_from = f"Rss of pid {qemu_pid}'s RAM mapping"
    elif previous.get("status") == "completed" and "ram" in previous:
        touched = int(previous["ram"]["normal"]) * PAGE_BYTES
        touched_from = "the previous migration's normal pages"

    if short < IDLE_MIB_S:
        hot_mib_s, hot_mib = 0.0, 0
    else:
        hot_mib_s = round(short, 1)
        hot_mib = max(1, round(long * long_window_s))
    used = max(0, total - free)
    cache_mib = caches // MIB
    working_set_mib = max(0, (used - caches) // MIB - hot_mib)
    freed_mib = 0 if touched is None else max(0, (touched + free - ram_bytes) // MIB)

    measured = {
        "ram_bytes": ram_bytes, "balloon_path": path, "balloon_stats": stats,
        "dirty_mode": dirty_mode,
        "dirty_rate_mib_s": {f"{short_window_s}s": short, f"{long_window_s}s": long},
        "hot_set_saturated": bool(short >= IDLE_MIB_S and long < SATURATED_SHARE * short),
        "touched_bytes": touched, "touched_from": touched_from,
        "previous_migration": {k: previous.get(k) for k in ("status", "total-time", "downtime")}
        | ({"ram": previous["ram"]} if "ram" in previous else {}),
    }
    hot_seen = ("hot set rewritten within the window" if measured["hot_set_saturated"]
                else "hot set at least what the long window dirtied")
    touched_seen = (f"touched {touched // MIB} MiB ({touched_from})" if touched is not None
                    else "freed memory unknown (no --qemu-pid, no previous migration): 0")
    comment = (f"profile of a running VM, {time.strftime('%Y-%m-%d %H:%M:%S')}: total "
               f"{total // MIB} MiB, free {free // MIB} MiB, disk caches {cache_mib} MiB; dirty "
               f"rate {short:.1f} MiB/s over {short_window_s} s, {long:.1f} MiB/s over "
               f"{long_window_s} s ({hot_seen}); {touched_seen}")
    description = {
        "name": name, "comment": comment, "ram_mib": ram_bytes // MIB,
        "working_set_mib": working_set_mib, "freed_mib": freed_mib,
        "hot_mib": hot_mib, "hot_mib_s": hot_mib_s,
        "cache_mib": cache_mib, "cache_mib_s": 0,
        "init_on_free": init_on_free, "init_on_alloc": init_on_alloc,
    }
    return description, measured


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--qmp", required=True, help="the VM's QMP unix socket")
    ap.add_argument("--qemu-pid", type=int, help="the VM's QEMU process, for its freed memory")
    ap.add_argument("--short-window-s", type=int, default=1)
    ap.add_argument("--long-window-s", type=int, default=5)
    ap.add_argument("--dirty-mode", choices=DIRTY_MODES, default="page-sampling")
    ap.add_argument("--balloon-path", help="QOM path of the balloon (default: found)")
    ap.add_argument("--init-on-free", action="store_true")
    ap.add_argument("--init-on-alloc", action="store_true")
    ap.add_argument("--name", default="vm-profile")
    ap.add_argument("-o", "--out", help="write the description here (default: stdout)")
    ap.add_argument("--report", action="store_true", help="what was measured, to stderr")
    args = ap.parse_args(argv)
    if not 1 <= args.short_window_s < args.long_window_s <= 60:
        ap.error("the windows must satisfy 1 <= --short-window-s < --long-window-s <= 60")
    if args.qemu_pid is not None and not os.path.exists(f"/proc/{args.qemu_pid}"):
        ap.error(f"--qemu-pid {args.qemu_pid}: no such process")
    if not os.path.exists(args.qmp):
        ap.error(f"--qmp {args.qmp}: no such socket")
    try:
        qmp = QMP(args.qmp)
        try:
            description, measured = profile(
                qmp, qemu_pid=args.qemu_pid, short_window_s=args.short_window_s,
                long_window_s=args.long_window_s, dirty_mode=args.dirty_mode,
                balloon_path=args.balloon_path,
                init_on_free=args.init_on_free, init_on_alloc=args.init_on_alloc,
                name=args.name)
        finally:
            qmp.close()
    except (ProfileError, QMPError, OSError, TimeoutError) as e:
        print(f"vm_profile: {e}", file=sys.stderr)
        return 1
    text = json.dumps(description, indent=2) + "\n"
    if args.out:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    if args.report:
        print(json.dumps(measured, indent=2), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
