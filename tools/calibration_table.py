#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The migration model beside real QEMU 7.2: the calibration table.

Reads the real figures (by default tests/guest/calibration/qemu-7.2-idle-20261204.json, the
latest, written by `pytest tests/guest -m calibration`; `VBALLOON_QEMU=` a QEMU 10 binary
writes QEMU 10's), runs `vballoon-sim compare --host qemu-7.2` (or `qemu-10` for a QEMU 9 or 10
file, or `--host`) on the same scenario (2048 MiB guest, the same workloads from the same generator, unlimited and
max-bandwidth 1 Gbit/s; seven model runs a cell against the real sitting's three: a model run
costs a second, and the pipe's measured hand-off makes single runs on an idle machine
bimodal, as real ones are) and prints one markdown table: per workload, link and strategy the
median and min-max of bytes sent, normal and zero pages, bitmap syncs (QEMU's dirty-sync-count,
the model's bitmap_syncs, counted the same way) and total
time, and the ratio to `none`, real beside model.

Strategies: real QEMU's `none` detects zero pages in its migration thread, so it is the
model's `zero-detect`; `hint` is `hint+zero-detect`, `report` is `report+zero-detect`. The
model has no combined hint+report strategy: that row is real only.

  tools/calibration_table.py [--sim build/tools/vballoon-sim] [--real FILE]
                             [--model-json FILE (reuse a saved run)] [--save-model FILE]
                             [--untouched populated|shared-zero]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_REAL = os.path.join(REPO, "tests", "guest", "calibration", "qemu-7.2-idle-20261204.json")
MIB = 1 << 20
WORKLOADS = ("fresh", "freed", "busy")
REAL_TO_MODEL = {"none": "zero-detect", "hint": "hint+zero-detect",
                 "report": "report+zero-detect", "hint+report": None}
# The real runs migrate into a pipe, at 1 Gbit/s through QEMU's max-bandwidth: a rate limit
# QEMU lifts for stop-and-copy. The model's runs do the same on an unlimited link.
LINKS = {"unlimited": ["--link-gbit", "unlimited"],
         "1gbit": ["--link-gbit", "unlimited", "--max-bandwidth-gbit", "1"]}
REPEAT = 7  # the model's runs per cell (cheap), against the real sitting's 3


def host_of(real: dict) -> str:
    """The host profile that stands for the real file's QEMU: qemu-10 for 9.x and 10.x,
    qemu-7.2 otherwise."""
    version = real["how"].get("qemu", "")
    words = version.split()
    number = words[3] if len(words) > 3 and words[:3] == ["QEMU", "emulator", "version"] else ""
    return "qemu-10" if number.split(".")[0] in ("9", "10") else "qemu-7.2"


def compare_command(sim: str, link: str, out_json: str, host: str = "qemu-7.2",
                    untouched: str = "populated") -> list[str]:
    return [sim, "compare", "--host", host, "--untouched", untouched, "--ram-mib", "2048",
            "--workload", ",".join(WORKLOADS),
            "--strategy", ",".join(s for s in REAL_TO_MODEL.values() if s),
            *LINKS[link], "--repeat", str(REPEAT), "--json", out_json]


def run_compare(command) -> dict:
    """compare's JSON from one run of `command(json_path)`, the compare command line."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "model.json")
        cmd = command(path)
        print("running: " + " ".join(cmd), file=sys.stderr)
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)


def run_model(sim: str, host: str, untouched: str = "populated") -> dict:
    """{link: [result rows]} from compare's JSON, one compare run per link."""
    return {link: run_compare(lambda path, link=link: compare_command(sim, link, path, host, untouched))
            for link in LINKS}


def model_rows(doc: dict) -> list[dict]:
    """One dict per model run: workload, strategy, bytes, normal, zero, syncs, total_ms,
    verified. compare's JSON lists each run (with --repeat, each repetition)."""
    rows = []
    for r in doc.get("results", []):
        runs = r.get("runs") or [r]
        for run in runs:
            rows.append({"workload": r["workload"], "strategy": r["strategy"],
                         "bytes": run.get("bytes_sent"), "normal": run.get("pages_sent"),
                         "zero": run.get("zero_pages"), "syncs": run.get("bitmap_syncs"),
                         "total_ms": run.get("total_ms"), "downtime_ms": run.get("downtime_ms"),
                         "verified": run.get("verified", r.get("verified"))})
    return rows


def cell(values, fmt="{:.0f}") -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    if min(values) == max(values):
        return fmt.format(med)
    return f"{fmt.format(med)} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def ratio(values, base, digits: int = 2) -> str:
    values = [v for v in values if v is not None]
    base = [v for v in base if v is not None]
    if not values or not base or statistics.median(base) == 0:
        return "-"
    return f"{statistics.median(values) / statistics.median(base):.{digits}f}x"


def table(real: dict, model: dict | None) -> str:
    lines = ["| workload | link | strategy | MiB sent real / model | normal pages real / model "
             "| zero pages real / model | syncs real / model | total ms real / model "
             "| downtime ms real / model | bytes x none real / model | time x none real / model |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for workload in WORKLOADS:
        for link in LINKS:
            def real_runs(strategy):
                return [r for r in real["rows"] if r["workload"] == workload
                        and r["link"] == link and r["strategy"] == strategy
                        and r["status"] == "completed"]

            def model_runs(strategy):
                name = REAL_TO_MODEL[strategy]
                if model is None or name is None:
                    return []
                return [r for r in model_rows(model[link]) if r["workload"] == workload
                        and r["strategy"] == name]
            rn, mn = real_runs("none"), model_runs("none")
            for strategy in REAL_TO_MODEL:
                rr, mr = real_runs(strategy), model_runs(strategy)

                def both(real_key, model_key, scale=1.0, fmt="{:.0f}"):
                    real_vals = [r[real_key] / scale for r in rr if r[real_key] is not None]
                    model_vals = [r[model_key] / scale for r in mr if r[model_key] is not None]
                    return f"{cell(real_vals, fmt)} / {cell(model_vals, fmt)}"
                bytes_x = (f"{ratio([r['transferred'] for r in rr], [r['transferred'] for r in rn])}"
                           f" / {ratio([r['bytes'] for r in mr], [r['bytes'] for r in mn])}")
                time_x = (f"{ratio([r['total_time_ms'] for r in rr], [r['total_time_ms'] for r in rn])}"
                          f" / {ratio([r['total_ms'] for r in mr], [r['total_ms'] for r in mn])}")
                lines.append(f"| {workload} | {link} | {strategy} | "
                             f"{both('transferred', 'bytes', MIB)} | "
                             f"{both('normal_pages', 'normal')} | {both('zero_pages', 'zero')} | "
                             f"{both('rounds', 'syncs')} | {both('total_time_ms', 'total_ms')} | "
                             f"{both('downtime_ms', 'downtime_ms')} | {bytes_x} | {time_x} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sim", default=os.path.join(REPO, "build", "tools", "vballoon-sim"))
    ap.add_argument("--real", default=DEFAULT_REAL)
    ap.add_argument("--model-json", help="a saved model run ({link: compare JSON}) instead of running compare")
    ap.add_argument("--save-model", help="write the model run ({link: compare JSON}) here")
    ap.add_argument("--real-only", action="store_true", help="print the real figures alone")
    ap.add_argument("--host", help="the model's host profile (default: the one for the real "
                    "file's QEMU, qemu-10 for 9.x and 10.x, else qemu-7.2)")
    ap.add_argument("--untouched", choices=("populated", "shared-zero"), default="populated",
                    help="how the model's source reads untouched guest RAM (compare --untouched)")
    args = ap.parse_args(argv)
    with open(args.real) as f:
        real = json.load(f)
    host = args.host or host_of(real)
    model = None
    if args.model_json:
        with open(args.model_json) as f:
            model = json.load(f)
    elif not args.real_only:
        model = run_model(args.sim, host, args.untouched)
    if args.save_model and model is not None:
        with open(args.save_model, "w") as f:
            json.dump(model, f, indent=1)
    how = real["how"]
    print(f"real: {how['qemu']}, {how['accel']}, {how['guest_ram_mib']} MiB, {how['driver']}, "
          f"{how['migration']}; {how['written']}")
    if model is not None:
        print("model: " + " ".join(compare_command("vballoon-sim", "1gbit", "F", host, args.untouched)[1:]).replace(
            "--max-bandwidth-gbit 1", "[--max-bandwidth-gbit 1]"))
    print()
    print(table(real, model))
    if model is not None:
        bad = [r for link in model for r in model_rows(model[link]) if not r["verified"]]
        if bad:
            print(f"\n{len(bad)} model run(s) did not verify", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
