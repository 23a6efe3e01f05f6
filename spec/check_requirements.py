#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check spec/requirements.md: IDs, sides, levels and the tests each row names.

Usage:
  check_requirements.py [REQUIREMENTS.md] [GTEST_BINARY ...] [--min-rows N] [--no-test-check]
  check_requirements.py --self-test

Every markdown table whose header has an "ID" and a "Tests" column is a requirements table
(it also needs "Side", "Level" and "Rule"). For every row the checker verifies that:
  - the ID is well formed (BAL-<DRV|DEV|ALL>-<AREA>-<NN>) and unique in the file;
  - Side is driver/device/both and agrees with the ID (DRV/DEV/ALL); ALL rows are INFO;
  - Level is one of MUST, MUST NOT, SHOULD, SHOULD NOT, MAY, INFO;
  - the Rule is not empty;
  - Tests is "not yet", "n/a", or a comma-separated list of Suite.Test names. Each name must
    be listed by at least one of the GoogleTest binaries given (run with --gtest_list_tests).
    A name Suite.Test also matches a parametrized or typed instance: a suite listed as
    Prefix/Suite, Suite/N or Prefix/Suite/N, and a test listed as Test/N.
It prints a summary and exits 1 on any error (2 on a usage error).
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ID_RE = re.compile(r"^BAL-(DRV|DEV|ALL)-([A-Z]+)-(\d{2})$")
AREAS = {"VQ", "FEAT", "CFG", "INIT", "OP", "STATS", "FPH", "POISON", "FPR", "LEG"}
SIDE_OF_ID = {"DRV": "driver", "DEV": "device", "ALL": "both"}
LEVELS = ["MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY", "INFO"]
NOT_YET = "not yet"
NOT_APPLICABLE = "n/a"
TEST_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
REQUIRED_COLUMNS = ["ID", "Side", "Level", "Rule", "Tests"]


class Row:
    def __init__(self, line, cells):
        self.line = line
        self.id = cells["ID"]
        self.side = cells["Side"]
        self.level = cells["Level"]
        self.rule = cells["Rule"]
        self.tests_text = cells["Tests"]
        self.tests = []


def split_cells(line):
    """Split a markdown table line into stripped cells; honours \\| escapes."""
    text = line.strip()
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    cells, current, i = [], [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text) and text[i + 1] == "|":
            current.append("|")
            i += 2
            continue
        if text[i] == "|":
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(text[i])
        i += 1
    cells.append("".join(current).strip())
    return cells


def is_separator(cells):
    return all(re.fullmatch(r":?-{3,}:?", c) for c in cells)


def parse_tables(path):
    """Return (rows, errors, number of requirements tables)."""
    errors, rows = [], []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return [], ["%s: cannot read: %s" % (path, e.strerror)], 0

    tables = 0
    in_fence = False
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("```"):
            in_fence = not in_fence
            i += 1
            continue
        if in_fence or not line.lstrip().startswith("|"):
            i += 1
            continue
        # A table: header, separator, body until the first non-table line.
        start = i
        block = []
        while i < len(lines) and lines[i].lstrip().startswith("|"):
            block.append((i + 1, lines[i]))
            i += 1
        header = split_cells(block[0][1])
        if "ID" not in header or "Tests" not in header:
            continue  # some other table (column legend, notes)
        tables += 1
        where = "%s:%d" % (path, start + 1)
        missing = [c for c in REQUIRED_COLUMNS if c not in header]
        if missing:
            errors.append("%s: requirements table lacks column(s) %s" % (where, ", ".join(missing)))
            continue
        if len(header) != len(set(header)):
            errors.append("%s: duplicate column names in header %s" % (where, header))
            continue
        if len(block) < 2 or not is_separator(split_cells(block[1][1])):
            errors.append("%s: header is not followed by a |---| separator row" % where)
            continue
        if len(split_cells(block[1][1])) != len(header):
            errors.append("%s: separator has %d cells, header has %d"
                          % (where, len(split_cells(block[1][1])), len(header)))
            continue
        if len(block) == 2:
            errors.append("%s: requirements table has no rows" % where)
        for lineno, text in block[2:]:
            cells = split_cells(text)
            if len(cells) != len(header):
                errors.append("%s:%d: row has %d cells, header has %d"
                              % (path, lineno, len(cells), len(header)))
                continue
            rows.append(Row(lineno, dict(zip(header, cells))))
    if in_fence:
        errors.append("%s: unterminated ``` fence" % path)
    return rows, errors, tables


def check_rows(path, rows):
    errors = []
    seen = {}
    for r in rows:
        where = "%s:%d: %s" % (path, r.line, r.id or "(empty ID)")
        m = ID_RE.match(r.id)
        if not m:
            errors.append("%s: malformed ID (want BAL-<DRV|DEV|ALL>-<AREA>-<NN>)" % where)
        else:
            side_token, area, _ = m.groups()
            if area not in AREAS:
                errors.append("%s: unknown area %r (known: %s)"
                              % (where, area, ", ".join(sorted(AREAS))))
            if r.side != SIDE_OF_ID[side_token]:
                errors.append("%s: side %r does not match ID (%s means %r)"
                              % (where, r.side, side_token, SIDE_OF_ID[side_token]))
            if side_token == "ALL" and r.level != "INFO":
                errors.append("%s: ALL rows must be INFO, not %r" % (where, r.level))
        if r.id in seen:
            errors.append("%s: duplicate ID (first at line %d)" % (where, seen[r.id]))
        else:
            seen[r.id] = r.line
        if r.side not in SIDE_OF_ID.values():
            errors.append("%s: invalid side %r (driver, device or both)" % (where, r.side))
        if r.level not in LEVELS:
            errors.append("%s: invalid level %r (one of %s)" % (where, r.level, ", ".join(LEVELS)))
        if not r.rule:
            errors.append("%s: empty rule" % where)

        text = r.tests_text.replace("`", "").strip()
        if text in (NOT_YET, NOT_APPLICABLE):
            continue
        if not text:
            errors.append("%s: empty Tests cell (write 'not yet')" % where)
            continue
        for name in (t.strip() for t in text.split(",")):
            if name in (NOT_YET, NOT_APPLICABLE):
                errors.append("%s: %r mixed with test names" % (where, name))
            elif not TEST_NAME_RE.match(name):
                errors.append("%s: malformed test name %r (want Suite.Test)" % (where, name))
            else:
                r.tests.append(name)
    return errors


def list_gtests(binary):
    """Return ([(suite, test)], error or None) from `binary --gtest_list_tests`."""
    try:
        proc = subprocess.run([binary, "--gtest_list_tests"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as e:
        return [], "%s: cannot run --gtest_list_tests: %s" % (binary, e)
    if proc.returncode != 0:
        return [], "%s: --gtest_list_tests exited with %d: %s" % (
            binary, proc.returncode, proc.stderr.strip()[:500])
    tests, suite = [], None
    for line in proc.stdout.splitlines():
        if not line.strip():
            continue
        body = line.split("#", 1)[0].rstrip()  # drop "# GetParam() = ..." comments
        if not line.startswith(" "):
            suite = body.strip()
            if suite.endswith("."):
                suite = suite[:-1]
            else:
                suite = None  # not a suite line (stray output)
        elif suite is not None and body.strip():
            tests.append((suite, body.strip()))
    if not tests:
        return [], "%s: --gtest_list_tests listed no tests" % binary
    return tests, None


def test_listed(name, listed):
    suite, test = name.split(".", 1)
    suite_re = re.compile(r"(?:.+/)?%s(?:/\d+)?" % re.escape(suite))
    for s, t in listed:
        if (t == test or t.startswith(test + "/")) and suite_re.fullmatch(s):
            return True
    return False


def run(argv):
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("requirements", nargs="?", default=os.path.join(here, "requirements.md"),
                    help="requirements markdown (default: requirements.md next to this script)")
    ap.add_argument("binaries", nargs="*", help="GoogleTest binaries to list tests from")
    ap.add_argument("--min-rows", type=int, default=0, metavar="N",
                    help="fail if the file has fewer than N requirement rows (all levels)")
    ap.add_argument("--no-test-check", action="store_true",
                    help="check the tables only; do not require binaries for named tests")
    ap.add_argument("--self-test", action="store_true", help="run the built-in self test")
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()

    path = args.requirements
    rows, errors, tables = parse_tables(path)
    if tables == 0 and not errors:
        errors.append("%s: no requirements table found (header needs ID and Tests)" % path)
    errors += check_rows(path, rows)
    if args.min_rows and len(rows) < args.min_rows:
        errors.append("%s: %d requirement rows, fewer than --min-rows %d"
                      % (path, len(rows), args.min_rows))

    named = sorted({t for r in rows for t in r.tests})
    if named and not args.no_test_check:
        if not args.binaries:
            errors.append("%d test name(s) listed but no gtest binary given "
                          "(pass the binaries, or --no-test-check)" % len(named))
        else:
            listed = []
            for b in args.binaries:
                tests, err = list_gtests(b)
                if err:
                    errors.append(err)
                listed += tests
            if listed:
                for r in rows:
                    for t in r.tests:
                        if not test_listed(t, listed):
                            errors.append("%s:%d: %s: test %s not found in %s"
                                          % (path, r.line, r.id, t, ", ".join(args.binaries)))

    # Summary.
    with_tests = sum(1 for r in rows if r.tests)
    not_yet = sum(1 for r in rows if r.tests_text.replace("`", "").strip() == NOT_YET)
    na = sum(1 for r in rows if r.tests_text.replace("`", "").strip() == NOT_APPLICABLE)
    normative = [r for r in rows if r.level != "INFO"]
    print("%s: %d tables, %d rows (%d normative, %d INFO)"
          % (path, tables, len(rows), len(normative), len(rows) - len(normative)))
    print("  tests: %d rows with tests (%d distinct names), %d 'not yet', %d 'n/a'"
          % (with_tests, len(named), not_yet, na))
    print("  normative rows with tests: %d of %d"
          % (sum(1 for r in normative if r.tests), len(normative)))
    print("  %-11s %7s %7s %7s %7s" % ("level", "driver", "device", "both", "total"))
    for level in LEVELS:
        counts = [sum(1 for r in rows if r.level == level and r.side == s)
                  for s in ("driver", "device", "both")]
        if sum(counts):
            print("  %-11s %7d %7d %7d %7d" % (level, counts[0], counts[1], counts[2], sum(counts)))
    if errors:
        for e in errors:
            print("error: " + e, file=sys.stderr)
        print("FAILED: %d error(s)" % len(errors), file=sys.stderr)
        return 1
    print("OK")
    return 0


# ---- self test -------------------------------------------------------------------------

GOOD_TABLE = """# t
| ID | Side | Level | Rule | Tests |
|---|---|---|---|---|
| BAL-DRV-OP-01 | driver | MUST | a rule | not yet |
| BAL-DEV-OP-01 | device | MAY | a rule | `Plain.Works`, Param.Case |
| BAL-ALL-CFG-01 | both | INFO | a fact | Typed.Case, n/a_ignored_no |
"""

FAKE_GTEST = """#!/bin/sh
cat <<'EOF'
Plain.
  Works
  Other
Inst/Param.
  Case/0  # GetParam() = 1
  Case/1  # GetParam() = 2
Typed/0.  # TypeParam = int
  Case
EOF
"""


def self_test():
    failures = []

    def expect(name, text, want_rc, extra=(), want_msg=None, binary=None):
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "req.md")
            with open(md, "w", encoding="utf-8") as f:
                f.write(text)
            argv = [md] + ([binary] if binary else []) + list(extra)
            import io
            import contextlib
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                rc = run(argv)
            if rc != want_rc or (want_msg and want_msg not in err.getvalue()):
                failures.append("%s: rc=%d (want %d), stderr=%r"
                                % (name, rc, want_rc, err.getvalue()[-400:]))

    with tempfile.TemporaryDirectory() as bindir:
        fake = os.path.join(bindir, "fake_gtest")
        with open(fake, "w") as f:
            f.write(FAKE_GTEST)
        os.chmod(fake, 0o755)
        good = GOOD_TABLE.replace(", n/a_ignored_no", "")
        expect("good file with binary", good, 0, binary=fake)
        expect("good file, min-rows ok", good, 0, extra=["--min-rows", "3"], binary=fake)
        expect("min-rows too high", good, 1, extra=["--min-rows", "4"], binary=fake,
               want_msg="fewer than --min-rows")
        expect("tests named, no binary", good, 1, want_msg="no gtest binary")
        expect("tests named, --no-test-check", good, 0, extra=["--no-test-check"])
        expect("unknown test", good.replace("Param.Case", "Param.Nope"), 1, binary=fake,
               want_msg="Param.Nope not found")
        expect("suite prefix must be whole", good.replace("Param.Case", "aram.Case"), 1,
               binary=fake, want_msg="not found")
        expect("bad test name", GOOD_TABLE, 1, binary=fake, want_msg="malformed test name")
        expect("duplicate id", good.replace("BAL-DEV-OP-01", "BAL-DRV-OP-01")
               .replace("| device |", "| driver |"), 1, extra=["--no-test-check"],
               want_msg="duplicate ID")
        expect("malformed id", good.replace("BAL-DRV-OP-01", "BAL-DRV-OP-1"), 1,
               extra=["--no-test-check"], want_msg="malformed ID")
        expect("unknown area", good.replace("BAL-DRV-OP-01", "BAL-DRV-XYZ-01"), 1,
               extra=["--no-test-check"], want_msg="unknown area")
        expect("side mismatch", good.replace("| driver | MUST", "| device | MUST"), 1,
               extra=["--no-test-check"], want_msg="does not match ID")
        expect("bad level", good.replace("| MUST |", "| MUSTN'T |"), 1,
               extra=["--no-test-check"], want_msg="invalid level")
        expect("ALL not INFO", good.replace("| both | INFO |", "| both | MAY |"), 1,
               extra=["--no-test-check"], want_msg="ALL rows must be INFO")
        expect("missing cell", good.replace("| a rule | not yet |", "| not yet |"), 1,
               extra=["--no-test-check"], want_msg="row has 4 cells")
        expect("no separator", good.replace("|---|---|---|---|---|\n", ""), 1,
               extra=["--no-test-check"], want_msg="separator")
        expect("missing column", good.replace("| Level |", "| Lvl |"), 1,
               extra=["--no-test-check"], want_msg="lacks column")
        expect("empty tests cell", good.replace("| not yet |", "|  |"), 1,
               extra=["--no-test-check"], want_msg="empty Tests cell")
        expect("no tables at all", "# nothing here\n", 1, want_msg="no requirements table")
        expect("table in fence ignored", "```\n" + good + "```\n", 1,
               want_msg="no requirements table")
        expect("broken binary", good, 1, binary=os.path.join(bindir, "missing"),
               want_msg="cannot run")

    if failures:
        for f in failures:
            print("self-test FAILED: " + f, file=sys.stderr)
        return 1
    print("self-test OK")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
