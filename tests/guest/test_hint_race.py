# SPDX-License-Identifier: GPL-2.0
"""The strict criterion for free page hinting, measured on demand (-m hint_race).

With free-page-hint=on, a migration to `exec:cat > /dev/null` at unlimited bandwidth must
send at most 1/5 of the bytes of the same migration without hints, in every run. On QEMU
7.2 that is a race no driver wins every time: QEMU applies a hint only under its
migration bitmap mutex, which the migration thread holds for up to 50 ms at a time and
takes again at once (tests/guest/README.md, "Free page hinting is a race"). So this is not
in the default run; it runs RACE_RUNS comparisons per driver and prints how often each
driver went over 1/5 and how often it lost the race entirely (QEMU sent nearly everything).

vballoon must stay within 1/5 in every run (it fails when it does not: that is the
measurement). The in-tree driver is the reference: it is marked xfail when it lost.
About 2 minutes for both drivers here (2 cores, loaded).
"""

from __future__ import annotations

import pytest

from free_pages import check_hinted_runs_were_sound, hint_report, hinted_migration_run

FILL_MIB = 1024  # as test_free_pages.py

pytestmark = pytest.mark.hint_race

RACE_RUNS = 10
STRICT_RATIO_MAX = 1 / 5
# Sent this share of the unhinted bytes or more: no hint landed before the first pass had
# sent the freed memory.
LOST_ENTIRELY_RATIO = 0.9


def test_hinted_migration_within_a_fifth_every_time(hint_vm, driver, record_property):
    runs = [hinted_migration_run(hint_vm, driver.drv, driver.label, FILL_MIB)
            for _ in range(RACE_RUNS)]
    ratios = [r.ratio for r in runs]
    over = [i for i, x in enumerate(ratios) if x > STRICT_RATIO_MAX]
    lost = [i for i, x in enumerate(ratios) if x >= LOST_ENTIRELY_RATIO]
    summary = (f"{driver.label}: over 1/5 in {len(over)} of {RACE_RUNS} runs, lost entirely "
               f"(x{LOST_ENTIRELY_RATIO} or more) in {len(lost)}; ratios "
               f"{', '.join(f'{x:.3f}' for x in ratios)}")
    report = "\n" + summary + hint_report(runs)
    print(report)
    record_property("ratios", ratios)
    record_property("baseline_bytes", [r.baseline.transferred for r in runs])
    record_property("hinted_bytes", [r.hinted.transferred for r in runs])
    record_property("over_one_fifth", len(over))
    record_property("lost_entirely", len(lost))
    check_hinted_runs_were_sound(runs)
    if over and driver.label == "in-tree" and all(runs[i].handed_blocks_over for i in over):
        pytest.xfail(f"the reference driver lost the race:{report}")
    assert not over, f"the hinted migration sent more than 1/5 of the unhinted bytes:{report}"
