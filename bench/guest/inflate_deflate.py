#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Inflate and deflate 1 GiB in a 2 GiB QEMU guest: driver variants side by side.

A variant is a driver and its module parameters, `DRIVER[:NAME=VALUE,...]` with DRIVER
`in-tree` (virtio_balloon) or `vballoon`; the parameters go to its insmod, except
`dev.PROP=VALUE` (a virtio-balloon-pci property, e.g. `dev.x-vb-chunked=on`),
`kernel.NAME=VALUE` (added to that guest's kernel command line, e.g. `kernel.init_on_free=1`) and
`qemu=BINARY` (the QEMU to boot that variant's guest with; `qemu=patched` is the one
qemu/build-patched-qemu.sh built for the current patches; default --qemu).  The default:
`in-tree`, `vballoon` (default parameters: max_chunk_order=9) and `vballoon:max_chunk_order=0`
(a page at a time, like the in-tree driver).

One guest per variant, all booted in the same run; the repetitions are interleaved (each rep
runs every variant once, starting one variant later than the rep before) so that a change in
machine load hits all alike.  Each figure is the wall time from sending the QMP `balloon`
command until query-balloon reports the target, polled every --poll-ms (QEMU rate-limits
BALLOON_CHANGE events to one per second, too coarse to time with).

After the timed reps, one more untimed inflate/deflate per variant counts what travelled:
descriptors the device used (x-query-virtio-queue-status), and with QEMU's trace events on,
kicks (virtio_queue_notify), interrupts (virtio_notify), descriptors per kick (how many were
in flight when the driver kicked), pages, runs of contiguous pages in arrival order, and the
discards a host that sorts and merges each request's PFNs would make; on the guest side
/proc/vmstat balloon_inflate/deflate and, for vballoon, its debugfs counters (messages,
pages, allocation failures).

  python3 bench/guest/inflate_deflate.py [--reps 5] [--variants in-tree,vballoon,...] [--json F]

Prints how it was run, a table with min/median/max per variant and direction, the ratios
to in-tree and of vballoon's order 9 to order 0, the counts, and all of it as JSON.
Exits 2 if vballoon.ko is asked for and missing.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import re
import shutil
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
from qmp import QMPClosed, QMPError, QMPTimeout  # noqa: E402

DRIVERS = ("in-tree", "vballoon")
DEFAULT_VARIANTS = "in-tree,vballoon,vballoon:max_chunk_order=0"
DIRECTIONS = ("inflate", "deflate")
QUEUE_INDEX = {"inflate": 0, "deflate": 1}   # virtio-balloon: inflateq 0, deflateq 1
TIMEOUT_S = 120.0
PAGE = 4096
# vballoon's default when no max_chunk_order is given (driver/linux/vballoon_main.c); only
# used if the guest cannot tell us (/sys/module/vballoon/parameters/max_chunk_order).
VBALLOON_DEFAULT_ORDER = 9
TRACE_EVENTS = ("virtio_queue_notify", "virtio_notify", "virtqueue_pop",
                "virtio_balloon_handle_output")
# --device-time: per request only, so tracing costs the same for PFN arrays and chunks.
DEVICE_TIME_EVENTS = ("virtio_queue_notify", "virtio_notify", "virtqueue_pop",
                      "virtqueue_fill", "virtio_balloon_chunk_request")
DEBUGFS_KEYS = ("inflate_messages", "pages_inflated", "deflate_messages", "pages_deflated",
                "alloc_failures", "queue_failures")


@dataclasses.dataclass
class Variant:
    spec: str                  # as given: "vballoon:max_chunk_order=0"
    driver: str                # "in-tree" or "vballoon"
    params: dict[str, str]     # module parameters, in order
    device_props: dict[str, str] = dataclasses.field(default_factory=dict)  # dev.PROP=VALUE
    qemu: str | None = None    # qemu=BINARY ("patched": the build script's binary)
    kernel_args: dict[str, str] = dataclasses.field(default_factory=dict)  # kernel.NAME=VALUE
    vm: guestvm.GuestVM | None = None
    drv: guestvm.Driver | None = None
    device: str | None = None  # the balloon's virtio device in the guest, e.g. "virtio0"
    max_chunk_order: int | None = None   # vballoon only: as the loaded module reports it
    features: str | None = None  # the bits the driver accepted (sysfs), as hex

    @property
    def insmod_params(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.params.items())

    @property
    def order_label(self) -> str:
        return "" if self.max_chunk_order is None else f"order {self.max_chunk_order}"


def parse_variants(text: str) -> list[Variant]:
    out = []
    for spec in (s.strip() for s in re.split(r"[;\s]+|,(?=\s*(?:in-tree|vballoon)\b)", text)):
        if not spec:
            continue
        driver, _, rest = spec.partition(":")
        if driver not in DRIVERS:
            raise ValueError(f"unknown driver {driver!r} in {spec!r}; choose from {DRIVERS}")
        params: dict[str, str] = {}
        props: dict[str, str] = {}
        kargs: dict[str, str] = {}
        qemu = None
        for p in (p.strip() for p in rest.split(",") if p.strip()):
            name, eq, value = p.partition("=")
            if name == "qemu" and eq and value:
                qemu = value
                continue
            if name.startswith("dev.") and eq and \
                    re.fullmatch(r"[a-z][a-z0-9-]*", name[4:]) and \
                    re.fullmatch(r"[A-Za-z0-9_.+-]+", value):
                props[name[4:]] = value
                continue
            if name.startswith("kernel.") and eq and \
                    re.fullmatch(r"[a-z][a-z0-9_.-]*", name[7:]) and \
                    re.fullmatch(r"[A-Za-z0-9_.+-]+", value):
                kargs[name[7:]] = value
                continue
            if not eq or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or \
                    not re.fullmatch(r"[A-Za-z0-9_.+-]+", value):
                raise ValueError(f"bad parameter {p!r} in {spec!r} (want NAME=VALUE, "
                                 f"dev.PROP=VALUE, kernel.NAME=VALUE or qemu=BINARY)")
            params[name] = value
        items = ([f"qemu={qemu}"] if qemu else []) + \
            [f"dev.{k}={v}" for k, v in props.items()] + \
            [f"kernel.{k}={v}" for k, v in kargs.items()] + [f"{k}={v}" for k, v in params.items()]
        canon = driver + (":" + ",".join(items) if items else "")
        if any(v.spec == canon for v in out):
            raise ValueError(f"variant {canon!r} given twice")
        out.append(Variant(canon, driver, params, props, qemu, kargs))
    if not out:
        raise ValueError("no variants given")
    return out


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def patched_qemu() -> str:
    """The binary qemu/build-patched-qemu.sh caches for the current patches (may not exist)."""
    script = os.path.join(REPO_ROOT, "qemu", "build-patched-qemu.sh")
    return subprocess.run([script, "--print-path"], capture_output=True, text=True).stdout.strip()


def qemu_version(binary: str | None = None) -> str:
    try:
        out = subprocess.run([binary or guestvm.QEMU, "--version"], capture_output=True,
                             text=True, check=True).stdout
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


# -- counting what travelled ----------------------------------------------------------------------

class Accounting:
    """Counters around one inflate or deflate: the device's used index per queue (QMP), QEMU
    trace lines written meanwhile (kicks, interrupts, popped descriptors, pages), and the
    guest's /proc/vmstat and vballoon debugfs counters."""

    def __init__(self, v: Variant, events=TRACE_EVENTS):
        self.v = v
        self.events = events
        self.vm = v.vm
        self.qemu_log = os.path.join(self.vm.log_dir, f"{self.vm.name}.qemu.log")
        self.vdev_path = None
        self.trace_ok = False
        self.notes: list[str] = []
        try:
            devs = [d for d in self.vm.qmp.execute("x-query-virtio")
                    if d.get("name") == "virtio-balloon"]
            if len(devs) == 1:
                self.vdev_path = devs[0]["path"]
        except QMPError as e:
            self.notes.append(f"x-query-virtio unavailable: {e}")

    def used_idx(self) -> dict[str, int | None]:
        out = {}
        for d, n in QUEUE_INDEX.items():
            out[d] = None
            if self.vdev_path:
                try:
                    out[d] = self.vm.qmp.execute("x-query-virtio-queue-status",
                                                 {"path": self.vdev_path, "queue": n})["used-idx"]
                except QMPError:
                    pass
        return out

    def guest_counters(self) -> dict[str, int]:
        script = "grep -E '^balloon_(inflate|deflate) ' /proc/vmstat"
        if self.v.driver == "vballoon":
            f = f"/sys/kernel/debug/vballoon/{self.v.device}/counters"
            script = (f"[ -e {f} ] || mount -t debugfs debugfs /sys/kernel/debug; "
                      f"{script}; cat {f}")
        vals = {}
        for line in self.vm.sh(script).splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1].isdigit():
                vals[parts[0]] = int(parts[1])
        return vals

    def set_trace(self, on: bool) -> None:
        try:
            for ev in self.events:
                try:
                    self.vm.qmp.execute("trace-event-set-state", {"name": ev, "enable": on})
                except QMPError:
                    if not ev.startswith("virtio_balloon_chunk_"):
                        raise   # the patched QEMU's own events: absent from a stock one

            self.trace_ok = on
        except QMPError as e:
            self.trace_ok = False
            self.notes.append(f"QEMU tracing unavailable: {e}")

    def log_size(self) -> int:
        try:
            return os.path.getsize(self.qemu_log)
        except OSError:
            return 0

    def read_log(self, start: int) -> list[str]:
        with open(self.qemu_log, "rb") as f:
            f.seek(start)
            return f.read().decode(errors="replace").splitlines()

    def measure(self, direction: str, target: int) -> dict:
        """Move the balloon to target (untimed) with everything counted."""
        g0, u0, off = self.guest_counters(), self.used_idx(), self.log_size()
        t0 = time.monotonic()
        self.vm.qmp.balloon(target)
        self.vm.qmp.wait_balloon(target, TIMEOUT_S)
        res: dict = {"wall_s": round(time.monotonic() - t0, 4)}
        u1, g1 = self.used_idx(), self.guest_counters()
        n = QUEUE_INDEX[direction]
        if u0[direction] is not None and u1[direction] is not None:
            res["descriptors_used"] = (u1[direction] - u0[direction]) % 65536
        vm_key = f"balloon_{direction}"
        if vm_key in g0 and vm_key in g1:
            res["vmstat_pages"] = g1[vm_key] - g0[vm_key]
        if self.v.driver == "vballoon":
            res["debugfs"] = {k: g1[k] - g0[k] for k in DEBUGFS_KEYS if k in g0 and k in g1}
        if self.trace_ok:
            t = parse_trace(self.read_log(off), n)
            if t["descriptors_popped"] or not res.get("descriptors_used"):
                res.update(t)
            else:  # enabled, but nothing written: a QEMU built without the log backend
                note = "QEMU wrote no trace lines (no log trace backend?)"
                if note not in self.notes:
                    self.notes.append(note)
        return res


def parse_trace(lines: list[str], queue: int) -> dict:
    """Kicks, interrupts, descriptors and pages of one queue from QEMU's trace lines; the
    runs of contiguous pages in the order they arrived (up or down: a chunk-ordered balloon
    sends each 2 MiB block as one run); and the discards a host that sorts, de-duplicates
    and merges each request's PFNs would make (one request cannot span runs it does not
    hold, so this is at least the number of requests)."""
    vq = None
    kicks = pops = pages = merged = runs = 0
    notify_vqs: list[str] = []
    current: list[int] | None = None
    prev_gpa = None
    step = 0    # direction of the current arrival-order run: +PAGE, -PAGE, or 0 (one page)

    def close():
        nonlocal merged, current
        if current:
            prev = None
            for g in sorted(set(current)):
                if prev is None or g != prev + PAGE:
                    merged += 1
                prev = g
        current = None

    in_queue = False
    device_s = 0.0
    timed = 0
    pop_ts = None
    chunk_requests = chunk_ranges = 0
    for line in lines:
        ts = re.search(r"@(\d+\.\d+):", line)
        ts = float(ts.group(1)) if ts else None
        m = re.search(r"virtio_balloon_chunk_request inflate: (\d) ranges: (\d+)", line)
        if m and in_queue:
            chunk_requests += 1
            chunk_ranges += int(m.group(2))
            continue
        m = re.search(r"virtio_queue_notify vdev \S+ n (\d+) vq (\S+)", line)
        if m:
            if int(m.group(1)) == queue:
                vq = m.group(2)
                kicks += 1
            continue
        m = re.search(r"virtqueue_pop vq (\S+) elem", line)
        if m:
            close()
            in_queue = vq is None or m.group(1) == vq
            if in_queue:
                pops += 1
                current = []
                pop_ts = ts
            continue
        m = re.search(r"virtio_notify vdev \S+ vq (\S+)", line)
        if m:
            notify_vqs.append(m.group(1))
            continue
        # Under TCG the device handles a kick in the vCPU thread: from popping a request to
        # filling its used entry is the device's own work on it (checks, discards, madvise).
        m = re.search(r"virtqueue_fill vq (\S+) elem", line)
        if m:
            if m.group(1) == vq and in_queue and pop_ts is not None and ts is not None:
                device_s += ts - pop_ts
                timed += 1
            pop_ts = None
            continue
        m = re.search(r"virtio_balloon_handle_output .*gpa: (?:0x)?([0-9a-fA-F]+)", line)
        if m and in_queue and current is not None:
            g = int(m.group(1), 16)
            current.append(g)
            pages += 1
            d = None if prev_gpa is None else g - prev_gpa
            if d is not None and abs(d) == PAGE and step in (0, d):
                step = d
            else:
                runs += 1
                step = 0
            prev_gpa = g
    close()
    return {"kicks": kicks, "interrupts": sum(1 for p in notify_vqs if p == vq),
            "descriptors_popped": pops,
            "descriptors_per_kick": round(pops / kicks, 2) if kicks else None,
            "pages": pages, "runs_in_arrival_order": runs, "merged_discards": merged,
            **({"device_s": round(device_s, 4), "device_timed_requests": timed}
               if timed else {}),
            **({"chunk_requests": chunk_requests, "chunk_ranges": chunk_ranges}
               if chunk_requests else {})}


# -- main ---------------------------------------------------------------------------------------

def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[1])
    ap.add_argument("--reps", type=int, default=5, help="measured repetitions (default 5)")
    ap.add_argument("--warmup", type=int, default=1,
                    help="unmeasured inflate/deflate rounds per variant first (default 1)")
    ap.add_argument("--variants", "--drivers", dest="variants", default=DEFAULT_VARIANTS,
                    help="comma-separated DRIVER[:NAME=VALUE,...] (default "
                         f"{DEFAULT_VARIANTS}); a driver name starts each new variant")
    ap.add_argument("--ram-mib", type=int, default=2048, help="guest RAM (default 2048)")
    ap.add_argument("--size-mib", type=int, default=1024, help="balloon size (default 1024)")
    ap.add_argument("--poll-ms", type=float, default=5.0,
                    help="query-balloon poll interval (default 5 ms)")
    ap.add_argument("--dirty", action="store_true",
                    help="before each timed inflate, dirty and free the guest's free memory, "
                         "so QEMU must really drop resident pages (adds ~7 s per round)")
    ap.add_argument("--no-count", action="store_true",
                    help="skip the untimed counting round (descriptors, kicks, counters)")
    ap.add_argument("--append", default="", help="extra guest kernel command line")
    ap.add_argument("--vballoon-ko", default=guest_image.default_vballoon_ko(),
                    help="default $VBALLOON_KO or <repo>/vballoon.ko")
    ap.add_argument("--qemu", default=guestvm.QEMU,
                    help="QEMU binary for variants without qemu= (default $VBALLOON_QEMU or "
                         "qemu-system-x86_64; 'patched': qemu/build-patched-qemu.sh's)")
    ap.add_argument("--device-time", action="store_true",
                    help="the counting round traces per request only (no per-page events; "
                         "with the patched QEMU its virtio_balloon_chunk_request too), with "
                         "timestamps (-msg timestamp=on): the time the device spent on each "
                         "request, pop to fill, summed beside the round's wall time")
    ap.add_argument("--json", metavar="FILE", help="also write the JSON result here")
    args = ap.parse_args(argv)

    try:
        variants = parse_variants(args.variants)
    except ValueError as e:
        ap.error(str(e))
    if args.reps < 1 or args.warmup < 0:
        ap.error("--reps must be >= 1 and --warmup >= 0")
    for v in variants:
        want = v.qemu or args.qemu
        v.qemu = patched_qemu() if want == "patched" else want
        if not v.qemu or not (os.access(v.qemu, os.X_OK) or shutil.which(v.qemu)):
            print(f"inflate_deflate: QEMU {want!r} of {v.spec} not found ({v.qemu}); the "
                  f"patched one is built by {os.path.join(REPO_ROOT, 'qemu', 'build-patched-qemu.sh')}",
                  file=sys.stderr)
            return 2
    if any(v.driver == "vballoon" for v in variants) and not os.path.isfile(args.vballoon_ko):
        print("inflate_deflate: " + guest_image.missing_vballoon_message(args.vballoon_ko)
              + "; or measure the in-tree driver alone with --variants in-tree",
              file=sys.stderr)
        return 2

    ram = args.ram_mib * MIB
    target = ram - args.size_mib * MIB
    poll_s = args.poll_ms / 1000.0
    load_before = loadavg()

    results = {v.spec: {d: [] for d in DIRECTIONS} for v in variants}
    counts: dict[str, dict] = {}
    count_notes: list[str] = []
    boot_s: dict[str, float] = {}
    try:
        for v in variants:
            img = guest_image.prepare(args.vballoon_ko if v.driver == "vballoon" else None)
            v.drv = (guestvm.vballoon_driver(img) if v.driver == "vballoon"
                     else guestvm.intree_driver(img))
            v.drv.params = v.insmod_params   # replaces $VBALLOON_PARAMS: the variant says all
            name = "bench-" + re.sub(r"[^A-Za-z0-9_.-]+", "-", v.spec)
            append = " ".join([args.append] + [f"{k}={x}" for k, x in v.kernel_args.items()])
            v.vm = guestvm.GuestVM(img, name=name, ram_mib=args.ram_mib, append=append.strip(),
                                   balloon_props=v.device_props, qemu=v.qemu,
                                   extra_args=["-msg", "timestamp=on"] if args.device_time
                                   else None)
            v.vm.start()
            v.vm.qmp.balloon(ram)       # before probe, so the driver starts with no target
            v.vm.load_driver(v.drv)
            v.vm.qmp.wait_balloon(ram, TIMEOUT_S)
            v.device = v.vm.balloon_device()
            v.features = hex(v.vm.negotiated_features())
            if v.driver == "vballoon":
                r = v.vm.run("cat /sys/module/vballoon/parameters/max_chunk_order", check=False)
                v.max_chunk_order = (int(r.output.strip()) if r.status == 0
                                     and r.output.strip().isdigit()
                                     else int(v.params.get("max_chunk_order",
                                                           VBALLOON_DEFAULT_ORDER)))
            boot_s[v.spec] = round(v.vm.boot_seconds, 2)
            print(f"# booted {v.spec} guest in {v.vm.boot_seconds:.1f} s"
                  + (f" ({v.order_label})" if v.order_label else ""), file=sys.stderr)

        def one_round(v: Variant, record: bool):
            vm = v.vm
            if args.dirty:
                avail = vm.meminfo()["MemAvailable"] // 1024
                vm.sh(f"hog {avail - 128}", timeout=300)
            up = timed_balloon(vm, target, poll_s)
            down = timed_balloon(vm, ram, poll_s)
            if record:
                results[v.spec]["inflate"].append(up)
                results[v.spec]["deflate"].append(down)
            print(f"# {v.spec:28s} {'rep' if record else 'warm-up'}: inflate {up:.3f} s, "
                  f"deflate {down:.3f} s", file=sys.stderr)

        for _ in range(args.warmup):
            for v in variants:
                one_round(v, record=False)
        for rep in range(args.reps):
            # Interleaved, and the first variant rotates, so none always runs first or last.
            k = rep % len(variants)
            for v in variants[k:] + variants[:k]:
                one_round(v, record=True)

        if not args.no_count:
            for v in variants:
                acc = Accounting(v, DEVICE_TIME_EVENTS if args.device_time else TRACE_EVENTS)
                acc.set_trace(True)
                try:
                    counts[v.spec] = {"inflate": acc.measure("inflate", target),
                                      "deflate": acc.measure("deflate", ram)}
                finally:
                    acc.set_trace(False)
                count_notes += [f"{v.spec}: {n}" for n in acc.notes if n not in count_notes]
        kver = variants[0].vm.img.kver
        cmdline = variants[0].vm.append
    except (guestvm.GuestError, guest_image.ImageError, QMPError, QMPTimeout,
            QMPClosed) as e:
        print(f"inflate_deflate: {e}", file=sys.stderr)
        return 1
    finally:
        for v in variants:
            if v.vm is not None:
                v.vm.stop()

    config = {
        "guest_ram_mib": args.ram_mib, "balloon_mib": args.size_mib,
        "guest_smp": 2, "accel": guestvm.TCG_ACCEL, "kernel": kver, "kernel_cmdline": cmdline,
        "init_on_alloc": 0 if "init_on_alloc=0" in cmdline.split() else "default (on)",
        "qemu": qemu_version(args.qemu if args.qemu != "patched" else patched_qemu()),
        "reps": args.reps, "warmup": args.warmup,
        "order": "interleaved, first variant rotated each rep",
        "poll_ms": args.poll_ms, "dirty_before_inflate": args.dirty,
        "host": f"{platform.node()} {os.cpu_count()} cpus",
        "loadavg_before": load_before, "loadavg_after": loadavg(),
        "vballoon_ko": args.vballoon_ko if any(v.driver == "vballoon" for v in variants)
        else None,
        "variants": {v.spec: {"driver": v.drv.module, "insmod_params": v.insmod_params,
                              "device_props": v.device_props, "qemu": v.qemu,
                              "kernel_cmdline": v.vm.append,
                              "qemu_version": qemu_version(v.qemu),
                              "features": v.features,
                              "max_chunk_order": v.max_chunk_order, "boot_s": boot_s[v.spec]}
                     for v in variants},
    }
    summary = {s: {k: summarize(x) for k, x in r.items()} for s, r in results.items()}

    def ratio(a: str, b: str) -> dict:
        return {k: {m: summary[a][k][m] / summary[b][k][m] for m in ("min_s", "median_s")}
                for k in DIRECTIONS}

    vs_intree = {}
    # The reference: the first in-tree variant (plain `in-tree`, or e.g. `in-tree:qemu=patched`).
    ref_spec = next((v.spec for v in variants if v.driver == "in-tree"), None)
    if ref_spec:
        vs_intree = {v.spec: ratio(v.spec, ref_spec) for v in variants if v.spec != ref_spec}
    # vballoon's orders against order 0, between variants that differ only in the order.
    order_ratios = []
    vb = [v for v in variants if v.driver == "vballoon" and v.max_chunk_order is not None]
    for a in vb:
        for b in vb:
            same = ({k: x for k, x in a.params.items() if k != "max_chunk_order"}
                    == {k: x for k, x in b.params.items() if k != "max_chunk_order"})
            if same and a.max_chunk_order != 0 and b.max_chunk_order == 0:
                order_ratios.append({"numerator": a.spec, "numerator_order": a.max_chunk_order,
                                     "denominator": b.spec, "denominator_order": 0,
                                     **ratio(a.spec, b.spec)})

    print("how it was run:")
    for k, x in config.items():
        if k != "variants":
            print(f"  {k}: {x}")
    print("  variants:")
    for v in variants:
        c = config["variants"][v.spec]
        insmod = " ".join(x for x in (c["driver"], c["insmod_params"]) if x)
        order = (f"  (max_chunk_order={v.max_chunk_order})"
                 if v.max_chunk_order is not None else "")
        props = "".join(f",{k}={x}" for k, x in v.device_props.items())
        print(f"    {v.spec:28s} insmod {insmod}{order}  boot {c['boot_s']:.1f} s\n"
              f"      kernel: {c['kernel_cmdline']}\n"
              f"      {v.qemu} ({c['qemu_version']}) -device virtio-balloon-pci{props}; "
              f"features {v.features}")
    print()
    w = max(len(v.spec) for v in variants)
    ref = ref_spec is not None
    print(f"{'variant':{w}s} {'direction':9s} {'min s':>7s} {'median s':>9s} {'max s':>7s}  n"
          + ("  min/in-tree  median/in-tree" if ref else ""))
    for v in variants:
        for k in DIRECTIONS:
            x = summary[v.spec][k]
            line = (f"{v.spec:{w}s} {k:9s} {x['min_s']:7.3f} {x['median_s']:9.3f} "
                    f"{x['max_s']:7.3f}  {len(x['samples_s'])}")
            if ref:
                r = vs_intree.get(v.spec, {}).get(k)
                line += (f"  {r['min_s']:11.2f}  {r['median_s']:14.2f}" if r
                         else f"  {'1.00':>11s}  {'1.00':>14s}")
            print(line)
    if not ref:
        print("ratio to in-tree: n/a (add the in-tree variant)")
    for o in order_ratios:
        for k in DIRECTIONS:
            print(f"ratio order {o['numerator_order']} / order 0 ({o['numerator']} / "
                  f"{o['denominator']}), {k}: min {o[k]['min_s']:.2f}, "
                  f"median {o[k]['median_s']:.2f}")
    if not order_ratios:
        print("ratio vballoon order 9 / order 0: n/a (measure both vballoon and "
              "vballoon:max_chunk_order=0)")

    if counts:
        print()
        print("what travelled (one untimed inflate + deflate per variant after the reps, "
              "QEMU trace events on" + (", guest not dirtied first" if args.dirty else "")
              + "):")
        hdr = (f"{'variant':{w}s} {'direction':9s} {'descs':>5s} {'kicks':>5s} {'desc/kick':>9s}"
               f" {'irqs':>5s} {'pages':>6s} {'runs':>5s} {'merged':>6s} {'drv msgs':>8s}"
               f" {'drv pages':>9s} {'allocfail':>9s} {'wall s':>7s} {'dev s':>7s}")
        print(hdr)

        def f(x, width):
            return f"{'-' if x is None else x:>{width}}"
        for v in variants:
            for k in DIRECTIONS:
                c = counts[v.spec][k]
                dfs = c.get("debugfs", {})
                print(f"{v.spec:{w}s} {k:9s} {f(c.get('descriptors_used'), 5)} "
                      f"{f(c.get('kicks'), 5)} {f(c.get('descriptors_per_kick'), 9)} "
                      f"{f(c.get('interrupts'), 5)} {f(c.get('pages') or c.get('vmstat_pages'), 6)} "
                      f"{f(c.get('runs_in_arrival_order'), 5)} {f(c.get('merged_discards'), 6)} "
                      f"{f(dfs.get(k + '_messages'), 8)} "
                      f"{f(dfs.get('pages_' + k + 'd'), 9)} {f(dfs.get('alloc_failures'), 9)} "
                      f"{f(c.get('wall_s'), 7)} {f(c.get('device_s'), 7)}")
        print("  descs: descriptors the device used (x-query-virtio-queue-status)\n"
              "  kicks, irqs, pages: QEMU trace events virtio_queue_notify, virtio_notify,\n"
              "    virtio_balloon_handle_output; desc/kick: descriptors in flight at each kick\n"
              "  runs: runs of contiguous 4 KiB pages in the order the device saw them\n"
              "  merged: discards a host would make that sorts and merges each request's PFNs\n"
              "    (QEMU 7.2 makes one per page)\n"
              "  drv msgs, drv pages, allocfail: vballoon's debugfs counters; '-': not available\n"
              "  wall s: this round's time (traced); dev s (--device-time): the device's own\n"
              "    work, virtqueue_pop to virtqueue_fill summed over the queue's requests")
        for n in count_notes:
            print(f"  note: {n}")

    doc = {"config": config, "results": summary, "reference": ref_spec,
           "ratio_to_intree": vs_intree,
           "ratio_order_to_order0": order_ratios, "counts": counts}
    if "vballoon" in vs_intree:  # the key earlier versions wrote
        doc["ratio_vballoon_over_intree"] = vs_intree["vballoon"]
    print()
    print(json.dumps(doc, indent=2))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
