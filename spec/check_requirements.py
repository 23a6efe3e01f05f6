#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""Check spec/requirements.md: IDs, sides, levels and the tests each row names.

Usage:
  check_requirements.py [REQUIREMENTS.md] [GTEST_BINARY ...] [--min-rows N] [--no-test-check]
                        [--root DIR]
  check_requirements.py [REQUIREMENTS.md] ... --mutants MUTANTS.tsv
  check_requirements.py [REQUIREMENTS.md] --summary
  check_requirements.py --self-test

Every markdown table whose header has an "ID" and a "Tests" column is a requirements table
(it also needs "Side", "Level" and "Rule"). For every row the checker verifies that:
  - the ID is well formed (BAL-<DRV|DEV|ALL>-<AREA>-<NN>) and unique in the file;
  - Side is driver/device/both and agrees with the ID (DRV/DEV/ALL); ALL rows are INFO;
  - Level is one of MUST, MUST NOT, SHOULD, SHOULD NOT, MAY, INFO;
  - the Rule is not empty;
  - Tests is "not yet", "n/a", or a comma-separated list of test names:
    - GoogleTest names Suite.Test. Each must be listed by at least one of the GoogleTest
      binaries given (run with --gtest_list_tests). A name Suite.Test also matches a
      parametrized or typed instance: a suite listed as Prefix/Suite, Suite/N or
      Prefix/Suite/N, and a test listed as Test/N.
    - pytest node ids path/to/test_file.py::test_name, the path relative to the repository
      root (--root, default: the parent of this script's folder). The file must exist and
      define the test at top level (`def test_name(` or `async def test_name(` at the start of
      a line); a parametrized test is named without its [params].
  - a coverage summary, when the file has one between the markers
    <!-- coverage-summary:begin --> and <!-- coverage-summary:end -->, matches what
    --summary prints for the tables (so the pasted counts cannot go stale).
With --mutants (spec/mutants.tsv, the deliberate breakages ci/mutants.sh runs) it also checks
that every mutant is well formed, unique and names a row with GoogleTest tests; that its
VB_MUTANT(NAME) hook exists in the sources (driver/ and device-sim/ under --root) and every
hook there is in the map; and that every MUST and MUST NOT row with tests either has a mutant
or is explained as partial (a "- **ID**" bullet under a "Partial coverage" heading).
It prints a summary and exits 1 on any error (2 on a usage error). --summary prints the
coverage summary (markdown) to paste between the markers, and checks nothing else.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ID_RE = re.compile(r"^BAL-(DRV|DEV|ALL)-([A-Z]+)-(\d{2})$")
AREAS = {"VQ", "FEAT", "CFG", "INIT", "OP", "STATS", "FPH", "POISON", "FPR", "LEG"}
AREAS.add("XCH")  # spec/proposals/vb-f-x-chunked.md
AREAS.add("PRS")  # spec/proposals/vb-f-x-pressure.md
SIDE_OF_ID = {"DRV": "driver", "DEV": "device", "ALL": "both"}
LEVELS = ["MUST", "MUST NOT", "SHOULD", "SHOULD NOT", "MAY", "INFO"]
NOT_YET = "not yet"
NOT_APPLICABLE = "n/a"
TEST_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\.[A-Za-z_][A-Za-z0-9_]*$")
# A pytest node id: a relative .py path (no "..", no leading "/") and a top-level test function.
PYTEST_ID_RE = re.compile(r"^(?!/)(?!.*(?:^|/)\.\.(?:/|$))"
                          r"([A-Za-z0-9_.\-/]+\.py)::(test[A-Za-z0-9_]*)$")
SUMMARY_BEGIN = "<!-- coverage-summary:begin -->"
SUMMARY_END = "<!-- coverage-summary:end -->"
SIDES = ("driver", "device", "both")
REQUIRED_COLUMNS = ["ID", "Side", "Level", "Rule", "Tests"]
MUTANT_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
HOOK_RE = re.compile(r"\bVB_MUTANT\(\s*([A-Za-z0-9_]+)\s*\)")
HOOK_DIRS = ("driver", "device-sim")
HOOK_EXTENSIONS = (".h", ".c", ".cpp")
HOOK_DEFINITION = "mutant.h"  # defines the macro; not a hook
ROW_ID_RE = re.compile(r"BAL-(?:DRV|DEV|ALL)-[A-Z]+-\d{2}")
MUTATED_LEVELS = ("MUST", "MUST NOT")
# The DEVICE_INIT proposals (issues 242, 244): their own section of requirements.md.
AREAS |= {"DIINF", "DIREP", "DI"}
# vballoon's own policy, the pressure governor (issue 30): its own section of requirements.md.
AREAS.add("PRS")


class Row:
    def __init__(self, line, cells):
        self.line = line
        self.id = cells["ID"]
        self.side = cells["Side"]
        self.level = cells["Level"]
        self.rule = cells["Rule"]
        self.tests_text = cells["Tests"]
        self.tests = []    # GoogleTest names
        self.pytests = []  # pytest node ids


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
            elif "::" in name:
                if PYTEST_ID_RE.match(name):
                    r.pytests.append(name)
                else:
                    errors.append("%s: malformed pytest node id %r "
                                  "(want path/test_file.py::test_name)" % (where, name))
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


def pytest_defined(root, node_id, files):
    """None when the node id's file defines the test at top level, else what is wrong.
    `files` caches (text, error) per path."""
    path, name = PYTEST_ID_RE.match(node_id).groups()
    if path not in files:
        try:
            with open(os.path.join(root, path), encoding="utf-8") as f:
                files[path] = (f.read(), None)
        except OSError as e:
            files[path] = (None, e.strerror)
    text, error = files[path]
    if text is None:
        return "cannot read %s: %s" % (os.path.join(root, path), error)
    if not re.search(r"^(?:async\s+)?def\s+%s\s*\(" % re.escape(name), text, re.MULTILINE):
        return "no top-level 'def %s(' in %s" % (name, path)
    return None


def tests_state(r):
    text = r.tests_text.replace("`", "").strip()
    if r.tests or r.pytests:
        return "tested"
    return text if text in (NOT_YET, NOT_APPLICABLE) else None


def coverage_summary(rows):
    """The coverage table (markdown) that ends requirements.md, between the markers."""
    lines = ["| Level | driver | device | both (wire facts) |", "|---|---|---|---|"]

    def cell(selected):
        counts = [sum(1 for r in selected if tests_state(r) == state)
                  for state in ("tested", NOT_YET, NOT_APPLICABLE)]
        if not selected:
            return "-"
        text = "%d tested, %d not yet" % (counts[0], counts[1])
        return text + (", %d n/a" % counts[2] if counts[2] else "")

    for level in LEVELS:
        if any(r.level == level for r in rows):
            lines.append("| %s | %s |" % (level, " | ".join(
                cell([r for r in rows if r.level == level and r.side == side]) for side in SIDES)))
    lines.append("| all | %s |" % " | ".join(cell([r for r in rows if r.side == side])
                                            for side in SIDES))
    binding = [r for r in rows if r.level in ("MUST", "MUST NOT", "SHOULD")]

    def tested_of(selected):
        return "%d of %d" % (sum(1 for r in selected if tests_state(r) == "tested"), len(selected))

    lines.append("")
    lines.append("MUST, MUST NOT and SHOULD rows with tests: %s (driver %s, device %s)."
                 % (tested_of(binding), tested_of([r for r in binding if r.side == "driver"]),
                    tested_of([r for r in binding if r.side == "device"])))
    return "\n".join(lines)


class Mutant:
    def __init__(self, line, name, row, breaks):
        self.line = line
        self.name = name
        self.row = row
        self.breaks = breaks


def parse_mutant_map(path):
    """Return ([Mutant], errors) from a tab-separated map: name, row ID, what it breaks.
    A name may appear on several rows (one breakage, several rules), once per row."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return [], ["%s: cannot read: %s" % (path, e.strerror)]
    mutants, errors, seen = [], [], {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = [c.strip() for c in line.split("\t")]
        where = "%s:%d" % (path, lineno)
        if len(cells) != 3 or not all(cells):
            errors.append("%s: want three tab-separated cells (mutant, row, what it breaks)"
                          % where)
            continue
        name, row, breaks = cells
        if not MUTANT_NAME_RE.match(name):
            errors.append("%s: malformed mutant name %r (want UPPER_CASE)" % (where, name))
        if not ID_RE.match(row):
            errors.append("%s: %s: malformed row ID %r" % (where, name, row))
        # One breakage may break two rules at once: the same name on another row is fine.
        if (name, row) in seen:
            errors.append("%s: duplicate mutant %s for %s (first at line %d)"
                          % (where, name, row, seen[(name, row)]))
            continue
        seen[(name, row)] = lineno
        mutants.append(Mutant(lineno, name, row, breaks))
    return mutants, errors


def partial_rows(path):
    """IDs in the "- **ID**" bullets under a "Partial coverage" heading."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    ids, inside = set(), False
    for line in lines:
        heading = re.match(r"^#+\s+(.*?)\s*$", line)
        if heading:
            inside = heading.group(1).lower() == "partial coverage"
            continue
        bold = re.match(r"^\s*[-*]\s+\*\*([^*]+)\*\*", line)
        if inside and bold:
            ids.update(ROW_ID_RE.findall(bold.group(1)))
    return ids


def mutant_hooks(root):
    """{name: ["file:line", ...]} for every VB_MUTANT(name) in the sources under root."""
    hooks = {}
    for folder in HOOK_DIRS:
        for base, dirs, files in os.walk(os.path.join(root, folder)):
            dirs.sort()
            for name in sorted(files):
                if not name.endswith(HOOK_EXTENSIONS) or name == HOOK_DEFINITION:
                    continue
                path = os.path.join(base, name)
                try:
                    with open(path, encoding="utf-8", errors="replace") as f:
                        text = f.read()
                except OSError:
                    continue
                for m in HOOK_RE.finditer(text):
                    where = "%s:%d" % (os.path.relpath(path, root),
                                       text.count("\n", 0, m.start()) + 1)
                    hooks.setdefault(m.group(1), []).append(where)
    return hooks


def check_compare_mutants(map_path, hooks):
    """([names], errors) of the compare mutant list (spec/compare_mutants.tsv: name, what it
    breaks): every name well formed, unique and with its hook in the sources."""
    try:
        with open(map_path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        return [], ["%s: cannot read: %s" % (map_path, e.strerror)]
    names, errors = [], []
    for lineno, line in enumerate(lines, 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        cells = line.split("\t")
        where = "%s:%d" % (map_path, lineno)
        if len(cells) not in (2, 3) or not all(c.strip() for c in cells):
            errors.append("%s: want two or three tab-separated cells (mutant, what it breaks, "
                          "why compare misses it)" % where)
            continue
        name = cells[0].strip()
        if not MUTANT_NAME_RE.match(name):
            errors.append("%s: malformed mutant name %r" % (where, name))
        elif name in names:
            errors.append("%s: duplicate mutant %s" % (where, name))
        elif name not in hooks:
            errors.append("%s: no VB_MUTANT(%s) hook in %s" % (where, name, "/, ".join(HOOK_DIRS) + "/"))
        names.append(name)
    return names, errors


def check_mutants(path, rows, map_path, mutants, partial, hooks, also_known=()):
    """Errors tying the mutant map to the rows, the sources and the partial list. Hooks
    named in also_known (the compare mutant list) need no row."""
    errors = []
    by_id = {r.id: r for r in rows}
    mutated = set()
    for m in mutants:
        where = "%s:%d: %s" % (map_path, m.line, m.name)
        row = by_id.get(m.row)
        if row is None:
            errors.append("%s: row %s is not in %s" % (where, m.row, path))
        elif not row.tests:
            errors.append("%s: row %s names no GoogleTest test for the mutant to run"
                          % (where, m.row))
        else:
            mutated.add(m.row)
        if m.name not in hooks:
            errors.append("%s: no VB_MUTANT(%s) hook in %s" % (where, m.name, "/, ".join(HOOK_DIRS) + "/"))
    known = {m.name for m in mutants} | set(also_known)
    for name, places in sorted(hooks.items()):
        if name not in known:
            errors.append("%s: VB_MUTANT(%s) is not in %s" % (places[0], name, map_path))
    for pid in sorted(partial):
        if pid not in by_id:
            errors.append("%s: \"Partial coverage\" names %s, which is no row" % (path, pid))
    for r in rows:
        if r.level in MUTATED_LEVELS and (r.tests or r.pytests) and r.id not in mutated \
                and r.id not in partial:
            errors.append("%s:%d: %s: a %s row with tests needs a mutant in %s or a line under "
                          "\"Partial coverage\"" % (path, r.line, r.id, r.level, map_path))
    return errors


def check_summary(path, rows):
    """Errors when the pasted coverage summary differs from the generated one."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError:
        return []  # parse_tables reported it
    begin, end = text.find(SUMMARY_BEGIN), text.find(SUMMARY_END)
    if begin < 0 and end < 0:
        return []
    if begin < 0 or end < begin:
        return ["%s: coverage summary markers are missing or out of order" % path]
    pasted = text[begin + len(SUMMARY_BEGIN):end].strip()
    if pasted != coverage_summary(rows).strip():
        return ["%s: the coverage summary is stale: paste the output of --summary between the "
                "markers" % path]
    return []


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
    ap.add_argument("--root", metavar="DIR", default=os.path.dirname(here),
                    help="repository root that pytest node ids are relative to "
                         "(default: the parent of this script's folder)")
    ap.add_argument("--mutants", metavar="TSV",
                    help="cross-check the mutant map (spec/mutants.tsv) with the rows, the "
                         "VB_MUTANT() hooks under --root and the partial-coverage list")
    ap.add_argument("--compare-mutants", metavar="TSV",
                    help="with --mutants: the migration model's mutants that `vballoon-sim "
                         "compare` must catch (spec/compare_mutants.tsv); their hooks need no row")
    ap.add_argument("--summary", action="store_true",
                    help="print the coverage summary to paste at the end of the file, and exit")
    ap.add_argument("--self-test", action="store_true", help="run the built-in self test")
    # Intermixed: ci/test.sh puts --min-rows between the file and the binaries.
    args = ap.parse_intermixed_args(argv)
    if args.self_test:
        return self_test()

    path = args.requirements
    rows, errors, tables = parse_tables(path)
    if tables == 0 and not errors:
        errors.append("%s: no requirements table found (header needs ID and Tests)" % path)
    errors += check_rows(path, rows)
    if args.summary:
        for e in errors:
            print("error: " + e, file=sys.stderr)
        if errors:
            return 1
        print(coverage_summary(rows))
        return 0
    errors += check_summary(path, rows)
    if args.min_rows and len(rows) < args.min_rows:
        errors.append("%s: %d requirement rows, fewer than --min-rows %d"
                      % (path, len(rows), args.min_rows))

    mutants = []
    if args.mutants:
        mutants, map_errors = parse_mutant_map(args.mutants)
        errors += map_errors
        compare_names = []
        if args.compare_mutants:
            compare_names, compare_errors = check_compare_mutants(args.compare_mutants,
                                                                  mutant_hooks(args.root))
            errors += compare_errors
        if not map_errors:
            errors += check_mutants(path, rows, args.mutants, mutants, partial_rows(path),
                                    mutant_hooks(args.root), compare_names)

    named = sorted({t for r in rows for t in r.tests})
    pytest_named = sorted({t for r in rows for t in r.pytests})
    if pytest_named and not args.no_test_check:
        files = {}
        for r in rows:
            for t in r.pytests:
                problem = pytest_defined(args.root, t, files)
                if problem:
                    errors.append("%s:%d: %s: test %s not found: %s"
                                  % (path, r.line, r.id, t, problem))
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
    with_tests = sum(1 for r in rows if r.tests or r.pytests)
    not_yet = sum(1 for r in rows if r.tests_text.replace("`", "").strip() == NOT_YET)
    na = sum(1 for r in rows if r.tests_text.replace("`", "").strip() == NOT_APPLICABLE)
    normative = [r for r in rows if r.level != "INFO"]
    print("%s: %d tables, %d rows (%d normative, %d INFO)"
          % (path, tables, len(rows), len(normative), len(rows) - len(normative)))
    print("  tests: %d rows with tests (%d distinct GoogleTest names, %d pytest node ids), "
          "%d 'not yet', %d 'n/a'" % (with_tests, len(named), len(pytest_named), not_yet, na))
    print("  normative rows with tests: %d of %d"
          % (sum(1 for r in normative if r.tests or r.pytests), len(normative)))
    if args.mutants:
        gated = [r for r in rows if r.level in MUTATED_LEVELS and (r.tests or r.pytests)]
        with_mutant = {m.row for m in mutants}
        print("  mutants: %d, on %d rows; MUST/MUST NOT rows with tests: %d (%d with a mutant, "
              "%d without)" % (len(mutants), len(with_mutant), len(gated),
                                    sum(1 for r in gated if r.id in with_mutant),
                                    sum(1 for r in gated if r.id not in with_mutant)))
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

PYTEST_TABLE = """# t
| ID | Side | Level | Rule | Tests |
|---|---|---|---|---|
| BAL-DRV-OP-01 | driver | MUST | a rule | tests/guest/test_x.py::test_ok, \
tests/guest/test_x.py::test_async |
| BAL-DEV-OP-01 | device | MAY | a rule | not yet |
"""

MUTANT_TABLE = """# t
| ID | Side | Level | Rule | Tests |
|---|---|---|---|---|
| BAL-DRV-OP-01 | driver | MUST | a rule | Plain.Works |
| BAL-DEV-OP-01 | device | MAY | a rule | tests/guest/test_x.py::test_ok |
| BAL-DEV-OP-02 | device | SHOULD | a rule | Plain.Other |
"""

FAKE_PYTEST_FILE = """import pytest


def helper():
    pass


def test_ok(vm, driver):
    pass


async def test_async():
    pass


class TestGroup:
    def test_method(self):
        pass
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

    import contextlib
    import io

    def expect(name, text, want_rc, extra=(), want_msg=None, binary=None, want_out=None,
               options_first=False):
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "req.md")
            with open(md, "w", encoding="utf-8") as f:
                f.write(text)
            binaries = [binary] if binary else []
            argv = [md] + (list(extra) + binaries if options_first else binaries + list(extra))
            out, err = io.StringIO(), io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                try:
                    rc = run(argv)
                except SystemExit as e:  # argparse refused the command line
                    rc = e.code
            if (rc != want_rc or (want_msg and want_msg not in err.getvalue())
                    or (want_out and want_out not in out.getvalue())):
                failures.append("%s: rc=%d (want %d), stdout=%r, stderr=%r"
                                % (name, rc, want_rc, out.getvalue()[-300:],
                                   err.getvalue()[-400:]))

    def summary_of(text):
        with tempfile.TemporaryDirectory() as d:
            md = os.path.join(d, "req.md")
            with open(md, "w", encoding="utf-8") as f:
                f.write(text)
            rows, _, _ = parse_tables(md)
            check_rows(md, rows)
            return coverage_summary(rows)

    with tempfile.TemporaryDirectory() as bindir:
        fake = os.path.join(bindir, "fake_gtest")
        with open(fake, "w") as f:
            f.write(FAKE_GTEST)
        os.chmod(fake, 0o755)
        good = GOOD_TABLE.replace(", n/a_ignored_no", "")
        expect("good file with binary", good, 0, binary=fake)
        expect("good file, min-rows ok", good, 0, extra=["--min-rows", "3"], binary=fake)
        expect("options between the file and the binaries (as ci/test.sh)", good, 0,
               extra=["--min-rows", "3"], binary=fake, options_first=True)
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

        # pytest node ids, checked against the files under --root.
        root = os.path.join(bindir, "repo")
        os.makedirs(os.path.join(root, "tests", "guest"))
        with open(os.path.join(root, "tests", "guest", "test_x.py"), "w") as f:
            f.write(FAKE_PYTEST_FILE)
        at_root = ["--root", root]
        expect("pytest ids need no gtest binary", PYTEST_TABLE, 0, extra=at_root)
        expect("pytest ids next to gtest names",
               PYTEST_TABLE.replace("| not yet |",
                                    "| Plain.Works, tests/guest/test_x.py::test_ok |"),
               0, extra=at_root, binary=fake)
        expect("pytest id without its def", PYTEST_TABLE.replace("::test_async", "::test_gone"), 1,
               extra=at_root, want_msg="no top-level 'def test_gone('")
        expect("pytest method is not a top-level id",
               PYTEST_TABLE.replace("::test_async", "::test_method"), 1, extra=at_root,
               want_msg="no top-level 'def test_method('")
        expect("pytest file missing",
               PYTEST_TABLE.replace("test_x.py::test_ok", "test_y.py::test_ok"), 1,
               extra=at_root, want_msg="cannot read")
        expect("pytest id must name a test", PYTEST_TABLE.replace("::test_ok", "::helper"), 1,
               extra=at_root, want_msg="malformed pytest node id")
        expect("pytest id must stay under the root",
               PYTEST_TABLE.replace("tests/guest/test_x.py::test_ok",
                                    "../repo/tests/guest/test_x.py::test_ok"),
               1, extra=at_root, want_msg="malformed pytest node id")
        expect("pytest id with params",
               PYTEST_TABLE.replace("::test_ok", "::test_ok[vballoon]"), 1, extra=at_root,
               want_msg="malformed pytest node id")
        expect("pytest ids, --no-test-check",
               PYTEST_TABLE.replace("::test_async", "::test_gone"), 0,
               extra=at_root + ["--no-test-check"])

        # The mutant map: hooks in the sources under --root, rows, partial coverage.
        mroot = os.path.join(bindir, "mutated")
        os.makedirs(os.path.join(mroot, "driver"))
        os.makedirs(os.path.join(mroot, "device-sim"))
        with open(os.path.join(mroot, "driver", "core.h"), "w") as f:
            f.write("if (VB_MUTANT(ONE_BROKEN))\n\treturn;\n")
        with open(os.path.join(mroot, "driver", "mutant.h"), "w") as f:
            f.write("#define VB_MUTANT(id) false\n")  # the definition is no hook
        tsv = os.path.join(bindir, "mutants.tsv")

        def with_map(map_text, hooks_extra=""):
            with open(tsv, "w") as f:
                f.write("# comment\n" + map_text)
            with open(os.path.join(mroot, "device-sim", "dev.cpp"), "w") as f:
                f.write(hooks_extra)
            return ["--mutants", tsv, "--root", mroot, "--no-test-check"]

        mutated = MUTANT_TABLE
        expect("mutant map ok", mutated, 0,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tbreaks it\n"),
               want_out="mutants: 1, on 1 rows")
        elsewhere = "ONE_BROKEN\tBAL-DEV-OP-02\tx\n"  # a SHOULD row: OP-01 has no mutant
        expect("MUST row with tests and no mutant", mutated, 1, extra=with_map(elsewhere),
               want_msg="BAL-DRV-OP-01: a MUST row with tests needs a mutant")
        expect("guest-only MUST NOT row needs a partial line",
               mutated.replace("| MAY |", "| MUST NOT |"), 1,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tx\n"),
               want_msg="BAL-DEV-OP-01: a MUST NOT row with tests needs a mutant")
        expect("partial row needs no mutant",
               mutated + "\n### Partial coverage\n\n- **BAL-DRV-OP-01**: why.\n", 0,
               extra=with_map(elsewhere))
        expect("partial list names no row",
               mutated + "\n## Partial coverage\n\n- **BAL-DRV-OP-01, BAL-DRV-OP-07**: x\n",
               1, extra=with_map(elsewhere), want_msg="names BAL-DRV-OP-07, which is no row")
        expect("bullets elsewhere do not count",
               mutated + "\n### Other\n\n- **BAL-DRV-OP-01**: why.\n", 1,
               extra=with_map(elsewhere), want_msg="needs a mutant")
        expect("mutant without its hook", mutated, 1,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tx\nTWO\tBAL-DRV-OP-01\tx\n"),
               want_msg="no VB_MUTANT(TWO) hook")
        expect("hook not in the map", mutated, 1,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tx\n", "VB_MUTANT( STRAY )"),
               want_msg="VB_MUTANT(STRAY) is not in")
        expect("mutant of an unknown row", mutated, 1,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tx\nONE_BROKEN2\tBAL-DRV-OP-09\tx\n",
                              "VB_MUTANT(ONE_BROKEN2)"),
               want_msg="row BAL-DRV-OP-09 is not in")
        expect("mutant of a row with guest tests only", mutated, 1,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tx\nG\tBAL-DEV-OP-01\tx\n",
                              "VB_MUTANT(G)"),
               want_msg="names no GoogleTest test")
        expect("one mutant on two rows", mutated, 0,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tx\nONE_BROKEN\tBAL-DEV-OP-02\ty\n"),
               want_out="mutants: 2, on 2 rows")
        expect("duplicate mutant", mutated, 1,
               extra=with_map("ONE_BROKEN\tBAL-DRV-OP-01\tx\nONE_BROKEN\tBAL-DRV-OP-01\tx\n"),
               want_msg="duplicate mutant")
        expect("map line without three cells", mutated, 1,
               extra=with_map("ONE_BROKEN BAL-DRV-OP-01 x\n"), want_msg="three tab-separated")

        # The pasted coverage summary.
        summary = summary_of(PYTEST_TABLE)
        expect("--summary prints the table", PYTEST_TABLE, 0, extra=["--summary"],
               want_out="| MUST | 1 tested, 0 not yet | - | - |")
        current = "%s\n%s\n%s\n%s\n" % (PYTEST_TABLE, SUMMARY_BEGIN, summary, SUMMARY_END)
        expect("current summary", current, 0, extra=at_root)
        expect("stale summary", current.replace("| MAY | - | 0 tested, 1 not yet",
                                                "| MAY | - | 1 tested, 0 not yet"),
               1, extra=at_root, want_msg="coverage summary is stale")
        expect("summary marker missing", current.replace(SUMMARY_END, ""), 1, extra=at_root,
               want_msg="markers")

    if failures:
        for f in failures:
            print("self-test FAILED: " + f, file=sys.stderr)
        return 1
    print("self-test OK")
    return 0


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
