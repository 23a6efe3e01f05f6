#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The calibration tables from the saved sittings, without QEMU or a model run: each tool
reads a real file and a saved model run and prints every cell, real beside model, the model's
runs all verified; the 2026-12-04 figures the docs quote come out of them.

    calibration_tables_test.py
"""
import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAL = os.path.join(REPO, "tests", "guest", "calibration")
failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def run(*args):
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, check=False,
                          timeout=120)


def rows(text, first):
    return [line for line in text.splitlines() if line.startswith(first)]


def main():
    for real, model, host in (("qemu-7.2-idle-20261204.json", "model-qemu-7.2-idle-20261204.json",
                               "--host qemu-7.2"),
                              ("qemu-10.0-idle-20261204b.json", "model-qemu-10-20261204b.json",
                               "--host qemu-10")):
        proc = run(os.path.join(REPO, "tools", "calibration_table.py"), "--real",
                   os.path.join(CAL, real), "--model-json", os.path.join(CAL, model))
        check(proc.returncode == 0, f"{real}: exit {proc.returncode}: {proc.stderr}")
        table = rows(proc.stdout, "| fresh") + rows(proc.stdout, "| freed") + rows(proc.stdout, "| busy")
        # 3 workloads x 2 links x 4 strategies, the model beside all but hint+report
        check(len(table) == 24, f"{real}: {len(table)} rows")
        check(sum(" / -" not in r for r in table) == 18, f"{real}: model cells {table}")
        check(host in proc.stdout, f"{real}: the model's command names {host}:\n{proc.stdout}")
    proc = run(os.path.join(REPO, "tools", "multifd_table.py"), "--real",
               os.path.join(CAL, "qemu-10.0-multifd-20261204b.json"), "--model-json",
               os.path.join(CAL, "model-qemu-10-multifd-20261204b.json"))
    check(proc.returncode == 0, f"multifd: exit {proc.returncode}: {proc.stderr}")
    table = rows(proc.stdout, "| off") + rows(proc.stdout, "| 1 ") + rows(proc.stdout, "| 2 ") + \
        rows(proc.stdout, "| 4 ")
    check(len(table) == 12, f"multifd: {len(table)} rows:\n{proc.stdout}")
    check(all(r.count(" - ") == 0 for r in table), f"multifd: a cell without figures: {table}")
    check(any(r.startswith("| 1 | none | 2054.2") for r in table), f"multifd: {table}")
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
