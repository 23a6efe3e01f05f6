# SPDX-License-Identifier: GPL-2.0
"""workload_description.py without a guest: a described workload becomes vbwork's arguments
and the kernel's boot arguments, with the keys of the generator's own table; vbwork, built
static as the guest image builds it, runs on this machine with those arguments (no QEMU: a
description that holds little and runs nothing prints its parameters and "ready"), reads
back the same description, and refuses bad ones naming the key.

Marked `unit`: no fixture of this suite is used, so nothing boots. Runs under pytest
(`python3 -m pytest tests/guest -m unit`) and alone (`python3 tests/guest/
test_workload_description.py`, as ctest runs it: pytest is not needed).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import guest_image  # noqa: E402
import workload_description as wd  # noqa: E402

try:
    import pytest
    pytestmark = pytest.mark.unit
except ImportError:  # run alone, without pytest
    pytest = None

REPO = os.path.dirname(os.path.dirname(HERE))
GENERATOR_C = os.path.join(REPO, "device-sim", "migration", "workload_generator.c")
EXAMPLES = os.path.join(REPO, "tools", "vballoon-sim", "examples")

# A description that runs in a few MiB on this machine: written, held, freed; nothing runs.
SMALL = {"name": "small", "ram_mib": 256, "working_set_mib": 8, "freed_mib": 4.5,
         "hot_mib": 1, "arena_kib": 64, "live_mib": 1, "random_frees": False, "seed": 3,
         "init_on_free": False, "comment": "no rate: vbwork says ready at once"}


def _vbwork(work: str) -> str:
    return guest_image.build_vbwork(work)


def test_the_keys_are_the_generators():
    table = re.findall(r'^\s*\{"(\w+)", KEY_', open(GENERATOR_C, encoding="utf-8").read(), re.MULTILINE)
    assert tuple(table) == wd.KEYS


def test_a_description_becomes_vbworks_arguments_in_the_generators_order():
    args = wd.vbwork_args(SMALL)
    assert args == ["described", "--ram-mib", "256", "working_set_mib=8", "freed_mib=4.5", "hot_mib=1",
                    "arena_kib=64", "live_mib=1", "random_frees=0", "seed=3", "init_on_free=0"]
    assert wd.vbwork_args({"hot_mib": 2}, 2048)[:3] == ["described", "--ram-mib", "2048"]
    assert wd.kernel_args(SMALL) == "init_on_free=0 init_on_alloc=0"
    assert wd.kernel_args({"init_on_free": True, "init_on_alloc": 1}) == "init_on_free=1 init_on_alloc=1"


def test_unknown_keys_and_wrong_types_are_refused_naming_the_key():
    for bad, says in (({"hot_mb": 1}, 'unknown key "hot_mb"'),
                      ({"hot_mib": "4096"}, '"hot_mib": must be a number'),
                      ({"hot_mib": True}, '"hot_mib": must be a number'),
                      ({"hot_mib": float("nan")}, '"hot_mib": must be a number'),
                      ({"ram_mib": 1.5}, '"ram_mib": must be a whole number'),
                      ({"name": 3}, '"name": must be a string')):
        try:
            wd.vbwork_args(bad)
        except wd.DescriptionError as e:
            assert says in str(e), (bad, str(e))
        else:
            raise AssertionError(f"{bad} was accepted")


def test_every_example_file_is_a_description():
    files = [f for f in os.listdir(EXAMPLES) if f.endswith(".json")]
    assert files
    for name in files:
        args = wd.vbwork_args(wd.load(os.path.join(EXAMPLES, name)))
        assert args[0] == "described"


def test_vbwork_runs_a_description_and_reads_back_every_key():
    with tempfile.TemporaryDirectory() as work:
        vbwork = _vbwork(work)
        proc = subprocess.Popen([vbwork, *wd.vbwork_args(SMALL)], stdout=subprocess.PIPE, text=True)
        try:
            params = proc.stdout.readline()
            ready = proc.stdout.readline()
        finally:
            proc.terminate()
            proc.wait(timeout=10)
        assert ready.strip() == "ready", (params, ready)
        got = dict(item.split("=", 1) for item in params.split()[1:])
        assert got["workload"] == "described" and got["ram_mib"] == "256"
        assert set(wd.KEYS) <= set(got)
        for key in wd.KEYS:
            want = SMALL.get(key, {"random_frees": 1, "warmup_ms": 5000, "seed": 1}.get(key, 0))
            assert float(got[key]) == float(want), (key, got[key], want)


def test_vbwork_refuses_a_bad_description_naming_the_key():
    with tempfile.TemporaryDirectory() as work:
        vbwork = _vbwork(work)
        for settings, says in ((["hot_mib=-1"], '"hot_mib": -1 is out of range'),
                               (["hot_mb=1"], 'unknown key "hot_mb"'),
                               (["hot_mib_s=100"], '"hot_mib_s" rewrites a hot set'),
                               (["--ram-mib", "128", "working_set_mib=200"], '"working_set_mib" + "freed_mib"')):
            proc = subprocess.run([vbwork, "described", *settings], capture_output=True, text=True, timeout=30)
            assert proc.returncode == 2 and says in proc.stderr, (settings, proc.returncode, proc.stderr)
            assert "ready" not in proc.stdout


def main() -> int:
    tests = [v for k, v in sorted(globals().items()) if k.startswith("test_") and callable(v)]
    failed = 0
    for test in tests:
        try:
            test()
            print(f"ok   {test.__name__}")
        except Exception as e:  # report every test, then fail
            failed += 1
            print(f"FAIL {test.__name__}: {e!r}")
    print(json.dumps({"tests": len(tests), "failed": failed}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
