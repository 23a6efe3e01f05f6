# SPDX-License-Identifier: GPL-2.0
"""Over-inflation in a real guest (issue 30 item 6), marked `pressure`, not in the default run:

    VBALLOON_KO=... /usr/bin/python3 -m pytest tests/guest -v -m pressure

One short run of bench/guest/pressure.py's harness per driver variant (2 at once): a 2 GiB
guest, vbpress over a 768 MiB hot file set on a virtio-blk disk and 128 MiB of anonymous
memory, a baseline at full size, then the target at a safe guest size (1536 MiB: the working
set fits) and an absurd one (512 MiB: it cannot).  About 2 minutes here (122 s: 2 passed, 2 skipped).

- test_harness_squeezes[in-tree|vballoon]: the harness really squeezes: at the absurd target
  the guest refaults its file set (major faults per second well above the baseline's, where
  there are none) and the balloon took memory from the guest (`actual` below the safe step's).
  An observable of the setup, not a claim about either driver.
- test_governor_*: our module with `pressure_governor=1`; skipped with the reason when the
  module has no such parameter (modinfo -p).  At the absurd target: no OOM kill, throughput at
  least 90% of the baseline, 0 s frozen and the balloon kept short of the target (the guest
  refused: its size, `actual`, stays above the target).  At the safe target: the balloon
  within 2% of what the in-tree driver's reached in the same run.
"""

from __future__ import annotations

import concurrent.futures
import os
import sys

import pytest

import guest_image
from guestvm import GuestError, MIB

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO_ROOT, "bench", "guest"))
import pressure  # noqa: E402

pytestmark = pytest.mark.pressure

SAFE_MIB, ABSURD_MIB = 1536, 512
CFG = pressure.Config(ram_mib=2048, file_mib=768, anon_mib=128, read_kib=4, prefill_mib=1024,
                      baseline_s=8, step_s=20, schedule=[SAFE_MIB, ABSURD_MIB])
GOVERNOR = "vballoon-governor"


def fail(msg: str):
    pytest.fail(msg, pytrace=False)


@pytest.fixture(scope="module")
def setup(vballoon_image):
    ko = guest_image.default_vballoon_ko()
    img = vballoon_image.image
    work = guest_image.work_dir()
    return {"img": img, "ko_params": pressure.module_params(ko),
            "disk": pressure.disk_path(work, CFG.file_mib),
            "log_dir": os.path.join(work, "logs", "pressure-test")}


def governor_available(setup) -> bool:
    return "pressure_governor" in setup["ko_params"]


@pytest.fixture(scope="module")
def runs(setup):
    """One run per variant (the governor's only if the module has it), two guests at once."""
    variants = ["in-tree", "vballoon"] + ([GOVERNOR] if governor_available(setup) else [])

    def one(v):
        try:
            rec = pressure.run_once(setup["img"], v, CFG, f"test-{v}", setup["log_dir"],
                                    setup["disk"], setup["ko_params"], progress=lambda m: None)
            return v, pressure.finish_run(rec), None
        except (GuestError, pressure.BenchError) as e:
            return v, None, str(e)

    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as ex:
        results = list(ex.map(one, variants))
    return {v: (rec, err) for v, rec, err in results}


def get_run(runs, variant):
    rec, err = runs[variant]
    if err:
        fail(f"the {variant} run failed: {err}")
    return rec


def step(rec, target_mib):
    return next(s for s in rec["steps"] if s["target_mib"] == target_mib and s["phase"] > 0)


def describe(rec) -> str:
    return "\n".join(f"  target {s['target_mib']}: {s}" for s in rec["steps"]) + \
        f"\n  console: {rec['console_log']}"


@pytest.mark.parametrize("variant", ["in-tree", "vballoon"])
def test_harness_squeezes(runs, variant):
    rec = get_run(runs, variant)
    base, safe, absurd = rec["steps"][0], step(rec, SAFE_MIB), step(rec, ABSURD_MIB)
    assert rec["baseline_ops_s"] > 0, f"no baseline throughput:\n{describe(rec)}"
    assert absurd["majflt_s"] is not None and \
        absurd["majflt_s"] > max(10.0, 10 * (base["majflt_s"] or 0)), \
        f"no refaulting at the absurd target:\n{describe(rec)}"
    assert absurd["refault_file_s"] > 0, f"no workingset refaults:\n{describe(rec)}"
    assert absurd["actual_mib"] is not None and safe["actual_mib"] is not None and \
        absurd["actual_mib"] < safe["actual_mib"], \
        f"the balloon took nothing at the absurd target:\n{describe(rec)}"
    assert not rec["console_trouble"], f"kernel warnings on the console: {rec['console_log']}"


def require_governor(setup):
    if not governor_available(setup):
        pytest.skip(f"{guest_image.default_vballoon_ko()} has no pressure_governor parameter "
                    f"(modinfo -p lists {sorted(setup['ko_params'])})")


def test_governor_refuses_absurd_target(setup, runs):
    require_governor(setup)
    rec = get_run(runs, GOVERNOR)
    absurd = step(rec, ABSURD_MIB)
    assert absurd["oom_kills"] == 0, f"OOM kill at the absurd target:\n{describe(rec)}"
    assert absurd["throughput_rel"] >= 0.9, f"throughput fell:\n{describe(rec)}"
    assert absurd["frozen_s"] == 0, f"frozen seconds:\n{describe(rec)}"
    assert absurd["actual_mib"] is not None and absurd["actual_mib"] > ABSURD_MIB, \
        f"the balloon reached the absurd target (the guest did not refuse):\n{describe(rec)}"
    assert not rec["console_trouble"], f"kernel warnings on the console: {rec['console_log']}"


def test_governor_gives_back_what_in_tree_gives_at_safe_target(setup, runs):
    require_governor(setup)
    gov, ref = get_run(runs, GOVERNOR), get_run(runs, "in-tree")
    g, r = step(gov, SAFE_MIB)["actual_mib"], step(ref, SAFE_MIB)["actual_mib"]
    assert g is not None and r is not None, f"no actual:\n{describe(gov)}\n{describe(ref)}"
    balloon_g, balloon_r = CFG.ram_mib - g, CFG.ram_mib - r
    assert balloon_r > 0, f"the in-tree driver inflated nothing:\n{describe(ref)}"
    assert abs(balloon_g - balloon_r) <= 0.02 * balloon_r, \
        (f"at the safe target the governor's balloon is {balloon_g} MiB, the in-tree "
         f"driver's {balloon_r} MiB (more than 2% apart)\n{describe(gov)}\n{describe(ref)}")
