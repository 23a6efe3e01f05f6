# SPDX-License-Identifier: GPL-2.0
"""Run every mutant of spec/mutants.tsv against the tests its requirement row names.

For each mutant (a deliberate breakage compiled into the mutant build and switched on by the
VB_MUTANT environment variable), run the GoogleTest tests that spec/requirements.md lists
for its row and expect at least one to fail. The same tests must pass with no mutant on.
Pytest node ids (the QEMU guest suite) are not run here: they are counted as "guest suite".

Prints a markdown table (row, level, mutant, tests run, failed, caught) and exits non-zero
when the tests pass with no mutant, when a mutant is not caught and its row is not listed
under "Partial coverage", or when a run fails without the mutant ever being reached.
"""

import argparse
import concurrent.futures
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_requirements as req  # noqa: E402

REACHED = "vballoon mutant %s reached"
# One line per failed test as it finishes: "[  FAILED  ] Suite.Test (3 ms)", or for a
# parametrized one "[  FAILED  ] Inst/Suite.Test/case, where GetParam() = ... (3 ms)".
FAILED_RE = re.compile(r"^\[  FAILED  \] ([^\s,]+)(?:, where .*)? \(\d+ ms\)$", re.MULTILINE)


def gtest_binaries(build):
    found = []
    tests = os.path.join(build, "tests")
    for folder in sorted(os.listdir(tests)) if os.path.isdir(tests) else []:
        path = os.path.join(tests, folder)
        if not os.path.isdir(path):
            continue
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            if name.endswith("_tests") and os.access(full, os.X_OK) and os.path.isfile(full):
                found.append(full)
    return found


def full_names(name, listed):
    """Every full gtest name (for --gtest_filter) that the row's `Suite.Test` stands for."""
    suite, test = name.split(".", 1)
    suite_re = re.compile(r"(?:.+/)?%s(?:/\d+)?" % re.escape(suite))
    return ["%s.%s" % (s, t) for s, t in listed
            if (t == test or t.startswith(test + "/")) and suite_re.fullmatch(s)]


class Run:
    def __init__(self, mutant, rc, output, seconds, timed_out):
        self.mutant = mutant
        self.rc = rc
        self.output = output
        self.seconds = seconds
        self.timed_out = timed_out

    @property
    def failed(self):
        return self.rc != 0

    def failed_tests(self):
        # gtest prints each failure twice (when it happens and in the summary).
        return sorted(set(FAILED_RE.findall(self.output)))

    def reached(self):
        return REACHED % self.mutant in self.output


def run_gtests(binary, names, mutant, timeout):
    env = dict(os.environ)
    env.pop("VB_MUTANT", None)
    if mutant:
        env["VB_MUTANT"] = mutant
    start = time.monotonic()
    try:
        proc = subprocess.run([binary, "--gtest_filter=" + ":".join(names)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              universal_newlines=True, errors="replace", timeout=timeout)
        return Run(mutant, proc.returncode, proc.stdout, time.monotonic() - start, False)
    except subprocess.TimeoutExpired as e:
        out = e.stdout if isinstance(e.stdout, str) else (e.stdout or b"").decode(errors="replace")
        return Run(mutant, -1, out, time.monotonic() - start, True)


def run(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(os.path.dirname(here), "build-mutants"),
                    help="the build configured with -DVB_MUTANTS=ON (default: build-mutants/)")
    ap.add_argument("--requirements", default=os.path.join(here, "requirements.md"))
    ap.add_argument("--mutants", default=os.path.join(here, "mutants.tsv"))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=120,
                    help="seconds one test binary may run before it counts as hung (caught)")
    ap.add_argument("--only", metavar="MUTANT", action="append",
                    help="run only this mutant (repeatable)")
    args = ap.parse_args(argv)

    rows, errors, _ = req.parse_tables(args.requirements)
    errors += req.check_rows(args.requirements, rows)
    mutants, map_errors = req.parse_mutant_map(args.mutants)
    errors += map_errors
    partial = req.partial_rows(args.requirements)
    if errors:
        for e in errors:
            print("error: " + e, file=sys.stderr)
        return 1
    by_id = {r.id: r for r in rows}
    if args.only:
        unknown = sorted(set(args.only) - {m.name for m in mutants})
        if unknown:
            print("error: not in %s: %s" % (args.mutants, ", ".join(unknown)), file=sys.stderr)
            return 1
        mutants = [m for m in mutants if m.name in args.only]

    binaries = gtest_binaries(args.build)
    if not binaries:
        print("error: no *_tests binaries under %s/tests (build it first: ci/mutants.sh)"
              % args.build, file=sys.stderr)
        return 1
    listed = {}
    for b in binaries:
        tests, err = req.list_gtests(b)
        if err:
            print("error: " + err, file=sys.stderr)
            return 1
        listed[b] = tests

    # What each mutant runs: the row's GoogleTest names, resolved per binary.
    plan = []
    problems = []
    for m in mutants:
        row = by_id.get(m.row)
        if row is None:
            problems.append("%s: row %s is not in %s" % (m.name, m.row, args.requirements))
            continue
        per_binary = {}
        for name in row.tests:
            hits = [(b, full) for b in binaries for full in full_names(name, listed[b])]
            if not hits:
                problems.append("%s: %s names %s, which no binary in %s lists"
                                % (m.name, row.id, name, args.build))
            for b, full in hits:
                per_binary.setdefault(b, []).append(full)
        if not row.tests:
            problems.append("%s: %s names no GoogleTest test to run" % (m.name, row.id))
        plan.append((m, row, per_binary))
    if problems:
        for p in problems:
            print("error: " + p, file=sys.stderr)
        return 1

    started = time.monotonic()
    # Baseline: every test any mutant runs must pass with no mutant switched on.
    baseline = {}
    for _, _, per_binary in plan:
        for b, names in per_binary.items():
            baseline.setdefault(b, set()).update(names)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        clean = {b: pool.submit(run_gtests, b, sorted(names), None, args.timeout)
                 for b, names in baseline.items()}
        broken = [(b, r.result()) for b, r in clean.items() if r.result().failed]
        for b, r in broken:
            print(r.output[-3000:], file=sys.stderr)
            print("error: %s fails with no mutant switched on (%s)"
                  % (os.path.basename(b), ", ".join(r.failed_tests()) or "rc %d" % r.rc),
                  file=sys.stderr)
        if broken:
            return 1
        futures = [(m, row, {b: pool.submit(run_gtests, b, names, m.name, args.timeout)
                             for b, names in per_binary.items()})
                   for m, row, per_binary in plan]
        results = [(m, row, {b: f.result() for b, f in runs.items()}) for m, row, runs in futures]

    print("| Row | Level | Mutant | Tests run | Failed | Caught | Seconds |")
    print("|---|---|---|---|---|---|---|")
    failures = []
    caught_count = 0
    for m, row, runs in results:
        ran = sum(len(n) for b, n in plan_of(plan, m).items())
        failed = [t for r in runs.values() for t in r.failed_tests()]
        hung = [os.path.basename(b) for b, r in runs.items() if r.timed_out]
        crashed = [os.path.basename(b) for b, r in runs.items()
                   if r.failed and not r.timed_out and not r.failed_tests()]
        caught = any(r.failed for r in runs.values())
        reached = any(r.reached() for r in runs.values())
        guest = len(row.pytests)
        if caught:
            caught_count += 1
            verdict = "yes"
            if hung:
                verdict += " (hung: %s)" % ", ".join(hung)
            elif crashed:
                verdict += " (crashed: %s)" % ", ".join(crashed)
            if not reached:
                verdict += ", NOT REACHED"
                failures.append("%s: the tests failed without reaching the mutant" % m.name)
        else:
            verdict = "no" if reached else "no (not reached)"
            if row.id in partial:
                verdict += ", row partial"
            else:
                failures.append("%s: %s's tests pass with the rule broken; fix the tests or "
                                "explain the row under \"Partial coverage\"" % (m.name, row.id))
        tests_run = "%d" % ran + (" (+%d guest suite)" % guest if guest else "")
        print("| %s | %s | `%s` | %s | %d | %s | %.1f |"
              % (row.id, row.level, m.name, tests_run, len(failed) + len(hung) + len(crashed),
                 verdict, sum(r.seconds for r in runs.values())))
    print()
    print("%d mutants, %d caught, in %.0f s (%d jobs)"
          % (len(results), caught_count, time.monotonic() - started, args.jobs))
    for f in failures:
        print("error: " + f, file=sys.stderr)
    return 1 if failures else 0


def plan_of(plan, mutant):
    for m, _, per_binary in plan:
        if m is mutant:
            return per_binary
    return {}


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
