# SPDX-License-Identifier: GPL-2.0
"""A running VM's profile (tools/vm_profile.py) against the description the guest runs.

The guest (2 GiB, vballoon) runs a known described workload with vbwork; the profile is
taken as a user would take it (the command, on a QMP socket of its own, with QEMU's pid),
and must come back close to that description
(tolerances below, with why). Then the profile goes to `vballoon-sim compare` and the same
guest is migrated for real (QEMU 7.2, `exec:cat > /dev/null`, unlimited, zero detection
only and with free page hints): the model's figures on the profile stand beside the real
ones, within the bound below.

In the default run (about 30 s): `python3 -m pytest tests/guest -k profile -s`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

import conftest
import vbwork_run
import workload_description as wd
from free_pages import migrate_to_null

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
VM_PROFILE = os.path.join(REPO, "tools", "vm_profile.py")

MIB = 1 << 20
# Known, and not a preset: memory held, memory written and freed, and a hot set rewritten
# in a cycle (2 s) shorter than the profile's long window (5 s), so its size is measurable.
KNOWN = {"name": "profile-known", "working_set_mib": 384, "freed_mib": 512,
         "hot_mib": 64, "hot_mib_s": 32}
# How close the profile must come, and why that close:
# - sizes: within 48 MiB plus 10%. The guest's own memory (kernel, its tmpfs root, vbwork)
#   is measured before vbwork starts and added to the expected working set, but it moves by
#   some MiB between boot and profile, and freed memory also counts what the kernel wrote
#   and freed while booting (unpacking the initramfs), which nothing in the guest reports;
# - the dirty rate: within 25% of what vbwork says it wrote over the same time (a TCG guest
#   on a loaded host falls behind the description's rate, and this is what QEMU can see):
#   page sampling hashes 8192 pages of 2 GiB, 256 of them in the hot set, and the guest's
#   background writes add a little.
SIZE_SLACK_MIB = 48
SIZE_SHARE = 0.10
RATE_SHARE = 0.25
# Model beside real, bytes sent: within 35% (the calibration's goal for the presets is 20%;
# a profile adds its own error, the sizes above, on top of the model's).
MODEL_BYTES_SHARE = 0.35


def sim_binary() -> str:
    for path in (os.environ.get("VBALLOON_SIM", ""),
                 os.path.join(REPO, "build", "tools", "vballoon-sim"),
                 os.path.join(REPO, "build-mutants", "tools", "vballoon-sim")):
        if path and os.access(path, os.X_OK):
            return path
    conftest.fail("vballoon-sim not built: run ci/build.sh (or set VBALLOON_SIM)")


def _close(measured: float, expected: float, share: float, slack: float = 0.0) -> bool:
    return abs(measured - expected) <= share * expected + slack


def _model(profile_path: str, strategies: tuple[str, ...]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "VB_MUTANT"}  # CI's mutant build
    out = subprocess.run(
        [sim_binary(), "compare", "--workload-file", profile_path, "--host", "qemu-7.2",
         "--link-gbit", "unlimited", "--repeat", "1"]
        + [a for s in strategies for a in ("--strategy", s)]
        + ["--json", profile_path + ".model.json"],
        capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, f"compare failed:\n{out.stdout}\n{out.stderr}"
    print(out.stdout)
    with open(profile_path + ".model.json", encoding="utf-8") as f:
        return json.load(f)


def test_a_profile_comes_back_close_and_compare_on_it_stands_beside_real_migrations(
        vballoon_image, tmp_path):
    dut = vballoon_image
    # A second QMP socket, the one a user's tools/vm_profile.py connects to: the harness
    # keeps the first.
    user_qmp = str(tmp_path / "user-qmp.sock")
    holder = conftest.VMHolder(dut, "profile", {"free-page-hint": "on"},
                               append=wd.kernel_args(KNOWN),
                               extra_args=["-qmp", f"unix:{user_qmp},server=on,wait=off"])
    try:
        vm = holder.get()
        conftest.reset_guest(vm, dut.drv)
        mi = vm.meminfo()
        own_mib = (mi["MemTotal"] - mi["MemFree"] - mi.get("Cached", 0)) // 1024
        vbwork_run.start(vm, " ".join(wd.vbwork_args(KNOWN, conftest.GUEST_RAM_MIB)))
        before = vbwork_run.stats(vm)
        path = str(tmp_path / "profile.json")
        run = subprocess.run(
            [sys.executable, VM_PROFILE, "--qmp", user_qmp, "--qemu-pid", str(vm.pid),
             "--name", "profiled", "-o", path, "--report"],
            capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, f"vm_profile.py failed:\n{run.stdout}\n{run.stderr}"
        with open(path, encoding="utf-8") as f:
            description = wd.check(json.load(f))
        measured = json.loads(run.stderr)
        # What the guest really dirtied while it was profiled: vbwork's own count.
        hot_rate = vbwork_run.rate_between(before, vbwork_run.stats(vm), "hot_mib_s")
        print("\nprofile:", json.dumps(description, indent=1))
        print("measured:", json.dumps(measured, indent=1))
        expected = {"ram_mib": conftest.GUEST_RAM_MIB,
                    "working_set_mib": KNOWN["working_set_mib"] + own_mib,
                    # The hot set is allocated after the freed memory was freed, and the
                    # guest's allocator hands it that memory first (the model's does too).
                    "freed_mib": KNOWN["freed_mib"] - KNOWN["hot_mib"],
                    "hot_mib": KNOWN["hot_mib"],
                    "hot_mib_s": round(hot_rate, 1)}
        report = "\n".join(f"  {k}: profile {description[k]}, expected {v}"
                           for k, v in expected.items())
        print("profile against the description:\n" + report)
        assert description["ram_mib"] == expected["ram_mib"], report
        for key in ("working_set_mib", "freed_mib", "hot_mib"):
            assert _close(description[key], expected[key], SIZE_SHARE, SIZE_SLACK_MIB), \
                f"{key} not within {SIZE_SLACK_MIB} MiB + {SIZE_SHARE:.0%}:\n{report}"
        assert measured["hot_set_saturated"], f"a 2 s hot-set cycle not seen in 5 s:\n{report}"
        assert _close(description["hot_mib_s"], expected["hot_mib_s"], RATE_SHARE), \
            f"hot_mib_s not within {RATE_SHARE:.0%}:\n{report}"

        real = {}
        vm.unload_driver(dut.drv)
        real["zero-detect"] = migrate_to_null(vm)
        vm.load_driver(dut.drv)
        real["hint+zero-detect"] = migrate_to_null(vm)
        model = _model(path, tuple(real))
        rows = []
        for strategy, r in real.items():
            cell = next(c for c in model["results"] if c["workload"] == "profiled"
                        and c["strategy"] == strategy)
            rows.append((strategy, r.transferred, cell["bytes_sent"]))
        table = "\n".join(f"  {s}: real {r / MIB:.1f} MiB, model {m / MIB:.1f} MiB "
                          f"({m / r:.2f}x)" for s, r, m in rows)
        print("bytes sent, the profile in the model beside the real guest:\n" + table)
        for strategy, r, m in rows:
            assert _close(m, r, MODEL_BYTES_SHARE), \
                f"{strategy}: model not within {MODEL_BYTES_SHARE:.0%} of real:\n{table}"
    finally:
        holder.close()
