#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Inflate and deflate 1 GiB in a 2 GiB QEMU guest: vballoon vs the in-tree virtio_balloon.

One guest per driver, both booted in the same run; repetitions alternate between the drivers
so that a change in machine load hits both alike.  Each figure is the wall time from sending
the QMP `balloon` command until query-balloon reports the target, polled every --poll-ms
(QEMU rate-limits BALLOON_CHANGE events to one per second, too coarse to time with).

  python3 bench/guest/inflate_deflate.py [--reps 5] [--drivers in-tree,vballoon] [--json F]

Prints how it was run, a table with min and median per driver and direction, the ratio
ours / in-tree, and the same as JSON.  Exits 2 if vballoon.ko is asked for and missing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "guest"))

import guest_image  # noqa: E402
import guestvm  # noqa: E402
from guestvm import MIB  # noqa: E402

DRIVERS = ("in-tree", "vballoon")
TIMEOUT_S = 120.0


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def qemu_version() -> str:
    try:
        out = subprocess.run([guestvm.QEMU, "--version"], capture_output=True, text=True,
                             check=True).stdout
        return out.splitlines()[0]
    except (OSError, subprocess.CalledProcessError) as e:
        return f"unknown ({e})"


def timed_balloon(vm: guestvm.GuestVM, target: int, poll_s: float) -> float:
    """Seconds from the `balloon` command until query-balloon shows target."""
    q = vm.qmp
    t0 = time.monotonic()
    q.balloon(target)
    deadline = t0 + TIMEOUT_S
    while True:
        actual = q.balloon_actual()
        now = time.monotonic()
        if actual == target:
            return now - t0
        if now > deadline:
            raise guestvm.GuestError(f"[{vm.name}] balloon at {actual}, target {target}, "
                                     f"after {TIMEOUT_S} s")
        time.sleep(poll_s)  # poll interval, bounded by the deadline above


def summarize(xs: list[float]) -> dict:
    return {"min_s": min(xs), "median_s": statistics.median(xs), "max_s": max(xs),
            "samples_s": [round(x, 4) for x in xs]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--reps", type=int, default=5, help="measured repetitions (default 5)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="unmeasured inflate/deflate rounds per driver first (default 1)")
    ap.add_argument("--drivers", default=",".join(DRIVERS),
                    help="comma-separated subset of in-tree,vballoon (default both)")
    ap.add_argument("--ram-mib", type=int, default=2048, help="guest RAM (default 2048)")
    ap.add_argument("--size-mib", type=int, default=1024, help="balloon size (default 1024)")
    ap.add_argument("--poll-ms", type=float, default=5.0,
                    help="query-balloon poll interval (default 5 ms)")
    ap.add_argument("--dirty", action="store_true",
                    help="before each inflate, dirty and free the guest's free memory, so "
                         "QEMU must really drop resident pages (adds ~7 s per round)")
    ap.add_argument("--append", default="", help="extra guest kernel command line")
    ap.add_argument("--vballoon-ko", default=guest_image.default_vballoon_ko(),
                    help="default $VBALLOON_KO or <repo>/vballoon.ko")
    ap.add_argument("--json", metavar="FILE", help="also write the JSON result here")
    args = ap.parse_args(argv)

    drivers = [d.strip() for d in args.drivers.split(",") if d.strip()]
    bad = [d for d in drivers if d not in DRIVERS]
    if bad or not drivers:
        ap.error(f"unknown drivers {bad}; choose from {DRIVERS}")
    if "vballoon" in drivers and not os.path.isfile(args.vballoon_ko):
        print("inflate_deflate: " + guest_image.missing_vballoon_message(args.vballoon_ko)
              + "; or measure the in-tree driver alone with --drivers in-tree", file=sys.stderr)
        return 2

    ram = args.ram_mib * MIB
    target = ram - args.size_mib * MIB
    poll_s = args.poll_ms / 1000.0
    load_before = loadavg()

    vms: dict[str, guestvm.GuestVM] = {}
    results = {d: {"inflate": [], "deflate": []} for d in drivers}
    try:
        for d in drivers:
            img = guest_image.prepare(args.vballoon_ko if d == "vballoon" else None)
            drv = guestvm.vballoon_driver(img) if d == "vballoon" else guestvm.intree_driver(img)
            vm = guestvm.GuestVM(img, name=f"bench-{d}", ram_mib=args.ram_mib,
                                 append=args.append)
            vm.start()
            vm.load_driver(drv)
            vm.qmp.balloon(ram)
            vm.qmp.wait_balloon(ram, TIMEOUT_S)
            vms[d] = vm
            print(f"# booted {d} guest in {vm.boot_seconds:.1f} s", file=sys.stderr)

        def one_round(d: str, record: bool):
            vm = vms[d]
            if args.dirty:
                avail = vm.meminfo()["MemAvailable"] // 1024
                vm.sh(f"hog {avail - 128}", timeout=300)
            up = timed_balloon(vm, target, poll_s)
            down = timed_balloon(vm, ram, poll_s)
            if record:
                results[d]["inflate"].append(up)
                results[d]["deflate"].append(down)
            print(f"# {d:8s} {'rep' if record else 'warm-up'}: inflate {up:.3f} s, "
                  f"deflate {down:.3f} s", file=sys.stderr)

        for _ in range(args.warmup):
            for d in drivers:
                one_round(d, record=False)
        for _ in range(args.reps):
            for d in drivers:  # alternate: both drivers see the same machine conditions
                one_round(d, record=True)
        kver = next(iter(vms.values())).img.kver
        cmdline = next(iter(vms.values())).append
    except (guestvm.GuestError, guest_image.ImageError) as e:
        print(f"inflate_deflate: {e}", file=sys.stderr)
        return 1
    finally:
        for vm in vms.values():
            vm.stop()

    config = {
        "guest_ram_mib": args.ram_mib, "balloon_mib": args.size_mib,
        "guest_smp": 2, "accel": "tcg", "kernel": kver, "kernel_cmdline": cmdline,
        "init_on_alloc": 0 if "init_on_alloc=0" in cmdline.split() else "default (on)",
        "qemu": qemu_version(), "reps": args.reps, "warmup": args.warmup,
        "poll_ms": args.poll_ms, "dirty_before_inflate": args.dirty,
        "host": f"{platform.node()} {os.cpu_count()} cpus",
        "loadavg_before": load_before, "loadavg_after": loadavg(),
        "vballoon_ko": args.vballoon_ko if "vballoon" in drivers else None,
    }
    summary = {d: {k: summarize(v) for k, v in r.items()} for d, r in results.items()}
    ratio = {}
    if "in-tree" in summary and "vballoon" in summary:
        for k in ("inflate", "deflate"):
            ratio[k] = {m: summary["vballoon"][k][m] / summary["in-tree"][k][m]
                        for m in ("min_s", "median_s")}

    print("how it was run:")
    for k, v in config.items():
        print(f"  {k}: {v}")
    print()
    print(f"{'driver':10s} {'direction':9s} {'min s':>8s} {'median s':>9s} {'max s':>8s}  n")
    for d, s in summary.items():
        for k in ("inflate", "deflate"):
            x = s[k]
            print(f"{d:10s} {k:9s} {x['min_s']:8.3f} {x['median_s']:9.3f} {x['max_s']:8.3f}  "
                  f"{len(x['samples_s'])}")
    for k, r in ratio.items():
        print(f"ratio vballoon / in-tree, {k}: min {r['min_s']:.2f}, median {r['median_s']:.2f}")
    if not ratio:
        print("ratio vballoon / in-tree: n/a (measure both drivers for a ratio)")
    doc = {"config": config, "results": summary, "ratio_vballoon_over_intree": ratio}
    print()
    print(json.dumps(doc, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
