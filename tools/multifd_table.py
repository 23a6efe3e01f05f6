#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The migration model's qemu-10 beside real QEMU 10.0 with multifd: the matrix table.

Reads the real figures `tests/guest/test_qemu10.py` writes (`$VBALLOON_QEMU10_JSON`; by
default tests/guest/calibration/qemu-10.0-migrations-20261204.json): a 2 GiB guest, freshly
booted, holding a 64 MiB pattern, migrated at an unlimited link into a real destination QEMU
over loopback TCP, with multifd off or 1, 2 and 4 channels and zero-page-detection legacy,
multifd and none. Runs `vballoon-sim compare --host qemu-10` on the same scenario: the same
guest as a described workload (working_set_mib=64 over the booted guest's memory), the
single stream over TCP (`--stream-to tcp`) or `--multifd-channels N`, zero-page-detection
legacy or multifd (`--zero-page-detection`; multifd off, both are the migration thread's
check, as in QEMU), and `none` as the strategy without zero detection. Prints one markdown
table: per cell the median (min-max) of bytes sent, zero and normal pages and total time,
real beside model, and each cell's time against its own channel count's `none`.

  tools/multifd_table.py [--sim build/tools/vballoon-sim] [--real FILE] [--repeat 3]
                         [--model-json FILE (reuse a saved run)] [--save-model FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys

from calibration_table import cell, ratio, run_compare

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_REAL = os.path.join(REPO, "tests", "guest", "calibration",
                            "qemu-10.0-migrations-20261204.json")
MIB = 1 << 20
CHANNELS = (0, 1, 2, 4)
MODES = ("legacy", "multifd", "none")
# The real guest: a fresh boot and `hog keep 64` (tests/guest/test_qemu10.py).
WORKLOAD = "working_set_mib=64"


def model_command(sim: str, channels: int, mode: str, repeat: int, out_json: str) -> list[str]:
    cmd = [sim, "compare", "--host", "qemu-10", "--ram-mib", "2048", "--workload-set", WORKLOAD,
           "--link-gbit", "unlimited", "--repeat", str(repeat), "--json", out_json,
           "--untouched", "shared-zero"]
    if channels == 0:
        cmd += ["--stream-to", "tcp"]
    else:
        cmd += ["--multifd-channels", str(channels)]
    if mode == "none":
        cmd += ["--strategy", "none"]
    else:
        cmd += ["--strategy", "zero-detect"]
        if channels:
            cmd += ["--zero-page-detection", mode]
    return cmd


def run_model(sim: str, repeat: int) -> dict:
    """{"<channels>-<mode>": [compare result rows]}."""
    return {f"{channels}-{mode}":
            run_compare(lambda path, c=channels, m=mode: model_command(sim, c, m, repeat, path))["results"]
            for channels in CHANNELS for mode in MODES}


def real_runs(real: dict, channels: int, mode: str) -> list[dict]:
    case = (f"{channels}ch-{mode}" if channels else f"nomultifd-{mode}")
    return [r for r in real["rows"] if r["case"] == case]


def table(real: dict, model: dict | None) -> str:
    lines = ["| multifd channels | zero-page-detection | MiB sent real / model "
             "| zero pages real / model | normal pages real / model | total ms real / model "
             "| time x none real / model |",
             "|---|---|---|---|---|---|---|"]
    for channels in CHANNELS:
        rn = real_runs(real, channels, "none")
        mn = model.get(f"{channels}-none", []) if model else []
        for mode in MODES:
            rr = real_runs(real, channels, mode)
            mr = model.get(f"{channels}-{mode}", []) if model else []

            def both(real_key, model_key, scale=1.0, fmt="{:.0f}"):
                return (f"{cell([r[real_key] / scale for r in rr], fmt)} / "
                        f"{cell([m[model_key] / scale for m in mr], fmt)}")
            time_x = (f"{ratio([r['total_time_ms'] for r in rr], [r['total_time_ms'] for r in rn], 3)} / "
                      f"{ratio([m['total_ms'] for m in mr], [m['total_ms'] for m in mn], 3)}")
            lines.append(f"| {channels or 'off'} | {mode} | "
                         f"{both('transferred', 'bytes_sent', MIB, '{:.1f}')} | "
                         f"{both('zero_pages', 'zero_pages')} | "
                         f"{both('normal_pages', 'pages_sent')} | "
                         f"{both('total_time_ms', 'total_ms')} | {time_x} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.path.join(REPO, "build", "tools", "vballoon-sim"))
    ap.add_argument("--real", action="append",
                    help="real figures: the test's JSON (a list of rows) or a saved file with "
                    "\"how\" and \"rows\"; repeat to pool sittings' runs (default: "
                    "$VBALLOON_QEMU10_JSON, else the saved 2026-12-04 file)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--model-json", help="a saved model run instead of running compare")
    ap.add_argument("--save-model", help="write the model run here")
    args = ap.parse_args(argv)
    real = {"how": None, "rows": []}
    for path in args.real or [os.environ.get("VBALLOON_QEMU10_JSON", DEFAULT_REAL)]:
        with open(path) as f:
            doc = json.load(f)
        if isinstance(doc, list):
            real["rows"] += doc
        else:
            real["rows"] += doc["rows"]
            real["how"] = real["how"] or doc["how"]
    real["how"] = real["how"] or {
        "qemu": real["rows"][0]["qemu"] if real["rows"] else "?", "accel": "tcg,thread=single",
        "guest_ram_mib": 2048,
        "migration": "tcp:127.0.0.1 into a destination QEMU 10 (tests/guest/test_qemu10.py)"}
    if args.model_json:
        with open(args.model_json) as f:
            model = json.load(f)
    else:
        model = run_model(args.sim, args.repeat)
    if args.save_model:
        with open(args.save_model, "w") as f:
            json.dump(model, f, indent=1)
    how = real["how"]
    print(f"real: {how['qemu']}, {how['accel']}, {how['guest_ram_mib']} MiB, {how['migration']}")
    print("model: " + " ".join(model_command("vballoon-sim", 2, "multifd", args.repeat, "F")[1:]))
    print()
    print(table(real, model))
    bad = [m for rows in model.values() for m in rows if not m.get("verified")]
    if bad:
        print(f"\n{len(bad)} model run(s) did not verify", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
