# SPDX-License-Identifier: GPL-2.0
"""Run `vballoon-sim compare` with each mutant of spec/compare_mutants.tsv switched on and
expect it to catch the breakage itself: some run not verified and a non-zero exit. With no
mutant on, the same run must verify everywhere and exit 0.

Also runs the migration unit tests (migration_tests) with each mutant on and lists the
tests that fail, so the table shows what catches each breakage besides compare.

A breakage that loses only the writes of a short window is not shown by every run, so a
mutant gets up to --tries compare runs and stops at the first that catches it; a known miss
gets all of them.

Prints a markdown table (mutant, compare verified, compare exit, unit tests that failed)
and exits non-zero when compare misses a mutant or fails without one. For the run without a
mutant and for each known miss it also prints what a hint used after STOP would need to lose a
page, summed over the runs: hints that reached the device after their round was stopped, and
hinted pages the guest took back before DONE.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

FAILED_RE = re.compile(r"^\[  FAILED  \] ([^\s,]+)(?:, where .*)? \(\d+ ms\)$", re.MULTILINE)
REACHED = "vballoon mutant %s reached"


def read_mutants(path):
    """[(name, why compare misses it or None)]"""
    mutants = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip() and not line.lstrip().startswith("#"):
                cells = line.rstrip("\n").split("\t")
                mutants.append((cells[0].strip(), cells[2].strip() if len(cells) > 2 else None))
    return mutants


def run_compare(sim, args, mutant, timeout):
    env = dict(os.environ)
    env.pop("VB_MUTANT", None)
    if mutant:
        env["VB_MUTANT"] = mutant
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "compare.json")
        try:
            proc = subprocess.run([sim, "compare", *args, "--json", out_json], env=env,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"rc": "timeout", "verified": "?", "errors": [], "late": {}, "reached": False,
                    "output": ""}
        verified, errors = [], []
        late = {"hinted_pages_after_stop": 0, "hinted_pages_released_early": 0}
        if os.path.exists(out_json):
            with open(out_json) as f:
                doc = json.load(f)
            for r in doc.get("results", []):
                verified.append(bool(r.get("verified")))
                for key in late:
                    late[key] += int(r.get(key) or 0)
                if r.get("error"):
                    errors.append(f"{r.get('workload')}/{r.get('strategy')}: {r['error']}")
        output = proc.stdout + proc.stderr
        return {"rc": proc.returncode, "verified": verified, "errors": errors, "late": late,
                "reached": bool(mutant) and REACHED % mutant in output, "output": output}


def late_line(what, tries, late, runs):
    """What a hint used after STOP needs, summed over a mutant's compare runs."""
    return ("%s, %d compare %s (%d migrations): hints that reached the device after their "
            "round was stopped: %s pages; hinted pages the guest took back before DONE: %s pages"
            % (what, tries, "run" if tries == 1 else "runs", runs,
               late.get("hinted_pages_after_stop", "?"), late.get("hinted_pages_released_early", "?")))


def run_unit_tests(binary, mutant, timeout):
    env = dict(os.environ)
    env["VB_MUTANT"] = mutant
    try:
        proc = subprocess.run([binary], env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return ["(timed out)"]
    return sorted(set(FAILED_RE.findall(proc.stdout + proc.stderr)))


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build-mutants")
    ap.add_argument("--mutants", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "compare_mutants.tsv"))
    ap.add_argument("--only", action="append", help="run only this mutant (repeatable)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--tries", type=int, default=1,
                    help="compare runs per mutant at most; it stops at the first that catches it")
    ap.add_argument("compare_args", nargs=argparse.REMAINDER,
                    help="after --: the compare run's options")
    args = ap.parse_args(argv)
    sim = os.path.join(args.build, "tools", "vballoon-sim")
    unit = os.path.join(args.build, "tests", "migration", "migration_tests")
    compare_args = [a for a in args.compare_args if a != "--"]

    problems = []
    clean = run_compare(sim, compare_args, None, args.timeout)
    if clean["rc"] != 0 or not clean["verified"] or not all(clean["verified"]):
        problems.append("without a mutant the compare run did not pass: rc %s, %s\n%s"
                        % (clean["rc"], clean["errors"], clean["output"][-3000:]))
    print("compare run: vballoon-sim compare " + " ".join(compare_args))
    print()
    clean_runs = len(clean["verified"]) if isinstance(clean["verified"], list) else 0
    late_lines = [late_line("no mutant", 1, clean["late"], clean_runs)]
    print("| mutant | compare: runs not verified | compare exit | caught by compare | migration unit tests that fail |")
    print("|---|---|---|---|---|")
    for name, known_miss in read_mutants(args.mutants):
        if args.only and name not in args.only:
            continue
        bad, total, tries, r = 0, 0, 0, None
        late = {}
        while tries < max(1, args.tries):
            tries += 1
            r = run_compare(sim, compare_args, name, args.timeout)
            if not isinstance(r["verified"], list):
                bad = "?"
                break
            bad += sum(1 for v in r["verified"] if not v)
            for key, value in r["late"].items():
                late[key] = late.get(key, 0) + value
            total += len(r["verified"])
            if r["rc"] not in (0, "timeout") and bad > 0:
                break
        caught = r["rc"] not in (0, "timeout") and isinstance(bad, int) and bad > 0
        failed = run_unit_tests(unit, name, args.timeout) if os.path.exists(unit) else ["(no binary)"]
        print("| %s | %s of %s (%d %s) | %s | %s | %s |" % (
            name, bad, total if isinstance(bad, int) else "?", tries,
            "try" if tries == 1 else "tries", r["rc"],
            "yes" if caught else ("no (expected, see compare_mutants.tsv)" if known_miss else "NO"),
            ", ".join(failed) or "none"))
        if known_miss:
            late_lines.append(late_line(name, tries, late, total))
        if not caught and not known_miss:
            problems.append("%s: compare did not catch it (exit %s, verified %s)%s"
                            % (name, r["rc"], r["verified"],
                               "" if r["reached"] else "; the mutant was never reached"))
        sys.stdout.flush()
    print()
    for line in late_lines:
        print(line)
    for p in problems:
        print("\n" + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
