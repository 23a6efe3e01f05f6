# SPDX-License-Identifier: GPL-2.0
"""vbwork (the migration model's workload generator built for the guest, tests/guest/vbwork.c)
run in a guest: started in the background, waited for until it has prepared its memory, asked
for what it has done so far, stopped. Used by the calibration and the VM profile tests."""

from __future__ import annotations

import re
import time

OUT = "/tmp/vbwork.out"
PID = "/tmp/vbwork.pid"
READY_TIMEOUT_S = 300.0
STATS_TIMEOUT_S = 30.0


def start(vm, args: str) -> str:
    """Starts `vbwork ARGS` and returns once it printed `ready` (its memory prepared, the
    running part, if any, under way); returns its first line (the parameters it runs)."""
    vm.sh(f"vbwork {args} > {OUT} 2>&1 & echo $! > {PID}")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        out = vm.sh(f"cat {OUT}")
        if re.search(r"^ready$", out, re.MULTILINE):
            return out.splitlines()[0]
        assert "vbwork:" not in out, f"vbwork failed: {out}"
        assert time.monotonic() < deadline, f"vbwork not ready after {READY_TIMEOUT_S} s: {out}"
        time.sleep(0.5)  # poll interval, bounded by the deadline above


def stats(vm) -> dict:
    """What vbwork has done since it started its running part (SIGUSR1): seconds,
    pages_written, ..., and the rates it reached over that time (hot_mib_s, ...)."""
    before = vm.sh(f"grep -c ^stats {OUT} || true").strip()
    vm.sh(f"kill -USR1 $(cat {PID})")
    deadline = time.monotonic() + STATS_TIMEOUT_S
    while True:
        out = vm.sh(f"grep ^stats {OUT} || true").splitlines()
        if len(out) > int(before or 0):
            return {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", out[-1])}
        assert time.monotonic() < deadline, "vbwork did not print its stats"
        time.sleep(0.2)  # poll interval, bounded by the deadline above


def rate_between(first: dict, last: dict, key: str) -> float:
    """The rate `key` (MiB/s, averaged from the start by vbwork) between two stats."""
    span = last["seconds"] - first["seconds"]
    assert span > 0, f"two vbwork stats {span} s apart"
    return (last[key] * last["seconds"] - first[key] * first["seconds"]) / span


def stop(vm) -> None:
    vm.sh(f"kill $(cat {PID})")
