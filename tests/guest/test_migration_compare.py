# SPDX-License-Identifier: GPL-2.0
"""Real QEMU beside the simulator's migration model: what one live migration costs after the
guest wrote 1 GiB to tmpfs and deleted it, for

  mode           none, free-page-hint, free-page-reporting, both
  init_on_alloc  0 (how the rest of the suite boots) and Debian's default (on)
  driver         in-tree virtio_balloon and vballoon

as QEMU counts it (query-migrate: bytes transferred, normal and zero pages, total time,
downtime, bitmap syncs). One fresh guest per combination. With reporting, the migration
starts once QEMU's RSS stopped falling (the guest reported what it freed); every mode waits
the same way, so the modes differ only in the device. Printed as a table at the end of the
session and written as JSON ($VBALLOON_MIGRATION_JSON, default <work>/migration_compare.json).

Marked migration_compare and left out of the default run (tests/guest/pytest.ini):
`pytest tests/guest -m migration_compare`.
"""

from __future__ import annotations


import pytest

import conftest
import free_pages
from guestvm import MIB

FILL_MIB = 1024
VIRTIO_BALLOON_F_FREE_PAGE_HINT = 3
VIRTIO_BALLOON_F_PAGE_REPORTING = 5
MODES = (("none", {}),
         ("hint", {"free-page-hint": "on"}),
         ("report", {"free-page-reporting": "on"}),
         ("hint+report", {"free-page-hint": "on", "free-page-reporting": "on"}))
INIT_ON_ALLOC = (("0", True), ("default", False))
SETTLE_TIMEOUT_S = 40.0

CASES = [(mode, props, init_name, init_off) for mode, props in MODES
         for init_name, init_off in INIT_ON_ALLOC]


@pytest.mark.migration_compare
@pytest.mark.parametrize(
    "compare_vm", [(f"cmp-{m}-ioa-{i}", p, off) for m, p, i, off in CASES], indirect=True,
    ids=[f"{m}-init_on_alloc={i}" for m, _, i, _ in CASES])
def test_migration_compare(compare_vm, driver, request):
    vm = compare_vm
    kind = request.node.callspec.params["compare_vm"][0]
    mode, props, init_name, _ = next(c for c in CASES if f"cmp-{c[0]}-ioa-{c[2]}" == kind)
    # The driver serves what the device offers: the comparison measures the feature.
    features = vm.negotiated_features()
    assert bool(features >> VIRTIO_BALLOON_F_FREE_PAGE_HINT & 1) == ("free-page-hint" in props)
    assert bool(features >> VIRTIO_BALLOON_F_PAGE_REPORTING & 1) == \
        ("free-page-reporting" in props)

    free_pages.dirty_and_free(vm, FILL_MIB)
    rss = free_pages.wait_rss_settled(vm, SETTLE_TIMEOUT_S)
    r = free_pages.migrate_to_null(vm)
    conftest.MIGRATION_COMPARE_ROWS.append({
        "driver": driver.label, "init_on_alloc": init_name, "mode": mode,
        "mode_index": [m for m, _ in MODES].index(mode),
        "transferred": r.transferred, "transferred_mib": r.transferred / MIB,
        "normal_pages": r.normal_pages, "duplicate_pages": r.duplicate_pages,
        "total_time_ms": r.total_time_ms, "setup_time_ms": r.setup_time_ms,
        "downtime_ms": r.downtime_ms, "dirty_sync_count": r.dirty_sync_count,
        "rss_before_mib": rss // MIB})
