#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The vballoon-sim binary end to end on a small guest.

compare: by default a host runs the strategies it has (qemu-7.2 checks every page for zero:
no none, hint or report alone; qemu-10 and its older name qemu-9 all six), its ratios then against zero-detect; with
--strategy all every workload and strategy runs (each twice, --repeat 2), the JSON has the documented shape, the
header names the host profile and link, each workload has its hint+zero-detect against
zero-detect line and crossover line (the summary's ratios ordered min <= median <= max, the
crossover at the run's own link equal to the measured ratio), its values are consistent (a page sent whole costs at least 4096 bytes, downtime is part of the total,
zero detection sends less than nothing on a fresh guest), every run is verified, the CSV
matches the JSON and the plot is a real PNG. Bad arguments fail with a message and a
non-zero status, before anything is written; so does a described workload with an unknown key
or a value out of range, naming the key. A described workload runs under its name on its own
guest size, and one that dirties faster than a 1 Gbit/s link sends says it did not converge.
--max-bandwidth-gbit shows in the header and the JSON's setup. qemu-10's channels (multifd with
one channel, either zero-page-detection, its stream over TCP) run verified and are said in the
setup. inflate still runs.

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
FIELDS = ["workload", "strategy", "run", "bytes_sent", "pages_sent", "zero_pages", "host_cpu_ms",
          "zero_scan_cpu_ms", "hint_cpu_ms", "guest_cpu_ms", "receiver_cpu_ms", "reader_copy_ms", "handoff_ms", "rounds",
          "bitmap_syncs", "converged", "dirty_bytes_per_second", "pending_bytes", "threshold_bytes",
          "sent_bytes_per_second",
          "total_ms", "downtime_ms", "fixed_ms", "first_hint_ms",
          "hinted_pages_after_stop", "hinted_pages_released_early", "verified"]
REPEAT = 2
LINKS = [1, 10, 25, 100, None]

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
    proc = run(binary, "compare", "--ram-mib", RAM_MIB, "--repeat", str(REPEAT), "--strategy", "all",
               "--json", json_path, "--csv", csv_path, "--plot", png_path)
    check(proc.returncode == 0, f"compare exited {proc.returncode}: {proc.stderr}")
    for workload in WORKLOADS:
        check(f"workload {workload}" in proc.stdout, f"no table for {workload}:\n{proc.stdout}")
    # stderr is a pipe here, not a terminal: no progress bar.
    check("\r" not in proc.stderr, f"progress drawn on a pipe: {proc.stderr!r}")

    check("host qemu-7.2:" in proc.stdout, f"no host profile in the header:\n{proc.stdout}")
    check("link 10 Gbit/s" in proc.stdout, f"the default link is not 10 Gbit/s:\n{proc.stdout}")
    with open(json_path, encoding="utf-8") as f:
        data = json.load(f)
    results = data["results"]
    # Pairs of hint+zero-detect and zero-detect runs that both converged: the summary's runs.
    # On a loaded machine a busy guest's zero-detect run can fail to converge (the CPU-bound
    # sends fall under what the downtime limit needs); its cell and a note then say so.
    converged = {(r["workload"], r["strategy"], r["run"]) for r in results if r["converged"]}
    paired = {w: sum((w, "hint+zero-detect", i) in converged and (w, "zero-detect", i) in converged
                     for i in range(REPEAT)) for w in WORKLOADS}
    for workload in WORKLOADS:
        table = proc.stdout[proc.stdout.find(f"workload {workload}"):]
        end = table.find("\nworkload ", 1)
        table = table if end < 0 else table[:end]
        if any((workload, s, i) not in converged for s in STRATEGIES for i in range(REPEAT)):
            check("did not converge: the guest dirtied" in table and "did not converge: a guest that keeps" in table,
                  f"{workload}: a run did not converge and the table does not say so:\n{table}")
        if paired[workload] == 0:
            check("hint+zero-detect against zero-detect (" not in table, f"{workload}: a ratio with no pair")
            continue
        check(table.find(f"hint+zero-detect against zero-detect ({paired[workload]} run(s)") >= 0,
              f"{workload}: no hint+zero-detect against zero-detect line")
        check(table.find("crossover, time ratio by link: 1 Gbit/s") >= 0, f"{workload}: no crossover line")

    pairs = [(r.get("workload"), r.get("strategy"), r.get("run")) for r in results]
    expected = [(w, s, i) for w in WORKLOADS for s in STRATEGIES
                for i in range(REPEAT)]
    check(sorted(pairs) == sorted(expected),
          f"runs are not every workload x strategy x {REPEAT}: {pairs}")
    check(data["setup"]["host"] == "qemu-7.2" and data["setup"]["repeat"] == REPEAT and
          data["setup"]["link_bytes_per_second"] == 10e9 / 8 and
          data["setup"]["max_bandwidth_bytes_per_second"] is None, f"setup: {data['setup']}")
    summary = {s["workload"]: s for s in data["summary"]}
    check(sorted(summary) == sorted(w for w in WORKLOADS if paired[w]), f"summary covers {sorted(summary)}")
    for workload, s in summary.items():
        check(s["runs"] == paired[workload], f"{workload}: summary of {s['runs']} runs")
        check([c["link_gbit"] for c in s["crossover"]] == LINKS, f"{workload}: crossover links {s['crossover']}")
        for ratio in [s["time_ratio"], s["host_cpu_ratio"], s["bytes_ratio"]] + [c["time_ratio"] for c in s["crossover"]]:
            check(0 < ratio["min"] <= ratio["median"] <= ratio["max"], f"{workload}: ratio {ratio}")
        # The crossover at the run's own link (10 Gbit/s) is the measured ratio.
        check(abs(s["crossover"][1]["time_ratio"]["median"] - s["time_ratio"]["median"]) < 1e-9,
              f"{workload}: crossover at 10 Gbit/s {s['crossover'][1]} against measured {s['time_ratio']}")
    by_pair = {}
    for r in results:
        name = f"{r.get('workload')}/{r.get('strategy')}"
        check(list(r.keys()) == FIELDS, f"{name}: fields {list(r.keys())}")
        if list(r.keys()) != FIELDS:
            continue
        by_pair[(r["workload"], r["strategy"])] = r
        for field in ("bytes_sent", "pages_sent", "zero_pages", "rounds"):
            check(isinstance(r[field], int) and r[field] >= 0, f"{name}: {field} = {r[field]}")
        for field in ("host_cpu_ms", "guest_cpu_ms", "total_ms", "downtime_ms"):
            check(isinstance(r[field], (int, float)) and r[field] >= 0,
                  f"{name}: {field} = {r[field]}")
        check(r["verified"] is True, f"{name}: not verified")
        check(r["fixed_ms"] <= r["total_ms"], f"{name}: fixed {r['fixed_ms']} ms above the total")
        check(r["first_hint_ms"] is None or ("hint" in r["strategy"] and r["first_hint_ms"] > 0),
              f"{name}: first hint at {r['first_hint_ms']}")
        check(r["pages_sent"] * 4096 <= r["bytes_sent"],
              f"{name}: {r['pages_sent']} pages sent in {r['bytes_sent']} bytes")
        check(r["bytes_sent"] > 0, f"{name}: nothing sent")
        check(r["rounds"] >= 2, f"{name}: {r['rounds']} rounds (bulk pass and stop-and-copy at least)")
        # The setup's sync, one ending each live round at least, and the final one.
        check(r["bitmap_syncs"] >= r["rounds"] + 1, f"{name}: {r['bitmap_syncs']} syncs in {r['rounds']} rounds")
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


def check_default_strategies(binary, scratch):
    expected = {"qemu-7.2": ["zero-detect", "hint+zero-detect", "report+zero-detect"],
                "qemu-10": STRATEGIES, "qemu-9": STRATEGIES}
    for host, strategies in expected.items():
        json_path = os.path.join(scratch, f"default-{host}.json")
        proc = run(binary, "compare", "--ram-mib", RAM_MIB, "--workload", "fresh", "--repeat", "1",
                   "--host", host, "--json", json_path)
        check(proc.returncode == 0, f"compare --host {host} exited {proc.returncode}: {proc.stderr}")
        if proc.returncode != 0:
            continue
        with open(json_path, encoding="utf-8") as f:
            ran = [r["strategy"] for r in json.load(f)["results"]]
        check(ran == strategies, f"--host {host}: default strategies {ran}, expected {strategies}")
        base = "none" if "none" in strategies else "zero-detect"
        check(f"workload fresh (base: {base})" in proc.stdout,
              f"--host {host}: the table is not against {base}:\n{proc.stdout}")


def check_max_bandwidth(binary, scratch):
    json_path = os.path.join(scratch, "max-bandwidth.json")
    proc = run(binary, "compare", "--ram-mib", RAM_MIB, "--workload", "fresh", "--repeat", "1",
               "--strategy", "zero-detect", "--link-gbit", "unlimited", "--max-bandwidth-gbit", "1",
               "--json", json_path)
    check(proc.returncode == 0, f"compare --max-bandwidth-gbit 1 exited {proc.returncode}: {proc.stderr}")
    if proc.returncode != 0:
        return
    check("max-bandwidth 1 Gbit/s while the guest runs" in proc.stdout,
          f"no max-bandwidth in the header:\n{proc.stdout}")
    with open(json_path, encoding="utf-8") as f:
        data = json.load(f)
    check(data["setup"]["max_bandwidth_bytes_per_second"] == 1e9 / 8 and
          data["setup"]["link_bytes_per_second"] is None, f"setup: {data['setup']}")


def check_bad_arguments(binary, scratch):
    out = os.path.join(scratch, "bad.json")
    cases = [
        ["compare", "--ram-mib", "10", "--json", out],
        ["compare", "--ram-mib", "many", "--json", out],
        ["compare", "--ram-mib", "262145", "--json", out],  # above 256 GiB
        ["compare", "--workload", "idle", "--json", out],
        ["compare", "--workload", "fresh,idle", "--json", out],
        ["compare", "--strategy", "compress", "--json", out],
        ["compare", "--plot", os.path.join(scratch, "plot.pdf"), "--json", out],
        ["compare", "--json", os.path.join(scratch, "no-such-dir", "r.json")],
        ["compare", "--no-such-option"],
        ["compare", "--host", "qemu-2.12", "--json", out],
        ["compare", "--link-gbit", "fast", "--json", out],
        ["compare", "--link-gbit", "0", "--json", out],
        ["compare", "--link-gbit", "10x", "--json", out],
        ["compare", "--max-bandwidth-gbit", "fast", "--json", out],
        ["compare", "--max-bandwidth-gbit", "0", "--json", out],
        ["compare", "--threads", "0", "--json", out],
        ["compare", "--downtime-ms", "-5", "--json", out],
        ["compare", "--untouched", "sparse", "--json", out],
        ["compare", "--repeat", "0", "--json", out],
        ["compare", "--host-costs", "fast", "--json", out],
        ["compare", "--host-costs", "0,100", "--json", out],
        ["compare", "--host-costs", "100", "--json", out],
        ["compare", "--host-costs", "100,200,300", "--json", out],
        ["compare", "--host-costs-file", os.path.join(scratch, "no-such-costs.json"), "--json", out],
        ["compare", "--host-costs", "100,200", "--host-costs-file", out, "--json", out],
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


def check_bad_descriptions(binary, scratch):
    """A described workload with an unknown key or a value out of range: exit 2, a message
    naming the key, nothing run and nothing written."""
    out = os.path.join(scratch, "bad.json")
    described = os.path.join(scratch, "described.json")
    cases = [
        ({"hot_mb": 64}, [], 'unknown key "hot_mb"'),
        ({"hot_mib": -1}, [], '"hot_mib": -1 is out of range'),
        ({"hot_mib": "64"}, [], '"hot_mib": must be a number'),
        ({"freed_fraction": 1.5}, [], '"freed_fraction": 1.5 is out of range'),
        ({"ram_mib": 16}, [], '"ram_mib": 16 is out of range'),
        ({"working_set_mib": 100}, ["--ram-mib", "64"], '"working_set_mib" + "freed_mib" (100 MiB) exceed'),
        ({"hot_mib_s": 10}, [], '"hot_mib_s" rewrites a hot set'),
        ({"ram_mib": 256}, ["--ram-mib", "128"], "describes a 256 MiB guest, not 128 MiB"),
        ({"name": "fresh"}, ["--workload", "fresh"], "needs a name of its own"),
        (None, ["--workload-set", "hot_mb=4"], 'unknown key "hot_mb"'),
        (None, ["--workload-set", "churn_mib_s=abc"], '"churn_mib_s": not a number'),
    ]
    for description, args, says in cases:
        if description is not None:
            with open(described, "w", encoding="utf-8") as f:
                json.dump(description, f)
            args = ["--workload-file", described, *args]
        proc = run(binary, "compare", *args, "--json", out)
        check(proc.returncode == 2, f"{description} {args}: exit status {proc.returncode}: {proc.stderr}")
        check(says in proc.stderr, f"{description} {args}: no '{says}' in {proc.stderr!r}")
        check("workload" not in proc.stdout, f"{description} {args}: ran: {proc.stdout}")
        check(not os.path.exists(out), f"{description} {args}: wrote {out} anyway")
        if os.path.exists(out):
            os.unlink(out)


def check_described_workload(binary, scratch):
    """A described workload runs alone (or beside the presets --workload names), under its
    name, on the guest its ram_mib says; one whose hot set is rewritten faster than a 1 Gbit/s
    link sends does not converge and says so in its row and in the JSON."""
    described = os.path.join(scratch, "hot.json")
    with open(described, "w", encoding="utf-8") as f:
        json.dump({"name": "hot", "ram_mib": 256, "working_set_mib": 16, "hot_mib": 64, "hot_mib_s": 256,
                   "warmup_ms": 100}, f)
    json_path = os.path.join(scratch, "hot-results.json")
    proc = run(binary, "compare", "--workload-file", described, "--workload", "fresh", "--link-gbit", "1",
               "--strategy", "zero-detect", "--repeat", "1", "--json", json_path)
    check(proc.returncode == 0, f"described: exit status {proc.returncode}: {proc.stderr}")
    if proc.returncode != 0:
        return
    check("live migration of a 256 MiB guest" in proc.stdout, f"described: not its ram_mib:\n{proc.stdout}")
    with open(json_path, encoding="utf-8") as f:
        results = {r["workload"]: r for r in json.load(f)["results"]}
    check(sorted(results) == ["fresh", "hot"], f"described: workloads {sorted(results)}")
    hot, fresh = results.get("hot"), results.get("fresh")
    if not hot or not fresh:
        return
    table = proc.stdout[proc.stdout.find("workload hot"):]
    check("did not converge: the guest dirtied" in table, f"described: no 'did not converge':\n{table}")
    check(not hot["converged"] and hot["verified"], f"described: {hot}")
    link = 1e9 / 8
    check(hot["dirty_bytes_per_second"] > 1.5 * link, f"described: dirtied {hot['dirty_bytes_per_second']}")
    check(0.5 * link < hot["sent_bytes_per_second"] <= 1.01 * link,
          f"described: sent {hot['sent_bytes_per_second']}")
    check(hot["pending_bytes"] > hot["threshold_bytes"] > 0,
          f"described: pending {hot['pending_bytes']}, threshold {hot['threshold_bytes']}")
    check(fresh["converged"], f"fresh beside it did not converge: {fresh}")


def check_host_costs(binary, scratch):
    """Another host's per-page costs: given as options or as a file (an object, or compare's
    own --json, whose first workload's costs are taken), echoed in the setup, and the
    hinted time ratio printed and written for that host; a file without them is refused."""
    first = os.path.join(scratch, "costs-here.json")
    common = ["--ram-mib", "256", "--workload", "fresh", "--strategy", "zero-detect",
              "--strategy", "hint+zero-detect", "--repeat", "1", "--link-gbit", "unlimited"]
    proc = run(binary, "compare", *common, "--json", first)
    check(proc.returncode == 0, f"costs: exit status {proc.returncode}: {proc.stderr}")
    if proc.returncode != 0:
        return
    check("costs measured here (zero-detect's median run): zero check" in proc.stdout,
          f"costs: no costs line:\n{proc.stdout}")
    with open(first, encoding="utf-8") as f:
        costs = json.load(f)["costs"]
    check(len(costs) == 1 and costs[0]["workload"] == "fresh" and costs[0]["zero_check_ns_per_page"] > 0
          and costs[0]["send_ns_per_page"] > 0, f"costs: {costs}")
    second = os.path.join(scratch, "costs-there.json")
    for given, origin in ((["--host-costs-file", first], f"{first} (workload fresh)"),
                          (["--host-costs", "1000,5000"], "--host-costs")):
        proc = run(binary, "compare", *common, *given, "--json", second)
        check(proc.returncode == 0, f"{given}: exit status {proc.returncode}: {proc.stderr}")
        if proc.returncode != 0:
            continue
        check(f"on the host of {origin} (zero check" in proc.stdout, f"{given}: no host line:\n{proc.stdout}")
        with open(second, encoding="utf-8") as f:
            data = json.load(f)
        check(data["setup"]["host_costs"]["from"] == origin, f"{given}: setup {data['setup']}")
        ratio = data["summary"][0].get("time_ratio_with_host_costs", {}).get("median", 0)
        check(0 < ratio < 10, f"{given}: ratio for the given host {ratio}")
    bad = os.path.join(scratch, "bad-costs.json")
    with open(bad, "w", encoding="utf-8") as f:
        json.dump({"zero_check_ns_per_page": 100}, f)
    proc = run(binary, "compare", *common, "--host-costs-file", bad)
    check(proc.returncode == 2 and '"send_ns_per_page" must be a number' in proc.stderr,
          f"costs file without send_ns_per_page: {proc.returncode} {proc.stderr!r}")


def check_channels(binary, scratch):
    """How the channels go: qemu-10's multifd over loopback TCP with one channel and either
    zero-page-detection (legacy: a fill byte per zero page on top of multifd's offset, the
    same pages), its single stream over TCP, all verified and said in the setup; a host
    without the parameter and --threads beside --multifd-channels are refused."""
    common = ["--host", "qemu-10", "--ram-mib", "128", "--workload", "fresh", "--strategy",
              "zero-detect", "--repeat", "1", "--link-gbit", "unlimited"]
    runs = {}
    for name, given, said in (
            ("legacy", ["--multifd-channels", "1", "--zero-page-detection", "legacy"],
             "multifd over loopback TCP, zero-page-detection legacy"),
            ("multifd", ["--multifd-channels", "1", "--zero-page-detection", "multifd"],
             "multifd over loopback TCP, zero-page-detection multifd"),
            ("tcp", ["--stream-to", "tcp"], "loopback TCP"),
            ("cat", [], "exec:cat's pipe")):
        out = os.path.join(scratch, f"channels-{name}.json")
        proc = run(binary, "compare", *common, *given, "--json", out)
        check(proc.returncode == 0, f"channels {name}: exit {proc.returncode}: {proc.stderr}")
        if proc.returncode != 0:
            continue
        check(f"1 sender channel(s) ({said})" in proc.stdout, f"channels {name}: header:\n{proc.stdout}")
        with open(out, encoding="utf-8") as f:
            data = json.load(f)
        check(data["setup"]["channels"] == said, f"channels {name}: setup {data['setup']}")
        result = data["results"][0]
        check(result["verified"], f"channels {name}: not verified: {result}")
        check(result["handoff_ms"] >= result["reader_copy_ms"] > 0,
              f"channels {name}: hand-off {result['handoff_ms']}, copy {result['reader_copy_ms']}")
        runs[name] = result
    if "legacy" in runs and "multifd" in runs:
        legacy, multifd = runs["legacy"], runs["multifd"]
        check(legacy["zero_pages"] == multifd["zero_pages"] > 0 and
              legacy["bytes_sent"] - multifd["bytes_sent"] == legacy["zero_pages"],
              f"channels: legacy {legacy['bytes_sent']} B against multifd {multifd['bytes_sent']} B, "
              f"{legacy['zero_pages']} zero pages")
    proc = run(binary, "compare", "--host", "qemu-7.2", "--multifd-channels", "2",
               "--zero-page-detection", "multifd", "--ram-mib", "128")
    check(proc.returncode == 2 and "has no such parameter" in proc.stderr,
          f"qemu-7.2 with --zero-page-detection: {proc.returncode} {proc.stderr!r}")
    proc = run(binary, "compare", "--threads", "2", "--multifd-channels", "2", "--ram-mib", "128")
    check(proc.returncode != 0 and "excludes" in proc.stderr,
          f"--threads with --multifd-channels: {proc.returncode} {proc.stderr!r}")


def check_inflate(binary):
    proc = run(binary, "inflate", "--ram-mib", RAM_MIB, "--json")
    check(proc.returncode == 0, f"inflate exited {proc.returncode}: {proc.stderr}")
    if proc.returncode == 0:
        result = json.loads(proc.stdout)
        check(result["problems"] == [], f"inflate problems: {result['problems']}")
        check(result["inflate"]["actual_pages"] == int(RAM_MIB) * 256 // 2,
              f"inflate reached {result['inflate']['actual_pages']} pages")


def check_squeeze(binary):
    proc = run(binary, "squeeze", "--targets-mib", "128", "450", "--step-seconds", "20")
    check(proc.returncode == 0, f"squeeze exited {proc.returncode}: {proc.stderr}")
    for needed in ("governor off", "governor on", "throughput", "actual "):
        check(needed in proc.stdout, f"squeeze printed no '{needed}'")


def main(argv):
    if len(argv) != 2:
        print(f"usage: {argv[0]} VBALLOON_SIM", file=sys.stderr)
        return 2
    binary = argv[1]
    with tempfile.TemporaryDirectory(prefix="vballoon-sim-cli-") as scratch:
        check_bad_arguments(binary, scratch)
        check_bad_descriptions(binary, scratch)
        check_described_workload(binary, scratch)
        check_host_costs(binary, scratch)
        check_channels(binary, scratch)
        check_inflate(binary)
        check_squeeze(binary)
        check_default_strategies(binary, scratch)
        check_max_bandwidth(binary, scratch)
        check_compare(binary, scratch)
    for failure in failures:
        print(f"FAIL: {failure}", file=sys.stderr)
    print(f"{'FAILED' if failures else 'passed'}: {len(failures)} problems", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
