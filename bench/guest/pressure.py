#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Over-inflation in a real guest: a working set under a balloon stepped from safe to absurd.

Issue 30 item 6 ("a balloon that never freezes its guest").  Per run, one 4 GiB QEMU guest
(QEMU 7.2, TCG, the suite's image) with a virtio-blk data disk (a raw file on the host,
read-only, cache=none by default, so what the guest evicts comes back from the disk):

  1. the driver variant is loaded (VARIANTS below);
  2. `hog --prefill-mib` touches most of RAM and exits, so QEMU has it resident and every
     inflate hands the host something back (QEMU's RSS shows it);
  3. vbpress (tests/guest/vbpress.c) maps --file-mib of the disk (the hot file set, read at
     random, --read-kib per operation, through the mapping: a miss is a major fault) and
     rewrites --anon-mib of anonymous memory; its sampler writes one line a second to the
     guest's ttyS2 (ops, pgmajfault, allocstall_*, workingset_refault_*, oom_kill, PSI
     memory some/full totals, free memory, the file LRU's active/inactive split, pages
     scanned by kswapd and by direct reclaim, the guest's huge pages), which QEMU writes to a
     file on the host;
  4. --baseline-s seconds at the full size, then the QMP `balloon` target steps through
     --schedule (guest sizes in MiB; default 3072 ... 512 and back up), --step-s each; every
     second the host records query-balloon's `actual`, QEMU's VmRSS, how much of it host
     huge pages map (AnonHugePages), QEMU's CPU time and the machine's steal time.

Variants, interleaved (run order: each variant once per round, --runs rounds), --jobs guests
at once (at most 2 on this machine: one host thread each under TCG); with --pin each guest's
QEMU runs on a host CPU of its own, so that a thrashing neighbour (its disk reads, its I/O
threads) does not take CPU time from a guest that is not thrashing:
  in-tree            Linux's virtio_balloon;
  vballoon           our module, pressure governor off;
  vballoon-governor  our module, pressure governor on.
The module parameter strings are in VARIANT_PARAMS.  `pressure_governor` is passed only when
the module has the parameter (`modinfo -F parm`): `vballoon` then runs without it, and
`vballoon-governor` is refused with a message.

Per target step and variant it prints the medians over runs of: throughput relative to the
run's baseline (median ops/s of the baseline window), seconds frozen (throughput below 10% of
the baseline; a second with no sample at all counts too), major faults/s, allocation
stalls/s, file refaults/s, PSI memory some/full (% of the step's time), OOM kills, the
balloon's `actual` (the guest's size, MiB, at the step's end) and QEMU's RSS (MiB, at the
step's end), and the seconds the workload was not running (OOM-killed, or started again and
still touching its anonymous set: by default it is started again a second after an OOM
kill, as a supervised service would be, without re-reading its file set; --no-respawn).  Writes every per-second sample as JSON (--json) and plots throughput and QEMU's
RSS against time, one line per run, one colour per variant (--plot, PNG).

  VBALLOON_KDIR=$KDIR_6_1 VBALLOON_KO=build-kmod/61/vballoon.ko \\
  VBALLOON_GUEST_WORK=$PWD/tests/guest/.work-pressure \\
      nice -n 10 /usr/bin/python3 bench/guest/pressure.py --variants in-tree,vballoon --runs 3 --jobs 2 --pin
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import hashlib
import json
import os
import platform
import queue
import re
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO_ROOT, "tests", "guest"))

import guest_image  # noqa: E402
import guestvm  # noqa: E402
from guestvm import MIB  # noqa: E402

# The variants and their module parameters: the one place to change them.  A parameter whose
# name the module does not have is dropped (`vballoon`) or refuses the variant (REQUIRED).
VARIANT_PARAMS = {
    "in-tree": ("in-tree", ""),
    "vballoon": ("vballoon", "pressure_governor=0"),
    "vballoon-governor": ("vballoon", "pressure_governor=1"),
}
REQUIRED_PARAMS = {"vballoon-governor": ("pressure_governor",)}

DEFAULT_SCHEDULE = "3072,2560,2048,1536,1024,512,2048,4096"
FROZEN_FRACTION = 0.10
SERIAL_FILE = "workload.serial.log"
LINE_RE = re.compile(r"VBP t=(?P<t>[\d.]+) (?P<rest>.*) end")


@dataclasses.dataclass
class Config:
    ram_mib: int = 4096
    file_mib: int = 1024
    anon_mib: int = 256
    read_kib: int = 4
    prefill_mib: int = 3072
    baseline_s: int = 15
    step_s: int = 20
    schedule: list = dataclasses.field(default_factory=lambda: [
        int(x) for x in DEFAULT_SCHEDULE.split(",")])
    disk_cache: str = "none"
    pread: bool = False
    respawn: bool = True    # start the worker again (file set not re-warmed) after an OOM kill
    # The device offers DEFLATE_ON_OOM (QEMU's deflate-on-oom=on), as Firecracker's and
    # libvirt's common setups do; the same device for every variant. Without it the governor
    # never reclaims (it could not give back), so it stops at the free memory.
    deflate_on_oom: bool = True
    dump_vmstat: bool = False


class BenchError(RuntimeError):
    pass


def module_params(ko: str) -> set[str]:
    """Parameter names vballoon.ko declares (modinfo -F parm: "name:description")."""
    out = subprocess.run(["modinfo", "-F", "parm", ko], capture_output=True, text=True,
                         check=True).stdout
    return {line.split(":", 1)[0].strip() for line in out.splitlines() if line.strip()}


def variant_driver(img: guest_image.GuestImage, variant: str, ko_params: set[str]
                   ) -> guestvm.Driver:
    """The Driver (with its insmod parameters) for a variant name."""
    if variant not in VARIANT_PARAMS:
        raise BenchError(f"unknown variant {variant!r}; choose from {', '.join(VARIANT_PARAMS)}")
    kind, params = VARIANT_PARAMS[variant]
    if kind == "in-tree":
        return guestvm.intree_driver(img)
    missing = [p for p in REQUIRED_PARAMS.get(variant, ()) if p not in ko_params]
    if missing:
        raise BenchError(f"variant {variant}: {img.vballoon_ko} has no parameter "
                         f"{', '.join(missing)} (modinfo -p)")
    kept = " ".join(p for p in params.split() if p.split("=")[0] in ko_params)
    drv = guestvm.vballoon_driver(img)
    drv.params = " ".join(x for x in (drv.params, kept) if x)
    drv.label = variant
    return drv


def disk_path(work: str, file_mib: int) -> str:
    """A raw disk of file_mib MiB of random bytes (made once, shared read-only by guests)."""
    path = os.path.join(work, f"pressure-disk-{file_mib}m.raw")
    if os.path.exists(path) and os.path.getsize(path) == file_mib * MIB:
        return path
    tmp = path + f".tmp{os.getpid()}"
    with open("/dev/urandom", "rb") as src, open(tmp, "wb") as dst:
        for _ in range(file_mib):
            dst.write(src.read(MIB))
    os.replace(tmp, path)
    return path


def qemu_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) QEMU has used: all its threads, the TCG vCPU thread first."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def qemu_anon_huge_bytes(pid: int) -> int:
    """QEMU's anonymous memory mapped by host huge pages (THP). Guest RAM is madvised
    MADV_HUGEPAGE; a 4 KiB discard inside a 2 MiB huge page splits it, and under TCG the guest
    then runs on 4 KiB host pages there (more host TLB misses for the same guest work)."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            if line.startswith("AnonHugePages:"):
                return int(line.split()[1]) * 1024
    return 0


def host_steal_s() -> float:
    """CPU time the machine's own hypervisor gave to others while this host wanted it (steal,
    all CPUs): a cloud machine's noisy neighbours slow a TCG guest with QEMU at 100%."""
    with open("/proc/stat") as f:
        fields = f.readline().split()
    return int(fields[8]) / os.sysconf("SC_CLK_TCK")


def pin_process(pid: int, cpu: int) -> None:
    """Every thread of QEMU (vCPU, main loop, I/O workers; later ones inherit it) on one host
    CPU, so that a neighbour guest's thrashing (its disk reads, its QEMU threads) does not
    take this guest's CPU time during its own steps."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.sched_setaffinity(int(tid), {cpu})
        except ProcessLookupError:
            pass


def parse_line(line: str) -> dict | None:
    m = LINE_RE.search(line)
    if not m:
        return None
    rec = {"t_guest": float(m.group("t"))}
    try:
        for kv in m.group("rest").split():
            k, _, v = kv.partition("=")
            rec[k] = int(v)
    except ValueError:
        return None
    return rec


class SerialTail:
    """New whole lines of the file QEMU writes the guest's ttyS2 to, with host arrival time."""

    def __init__(self, path: str):
        self.path = path
        self.pos = 0
        self.partial = ""
        self.lines: list[tuple[float, dict]] = []

    def poll(self, now: float) -> None:
        try:
            with open(self.path, "rb") as f:
                f.seek(self.pos)
                data = f.read()
        except FileNotFoundError:
            return
        self.pos += len(data)
        text = self.partial + data.decode(errors="replace").replace("\r", "")
        *whole, self.partial = text.split("\n")
        for line in whole:
            rec = parse_line(line)
            if rec is not None:
                self.lines.append((now, rec))


def run_once(img: guest_image.GuestImage, variant: str, cfg: Config, name: str,
             log_dir: str, disk: str, ko_params: set[str], progress=print,
             cpu: int | None = None) -> dict:
    """One guest, one variant, the whole schedule, on host CPU `cpu` alone if given. Returns
    the run's raw record."""
    drv = variant_driver(img, variant, ko_params)
    os.makedirs(log_dir, exist_ok=True)
    serial = os.path.join(log_dir, f"{name}.{SERIAL_FILE}")
    if os.path.exists(serial):
        os.unlink(serial)
    extra = ["-drive", f"file={disk},if=none,id=d0,format=raw,cache={cfg.disk_cache},"
                       "readonly=on",
             "-device", "virtio-blk-pci,drive=d0",
             "-chardev", f"file,id=wl,path={serial}", "-serial", "chardev:wl"]
    props = {"deflate-on-oom": "on"} if cfg.deflate_on_oom else {}
    vm = guestvm.GuestVM(img, name=name, ram_mib=cfg.ram_mib, extra_args=extra,
                         log_dir=log_dir, balloon_props=props)
    t_start = time.monotonic()
    rec: dict = {"variant": variant, "name": name, "params": drv.params,
                 "console_log": vm.console_log, "serial_log": serial}
    try:
        vm.start(boot_timeout=180)
        if cpu is not None:
            pin_process(vm.pid, cpu)
            rec["host_cpu"] = cpu
        rec["boot_s"] = round(vm.boot_seconds, 2)
        if img.blk_modules:
            vm.sh(" && ".join(f"insmod {m}" for m in img.blk_modules), timeout=60)
        vm.sh("i=0; while [ ! -b /dev/vda ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
              "[ -b /dev/vda ] && stty -F /dev/ttyS2 raw -echo", timeout=60)
        vm.load_driver(drv, timeout=120)
        if cfg.prefill_mib:
            vm.sh(f"hog {cfg.prefill_mib} > /dev/null", timeout=600)
        rec["rss_after_prefill_mib"] = vm.qemu_rss_bytes() // MIB
        opts = f"--file-mib {cfg.file_mib} --anon-mib {cfg.anon_mib} --read-kib {cfg.read_kib}"
        if cfg.pread:
            opts += " --pread"
        work = f"vbpress work /dev/vda /tmp/vbp.cnt {opts} </dev/null >>/tmp/vbp.work.log 2>&1"
        if cfg.respawn:   # a supervised service: started again after an OOM kill
            work = f"{work}; while :; do sleep 1; {work} --no-warm; done"
        vm.sh(f"rm -f /tmp/vbp.cnt; ({work}) </dev/null >/dev/null 2>&1 & "
              "i=0; while [ ! -s /tmp/vbp.cnt ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; "
              "(vbpress sample /tmp/vbp.cnt /dev/ttyS2 </dev/null >/tmp/vbp.sample.log 2>&1 &)",
              timeout=60)
        tail = SerialTail(serial)
        deadline = time.monotonic() + 600
        while True:
            tail.poll(time.monotonic())
            if tail.lines and tail.lines[-1][1].get("state") == 1:
                break
            if tail.lines and tail.lines[-1][1].get("state") == 2:
                raise BenchError(f"[{name}] vbpress died while warming up: "
                                 f"{vm.sh('cat /tmp/vbp.work.log')}")
            if time.monotonic() > deadline:
                raise BenchError(f"[{name}] vbpress not ready after 600 s")
            vm._check_alive("waiting for vbpress")
            time.sleep(0.25)
        rec["ready_after_s"] = round(time.monotonic() - t_start, 1)
        progress(f"[{name}] ready after {rec['ready_after_s']} s "
                 f"(boot {rec['boot_s']} s); baseline {cfg.baseline_s} s")
        # The plan: (phase start offset, target MiB); the baseline is the full size.
        phases = [(0.0, cfg.ram_mib)] + [(cfg.baseline_s + i * cfg.step_s, mib)
                                         for i, mib in enumerate(cfg.schedule)]
        end = cfg.baseline_s + len(cfg.schedule) * cfg.step_s
        host: list[dict] = []
        t0 = time.monotonic()
        del tail.lines[:-1]   # the last line before the baseline: the first second's start
        phase = -1
        next_sample = t0
        while True:
            now = time.monotonic()
            rel = now - t0
            if rel >= end:
                break
            while phase + 1 < len(phases) and rel >= phases[phase + 1][0]:
                phase += 1
                if phase > 0:
                    if cfg.dump_vmstat:   # the guest's counters as the step before ends
                        rec.setdefault("vmstat_dumps", []).append({
                            "t": round(rel, 3), "phase": phase - 1,
                            "text": vm.sh("cat /proc/vmstat /proc/meminfo", timeout=30)})
                    vm.qmp.balloon(phases[phase][1] * MIB)
                    progress(f"[{name}] t={rel:.0f}s target {phases[phase][1]} MiB")
            tail.poll(now)
            if now >= next_sample:
                next_sample += 1.0
                try:
                    actual = vm.qmp.balloon_actual() // MIB
                except Exception as e:  # a wedged main loop: keep the RSS, note the gap
                    actual = None
                    progress(f"[{name}] query-balloon failed: {e}")
                host.append({"t": round(rel, 3), "phase": phase, "target_mib": phases[phase][1],
                             "actual_mib": actual, "rss_mib": vm.qemu_rss_bytes() // MIB,
                             "thp_mib": qemu_anon_huge_bytes(vm.pid) // MIB,
                             "steal_s": round(host_steal_s(), 2),
                             "qemu_cpu_s": round(qemu_cpu_s(vm.pid), 2)})
            vm._check_alive("running the schedule")
            time.sleep(0.2)  # poll interval, bounded by the schedule's end
        tail.poll(time.monotonic())
        rec["host"] = host
        rec["guest"] = [{"arrival": round(a - t0, 3), **g} for a, g in tail.lines]
        rec["phases"] = [{"start_s": s, "target_mib": m} for s, m in phases]
        rec["end_s"] = end
        console = vm.console_text()
        rec["console_oom_kills"] = len(re.findall(r"Killed process", console))
        rec["console_out_of_puff"] = console.count("Out of puff")
        # Warnings apart from the OOM killer's reports (which carry a Call Trace).
        rec["console_trouble"] = bool(guestvm.KERNEL_TROUBLE.search(
            re.sub(r"(?s)invoked oom-killer.*?Killed process[^\n]*\n", "", console)))
        try:
            vm.qmp.balloon(cfg.ram_mib * MIB)
        except Exception:
            pass
    finally:
        vm.stop()
    rec["wall_s"] = round(time.monotonic() - t_start, 1)
    return rec


def kib_to_mib(kib: int | None) -> int | None:
    return None if kib is None or kib < 0 else kib // 1024


def per_second(run: dict) -> list[dict]:
    """Samples joined per guest second: rates from the guest's counters, placed on the host's
    clock (guest time + the smallest arrival - guest time offset), with the host sample (actual,
    RSS) and the phase in force at that moment."""
    g = run["guest"]
    if not g:
        return []
    offset = min(x["arrival"] - x["t_guest"] for x in g)
    host = run["host"]
    phases = run["phases"]
    out = []
    for prev, cur in zip(g, g[1:]):
        dt = cur["t_guest"] - prev["t_guest"]
        if dt <= 0:
            continue
        t = cur["t_guest"] + offset
        if t < 0 or t > run["end_s"] + 0.5:
            continue
        ph = max(i for i, p in enumerate(phases) if p["start_s"] <= max(t - 0.5, 0))
        hs = [h for h in host if h["t"] <= t]
        h = hs[-1] if hs else (host[0] if host else {})
        # QEMU's CPU share (% of one host CPU) over the host samples around this second: under
        # TCG the guest only runs when the host schedules QEMU, so a loaded host lowers the
        # throughput with no memory pressure at all (read ops_s against it).
        cpu = steal = None
        hw = [x for x in host if t - 1.5 <= x["t"] <= t + 0.5 and "qemu_cpu_s" in x]
        if len(hw) >= 2 and hw[-1]["t"] > hw[0]["t"]:
            cpu = round((hw[-1]["qemu_cpu_s"] - hw[0]["qemu_cpu_s"]) /
                        (hw[-1]["t"] - hw[0]["t"]) * 100, 1)
            if "steal_s" in hw[0]:
                steal = round((hw[-1]["steal_s"] - hw[0]["steal_s"]) /
                              (hw[-1]["t"] - hw[0]["t"]) * 100, 1)

        def rate(k):
            return (cur[k] - prev[k]) / dt

        def psi(k):
            return None if cur[k] < 0 else round((cur[k] - prev[k]) / (dt * 1e6) * 100, 1)
        out.append({
            "t": round(t, 2), "phase": ph, "target_mib": phases[ph]["target_mib"],
            "ops_s": round(rate("ops"), 1), "majflt_s": round(rate("pgmajfault"), 1),
            "allocstall_s": round(rate("allocstall"), 1), "refault_file_s": round(rate("wrf"), 1),
            "oom_kills": cur["oom_kill"] - prev["oom_kill"],
            "psi_some_pct": psi("psi_some"), "psi_full_pct": psi("psi_full"),
            "worker": {0: "warming", 1: "running", 2: "gone"}.get(cur["state"], "?"),
            "worker_starts": cur.get("starts", 1),
            "avail_mib": cur["avail_kib"] // 1024, "cache_mib": cur["cache_kib"] // 1024,
            # The LRU's split of the page cache (the kernel's own guess at what is hot), what
            # reclaim scanned, and the guest's huge pages (sampler lines from before these were
            # added have none of them).
            "free_mib": kib_to_mib(cur.get("free_kib")),
            "active_file_mib": kib_to_mib(cur.get("afile_kib")),
            "inactive_file_mib": kib_to_mib(cur.get("ifile_kib")),
            "scan_kswapd_s": round(rate("scan_kswapd"), 1) if "scan_kswapd" in cur else None,
            "scan_direct_s": round(rate("scan_direct"), 1) if "scan_direct" in cur else None,
            "guest_thp_mib": kib_to_mib(cur.get("thp_kib")),
            # The guest kernel's direct map in 4 KiB pages: a split direct map costs TLB misses
            # (under TCG, softmmu TLB refills) on every kernel access to that memory.
            "direct_map_4k_mib": kib_to_mib(cur.get("dm4k_kib")),
            "actual_mib": h.get("actual_mib"), "rss_mib": h.get("rss_mib"),
            "thp_mib": h.get("thp_mib"), "qemu_cpu_pct": cpu, "host_steal_pct": steal,
        })
    return out


def run_steps(run: dict, secs: list[dict]) -> tuple[float, list[dict]]:
    """The run's baseline (median ops/s over phase 0) and one summary per phase."""
    base_ops = [s["ops_s"] for s in secs if s["phase"] == 0]
    baseline = statistics.median(base_ops) if base_ops else 0.0
    steps = []
    phases = run["phases"]
    for i, p in enumerate(phases):
        length = (phases[i + 1]["start_s"] if i + 1 < len(phases) else run["end_s"]) - p["start_s"]
        ss = [s for s in secs if s["phase"] == i]
        # A second with no sample at all (the guest too stuck to print) counts as frozen; one
        # second of slack for where the phase's edges fall between samples.
        missing = max(0, int(round(length)) - 1 - len(ss))
        hs = [h for h in run["host"] if h["phase"] == i]
        last = hs[-1] if hs else {}

        def mean(k):
            vals = [s[k] for s in ss if s[k] is not None]
            return round(sum(vals) / len(vals), 2) if vals else None
        steps.append({
            "phase": i, "target_mib": p["target_mib"], "seconds": len(ss),
            "throughput_rel": round(mean("ops_s") / baseline, 3) if ss and baseline else 0.0,
            "frozen_s": sum(1 for s in ss if s["ops_s"] < FROZEN_FRACTION * baseline) + missing,
            "majflt_s": mean("majflt_s"), "allocstall_s": mean("allocstall_s"),
            "refault_file_s": mean("refault_file_s"),
            "psi_some_pct": mean("psi_some_pct"), "psi_full_pct": mean("psi_full_pct"),
            "qemu_cpu_pct": mean("qemu_cpu_pct"), "host_steal_pct": mean("host_steal_pct"),
            "oom_kills": sum(s["oom_kills"] for s in ss),
            "worker_restarts": (ss[-1]["worker_starts"] - ss[0]["worker_starts"]) if ss else 0,
            "worker_not_running_s": sum(1 for s in ss if s["worker"] != "running"),
            "actual_mib": last.get("actual_mib"), "rss_mib": last.get("rss_mib"),
            "thp_mib": last.get("thp_mib"), "rss_min_mib": min((h["rss_mib"] for h in hs), default=None),
        })
    return baseline, steps


STEP_COLUMNS = [("throughput_rel", "thr/base", "{:.2f}"), ("frozen_s", "frozen s", "{:.0f}"),
                ("majflt_s", "majflt/s", "{:.0f}"), ("allocstall_s", "stall/s", "{:.1f}"),
                ("refault_file_s", "refault/s", "{:.0f}"),
                ("psi_some_pct", "PSI some%", "{:.1f}"), ("psi_full_pct", "PSI full%", "{:.1f}"),
                ("oom_kills", "OOM", "{:.0f}"), ("worker_not_running_s", "down s", "{:.0f}"),
                ("actual_mib", "actual MiB", "{:.0f}"), ("qemu_cpu_pct", "QEMU CPU%", "{:.0f}"),
                ("rss_mib", "RSS MiB", "{:.0f}"), ("thp_mib", "host THP MiB", "{:.0f}")]


def median_or_none(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def table(runs: list[dict], variants: list[str]) -> tuple[str, list[dict]]:
    """Per variant and phase: the medians over runs. Returns the text and the rows."""
    rows = []
    lines = []
    head = f"{'variant':<18} {'target':>6} {'runs':>4} " + " ".join(
        f"{h:>10}" for _, h, _ in STEP_COLUMNS)
    lines.append(head)
    lines.append("-" * len(head))
    for v in variants:
        vr = [r for r in runs if r["variant"] == v and "steps" in r]
        if not vr:
            continue
        nphase = len(vr[0]["steps"])
        for i in range(nphase):
            row = {"variant": v, "phase": i, "target_mib": vr[0]["steps"][i]["target_mib"],
                   "runs": len(vr)}
            for k, _, _ in STEP_COLUMNS:
                row[k] = median_or_none([r["steps"][i][k] for r in vr])
                row[k + "_all"] = [r["steps"][i][k] for r in vr]
            rows.append(row)
            cells = " ".join(f"{'-' if row[k] is None else fmt.format(row[k]):>10}"
                             for k, _, fmt in STEP_COLUMNS)
            label = "base" if i == 0 else str(row["target_mib"])
            lines.append(f"{v:<18} {label:>6} {len(vr):>4} {cells}")
        base = median_or_none([r["baseline_ops_s"] for r in vr])
        lines.append(f"{v:<18} baseline ops/s (median of runs): {base:.0f}; runs' baselines "
                     f"{[round(r['baseline_ops_s']) for r in vr]}")
    return "\n".join(lines), rows


def plot(runs: list[dict], variants: list[str], path: str, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    colors = dict(zip(variants, ["tab:red", "tab:blue", "tab:green", "tab:orange"]))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(11, 7.5), sharex=True)
    seen = set()
    for r in runs:
        secs = r.get("seconds") or []
        if not secs:
            continue
        v = r["variant"]
        lbl = v if v not in seen else None
        seen.add(v)
        base = r["baseline_ops_s"] or 1
        ax1.plot([s["t"] for s in secs], [s["ops_s"] / base * 100 for s in secs],
                 color=colors.get(v), lw=1, alpha=0.8, label=lbl)
        hs = r["host"]
        ax2.plot([h["t"] for h in hs], [h["rss_mib"] for h in hs], color=colors.get(v), lw=1,
                 alpha=0.8, label=(f"{v} QEMU RSS" if lbl else None))
        ax2.plot([h["t"] for h in hs], [h["actual_mib"] for h in hs], color=colors.get(v),
                 lw=0.8, ls=":", alpha=0.8, label=(f"{v} actual" if lbl else None))
    r0 = next((r for r in runs if r.get("host")), None)
    if r0:
        ph = r0["phases"]
        xs, ys = [], []
        for i, p in enumerate(ph):
            e = ph[i + 1]["start_s"] if i + 1 < len(ph) else r0["end_s"]
            xs += [p["start_s"], e]
            ys += [p["target_mib"], p["target_mib"]]
        ax2.plot(xs, ys, color="black", ls="--", lw=1, label="target (guest size)")
        for p in ph[1:]:
            for ax in (ax1, ax2):
                ax.axvline(p["start_s"], color="grey", lw=0.5, alpha=0.5)
    ax1.axhline(FROZEN_FRACTION * 100, color="black", lw=0.8, ls=":", label="frozen (10%)")
    ax1.set_ylabel("throughput, % of baseline")
    ax1.set_ylim(bottom=0)
    ax1.legend(loc="upper right", fontsize=8)
    ax2.set_ylabel("MiB")
    ax2.set_xlabel("seconds since the baseline began")
    ax2.legend(loc="upper right", fontsize=7, ncol=2)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def qemu_version() -> str:
    try:
        return subprocess.run([guestvm.QEMU, "--version"], capture_output=True, text=True,
                              check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError) as e:
        return f"unknown ({e})"


def loadavg() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def finish_run(rec: dict) -> dict:
    rec["seconds"] = per_second(rec)
    rec["baseline_ops_s"], rec["steps"] = run_steps(rec, rec["seconds"])
    return rec


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog="\n".join(__doc__.splitlines()[1:]))
    d = Config()
    ap.add_argument("--variants", default="in-tree,vballoon",
                    help=f"comma-separated, from {', '.join(VARIANT_PARAMS)} "
                         "(default in-tree,vballoon)")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=1, help="guests at once (at most 2 here)")
    ap.add_argument("--pin", action="store_true",
                    help="each guest's QEMU on a host CPU of its own (CPUs 0..jobs-1), so "
                         "that guests running at once do not take each other's CPU time")
    ap.add_argument("--ram-mib", type=int, default=d.ram_mib)
    ap.add_argument("--file-mib", type=int, default=d.file_mib, help="hot file set")
    ap.add_argument("--anon-mib", type=int, default=d.anon_mib, help="anonymous set")
    ap.add_argument("--read-kib", type=int, default=d.read_kib, help="bytes per file read")
    ap.add_argument("--pread", action="store_true", help="read the file set with pread()")
    ap.add_argument("--prefill-mib", type=int, default=d.prefill_mib,
                    help="touched (and freed) before the workload, so QEMU has it resident")
    ap.add_argument("--baseline-s", type=int, default=d.baseline_s)
    ap.add_argument("--step-s", type=int, default=d.step_s)
    ap.add_argument("--schedule", default=DEFAULT_SCHEDULE,
                    help="guest sizes (MiB) the target steps through after the baseline")
    ap.add_argument("--no-deflate-on-oom", action="store_true",
                    help="the device does not offer DEFLATE_ON_OOM (default: it does)")
    ap.add_argument("--no-respawn", action="store_true",
                    help="do not start the workload again after an OOM kill")
    ap.add_argument("--disk-cache", default=d.disk_cache, choices=("none", "writeback"),
                    help="QEMU's cache mode for the data disk (none: refaults hit the disk)")
    ap.add_argument("--dump-vmstat", action="store_true",
                    help="at each step's end keep the guest's whole /proc/vmstat and "
                         "/proc/meminfo in the JSON (vmstat_dumps)")
    ap.add_argument("--json", help="default <work>/pressure-<time>.json")
    ap.add_argument("--plot", help="PNG (default: the JSON's name with .png)")
    args = ap.parse_args(argv)

    variants = [v.strip() for v in args.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANT_PARAMS:
            ap.error(f"unknown variant {v!r}; choose from {', '.join(VARIANT_PARAMS)}")
    cfg = Config(ram_mib=args.ram_mib, file_mib=args.file_mib, anon_mib=args.anon_mib,
                 read_kib=args.read_kib, prefill_mib=args.prefill_mib,
                 baseline_s=args.baseline_s, step_s=args.step_s,
                 schedule=[int(x) for x in args.schedule.split(",") if x.strip()],
                 disk_cache=args.disk_cache, pread=args.pread, respawn=not args.no_respawn,
                 deflate_on_oom=not args.no_deflate_on_oom, dump_vmstat=args.dump_vmstat)
    need_ko = any(VARIANT_PARAMS[v][0] == "vballoon" for v in variants)
    ko = guest_image.default_vballoon_ko() if need_ko else None
    if ko and not os.path.isfile(ko):
        print(guest_image.missing_vballoon_message(ko), file=sys.stderr)
        return 2
    img = guest_image.prepare(ko)
    ko_params = module_params(ko) if ko else set()
    for v in variants:    # refuse a variant the module cannot run before booting anything
        try:
            variant_driver(img, v, ko_params)
        except BenchError as e:
            print(f"pressure: {e}", file=sys.stderr)
            return 2
    work = guest_image.work_dir()
    disk = disk_path(work, cfg.file_mib)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    json_path = args.json or os.path.join(work, f"pressure-{stamp}.json")
    png_path = args.plot or os.path.splitext(json_path)[0] + ".png"
    log_dir = os.path.join(work, "logs", f"pressure-{stamp}")
    lock = threading.Lock()

    def progress(msg):
        with lock:
            print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)

    order = [(i, v) for i in range(args.runs) for v in variants]
    env = {"qemu": qemu_version(), "kernel": img.kver, "host": platform.node(),
           "vballoon_ko": ko, "vballoon_ko_sha256": guest_image.sha256_file(ko) if ko else None,
           "vballoon_params": sorted(ko_params), "loadavg_start": loadavg(),
           "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
           "jobs": args.jobs, "pinned": args.pin, "order": [f"{v}#{i}" for i, v in order]}
    progress(f"{len(order)} runs ({', '.join(env['order'])}), {args.jobs} at once; "
             f"guest {cfg.ram_mib} MiB, file set {cfg.file_mib} MiB, anon {cfg.anon_mib} MiB, "
             f"schedule {cfg.schedule} x {cfg.step_s} s after {cfg.baseline_s} s; "
             f"load {env['loadavg_start']}")
    runs: list[dict] = []
    errors: list[str] = []

    free_cpus: queue.Queue = queue.Queue()
    for c in sorted(os.sched_getaffinity(0))[:max(1, args.jobs)]:
        free_cpus.put(c)

    def one(item):
        i, v = item
        name = f"{v}-{i}"
        cpu = free_cpus.get() if args.pin else None
        try:
            rec = finish_run(run_once(img, v, cfg, name, log_dir, disk, ko_params, progress,
                                      cpu))
            rec["run"] = i
            progress(f"[{name}] done in {rec['wall_s']} s, baseline {rec['baseline_ops_s']:.0f} "
                     f"ops/s, frozen {sum(s['frozen_s'] for s in rec['steps'])} s")
            return rec
        except (guestvm.GuestError, BenchError, guest_image.ImageError) as e:
            progress(f"[{name}] FAILED: {e}")
            errors.append(f"{name}: {e}")
            return None
        finally:
            if cpu is not None:
                free_cpus.put(cpu)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
        for rec in ex.map(one, order):
            if rec:
                runs.append(rec)
    env["loadavg_end"] = loadavg()
    text, rows = table(runs, variants)
    out = {"config": dataclasses.asdict(cfg), "variants": variants,
           "variant_params": {v: VARIANT_PARAMS[v] for v in variants}, "env": env,
           "frozen_fraction": FROZEN_FRACTION, "table": rows, "errors": errors, "runs": runs}
    with open(json_path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    title = (f"{cfg.ram_mib} MiB guest, {img.kver}, file set {cfg.file_mib} MiB + anon "
             f"{cfg.anon_mib} MiB; {len(runs) // max(len(variants), 1)} run(s) per variant; "
             f"{env['qemu']}")
    try:
        plot(runs, variants, png_path, title)
    except ImportError as e:
        png_path = f"(no plot: {e}; install python3-matplotlib)"
    print()
    print(f"{title}; load {env['loadavg_start']} -> {env['loadavg_end']}")
    print("per target step (guest size MiB; 'base' = the baseline at full size), medians over "
          "runs; actual = query-balloon's guest size at the step's end, RSS = QEMU's VmRSS at "
          "the step's end; frozen = seconds below 10% of the baseline")
    print(text)
    for e in errors:
        print(f"FAILED: {e}")
    print(f"JSON: {json_path}\nplot: {png_path}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
