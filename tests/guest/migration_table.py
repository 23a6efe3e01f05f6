# SPDX-License-Identifier: GPL-2.0
"""The migration comparison's table (text) and JSON file."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import time

import guestvm

COLUMNS = (("driver", "driver", "{}"), ("init_on_alloc", "init_on_alloc", "{}"),
           ("mode", "mode", "{}"), ("sent MiB", "transferred_mib", "{:.1f}"),
           ("normal pages", "normal_pages", "{}"), ("zero pages", "duplicate_pages", "{}"),
           ("total ms", "total_time_ms", "{}"), ("downtime ms", "downtime_ms", "{}"),
           ("syncs", "dirty_sync_count", "{}"), ("RSS before MiB", "rss_before_mib", "{}"),
           ("vs none", "ratio_to_none", "{}"))


def _with_ratios(rows: list[dict]) -> list[dict]:
    """Each row's bytes over those of mode "none" with the same driver and init_on_alloc."""
    base = {(r["driver"], r["init_on_alloc"]): r["transferred"] for r in rows
            if r["mode"] == "none"}
    out = []
    for r in rows:
        b = base.get((r["driver"], r["init_on_alloc"]))
        out.append(dict(r, ratio_to_none=f"{r['transferred'] / b:.2f}" if b else "-"))
    return out


def format_table(rows: list[dict]) -> str:
    rows = sorted(_with_ratios(rows), key=lambda r: (r["driver"], r["init_on_alloc"],
                                                     r["mode_index"]))
    cells = [[h for h, _, _ in COLUMNS]]
    for r in rows:
        cells.append([fmt.format(r[k]) for _, k, fmt in COLUMNS])
    widths = [max(len(c[i]) for c in cells) for i in range(len(COLUMNS))]
    lines = ["  ".join(c[i].rjust(widths[i]) for i in range(len(COLUMNS))) for c in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _qemu_version() -> str:
    qemu = os.environ.get("VBALLOON_QEMU", "qemu-system-x86_64")
    try:
        return subprocess.run([qemu, "--version"], capture_output=True, text=True,
                              check=True).stdout.splitlines()[0]
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def write_json(rows: list[dict], path: str) -> None:
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    doc = {"how": {"qemu": _qemu_version(), "accel": guestvm.TCG_ACCEL, "guest_ram_mib": 2048,
                   "workload": "1 GiB of non-zero data written to tmpfs and deleted",
                   "migration": "exec:cat > /dev/null, max-bandwidth unlimited",
                   "host": platform.node(), "load_average": os.getloadavg(),
                   "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
           "rows": _with_ratios(rows)}
    with open(path, "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
