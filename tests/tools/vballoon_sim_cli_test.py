#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The vballoon-sim binary end to end on a small guest.

compare: every workload and strategy runs, the JSON has the documented shape, its values
are consistent (a page sent whole costs at least 4096 bytes, downtime is part of the total,
zero detection sends less than nothing on a fresh guest), every run is verified, the CSV
matches the JSON and the plot is a real PNG. Bad arguments fail with a message and a
non-zero status, before anything is written. inflate still runs.

    vballoon_sim_cli_test.py BUILD/tools/vballoon-sim
"""
import csv
import json
import os
import subprocess
import sys
import tempfile

RAM_MIB = "128"
WORKLOADS = ["fresh", "freed", "busy"]
STRATEGIES = ["none", "zero-detect", "hint", "report", "hint+zero-detect", "report+zero-detect"]
FIELDS = ["workload", "strategy", "bytes_sent", "pages_sent", "host_cpu_ms", "guest_cpu_ms",
          "rounds", "total_ms", "downtime_ms", "verified"]

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)


def run(binary, *args):
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=540,
                          check=False)


def check_compare(binary, scratch):
    json_path = os.path.join(scratch, "results.json")
    csv_path = os.path.join(scratch, "results.csv")
    png_path = os.path.join(scratch, "results.png")
    proc = run(binary, "compare", "--ram-mib", RAM_MIB, "--json", json_path, "--csv", csv_path,
               "--plot", png_path)
    check(proc.returncode == 0, f"compare exited {proc.returncode}: {proc.stderr}")
    for workload in WORKLOADS:
        check(f"workload {workload}" in proc.stdout, f"no table for {workload}:\n{proc.stdout}")
    # stderr is a pipe here, not a terminal: no progress bar.
    check("\r" not in proc.stderr, f"progress drawn on a pipe: {proc.stderr!r}")

    with open(json_path, encoding="utf-8") as f:
        results = json.load(f)["results"]
    pairs = [(r.get("workload"), r.get("strategy")) for r in results]
    check(sorted(pairs) == sorted((w, s) for w in WORKLOADS for s in STRATEGIES),
          f"runs are not every workload x strategy: {pairs}")
    by_pair = {}
    for r in results:
        name = f"{r.get('workload')}/{r.get('strategy')}"
        check(list(r.keys()) == FIELDS, f"{name}: fields {list(r.keys())}")
        if list(r.keys()) != FIELDS:
            continue
        by_pair[(r["workload"], r["strategy"])] = r
        for field in ("bytes_sent", "pages_sent", "rounds"):
            check(isinstance(r[field], int) and r[field] >= 0, f"{name}: {field} = {r[field]}")
        for field in ("host_cpu_ms", "guest_cpu_ms", "total_ms", "downtime_ms"):
            check(isinstance(r[field], (int, float)) and r[field] >= 0,
                  f"{name}: {field} = {r[field]}")
        check(r["verified"] is True, f"{name}: not verified")
        check(r["pages_sent"] * 4096 <= r["bytes_sent"],
              f"{name}: {r['pages_sent']} pages sent in {r['bytes_sent']} bytes")
        check(r["bytes_sent"] > 0, f"{name}: nothing sent")
        check(r["rounds"] >= 2, f"{name}: {r['rounds']} rounds (bulk pass and stop-and-copy at least)")
        check(r["downtime_ms"] <= r["total_ms"],
              f"{name}: downtime {r['downtime_ms']} ms above total {r['total_ms']} ms")
        check(r["host_cpu_ms"] > 0, f"{name}: no host CPU counted")
    none, zero = by_pair.get(("fresh", "none")), by_pair.get(("fresh", "zero-detect"))
    if none and zero:
        # A fresh guest's RAM is mostly zero: all of it goes whole without zero detection.
        check(zero["bytes_sent"] < none["bytes_sent"] / 2,
              f"fresh: zero-detect sent {zero['bytes_sent']} bytes, none {none['bytes_sent']}")
        check(none["pages_sent"] * 4096 >= int(RAM_MIB) << 20,
              f"fresh/none sent {none['pages_sent']} pages, less than all of RAM")

    with open(csv_path, encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    check(len(rows) == len(results), f"CSV has {len(rows)} rows, JSON {len(results)}")
    for row, r in zip(rows, results):
        check(row["workload"] == r["workload"] and row["strategy"] == r["strategy"] and
              int(row["bytes_sent"]) == r["bytes_sent"] and
              int(row["pages_sent"]) == r["pages_sent"] and
              row["verified"] == ("true" if r["verified"] else "false"),
              f"CSV row {row} does not match {r}")

    with open(png_path, "rb") as f:
        check(f.read(8) == b"\x89PNG\r\n\x1a\n", "the plot is not a PNG")


def check_bad_arguments(binary, scratch):
    out = os.path.join(scratch, "bad.json")
    cases = [
        ["compare", "--ram-mib", "10", "--json", out],
        ["compare", "--ram-mib", "many", "--json", out],
        ["compare", "--workload", "idle", "--json", out],
        ["compare", "--workload", "fresh,idle", "--json", out],
        ["compare", "--strategy", "compress", "--json", out],
        ["compare", "--plot", os.path.join(scratch, "plot.pdf"), "--json", out],
        ["compare", "--json", os.path.join(scratch, "no-such-dir", "r.json")],
        ["compare", "--no-such-option"],
        ["inflate", "--profile", "vmware"],
        [],
    ]
    for args in cases:
        proc = run(binary, *args)
        check(proc.returncode != 0, f"{args}: exit status 0")
        check(proc.stderr.strip() != "" or "subcommand" in proc.stdout,
              f"{args}: no message (stdout {proc.stdout!r})")
        check("Traceback" not in proc.stderr and "terminate called" not in proc.stderr,
              f"{args}: crashed: {proc.stderr}")
        check(not os.path.exists(out), f"{args}: wrote {out} anyway")
        if os.path.exists(out):
            os.unlink(out)


def check_inflate(binary):
    proc = run(binary, "inflate", "--ram-mib", RAM_MIB, "--json")
    check(proc.returncode == 0, f"inflate exited {proc.returncode}: {proc.stderr}")
    if proc.returncode == 0:
        result = json.loads(proc.stdout)
        check(result["problems"] == [], f"inflate problems: {result['problems']}")
        check(result["inflate"]["actual_pages"] == int(RAM_MIB) * 256 // 2,
              f"inflate reached {result['inflate']['actual_pages']} pages")


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} VBALLOON_SIM", file=sys.stderr)
        return 2
    binary = argv[1]
    with tempfile.TemporaryDirectory(prefix="vballoon-sim-cli-") as scratch:
        check_bad_arguments(binary, scratch)
        check_inflate(binary)
        check_compare(binary, scratch)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} problems", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
