# SPDX-License-Identifier: GPL-2.0
"""A workload description, the flat JSON object `vballoon-sim compare --workload-file` reads
(docs/migration-model.md, "Described workloads"), as what a real guest needs to run it: the
arguments of the guest program vbwork (`vbwork described --ram-mib N KEY=VALUE ...`) and the
guest kernel's boot arguments (init_on_free, init_on_alloc).

Why KEY=VALUE and not JSON in the guest: vbwork is a static C program with no JSON parser,
and the description is flat (numbers and flags under fixed keys), so one argument per key
says all of it. Both ends parse the values with the generator's own key table
(device-sim/migration/workload_generator.c, vbw_set_param): compare hands it each JSON value,
vbwork each argument, so a key or a range cannot mean one thing in the model and another in
the guest. This module only checks the keys and the JSON types, and leaves ranges to that
table (vbwork exits 2 naming the key).

    import workload_description as wd
    d = wd.load("tools/vballoon-sim/examples/database-64g.json")
    vm = GuestVM(..., ram_mib=wd.ram_mib(d, 2048), append=wd.kernel_args(d))
    vm.sh("vbwork " + " ".join(wd.vbwork_args(d, 2048)) + " > /tmp/vbwork.out &")
"""

from __future__ import annotations

import json
import math

# The generator's keys, in its table's order (test_workload_description.py checks them
# against workload_generator.c).
KEYS = ("working_set_mib", "freed_mib", "freed_fraction", "hot_mib", "hot_mib_s", "cache_mib",
        "cache_mib_s", "arena_kib", "live_mib", "churn_mib_s", "random_frees", "warmup_ms", "seed",
        "init_on_free", "init_on_alloc")
FLAGS = ("random_frees", "init_on_free", "init_on_alloc")
# Keys of the file that are not the generator's: compare's own.
FILE_KEYS = ("name", "ram_mib", "comment")
KERNEL_SETTINGS = ("init_on_free", "init_on_alloc")


class DescriptionError(ValueError):
    """A description with an unknown key or a value of the wrong type; says which key."""


def check(description: dict) -> dict:
    """The description itself, once every key is known and every value of its type."""
    if not isinstance(description, dict):
        raise DescriptionError("a workload description is a JSON object")
    for key, value in description.items():
        if key in ("name", "comment"):
            if not isinstance(value, str):
                raise DescriptionError(f'"{key}": must be a string')
        elif key == "ram_mib":
            if isinstance(value, bool) or not isinstance(value, int) or value < 64:
                raise DescriptionError(f'"ram_mib": must be a whole number of MiB, at least 64 (got {value!r})')
        elif key not in KEYS:
            raise DescriptionError(f'unknown key "{key}" (known: {", ".join(FILE_KEYS + KEYS)})')
        elif isinstance(value, bool):
            if key not in FLAGS:
                raise DescriptionError(f'"{key}": must be a number (got {value!r})')
        elif not isinstance(value, (int, float)) or not math.isfinite(value):
            raise DescriptionError(f'"{key}": must be a number (got {value!r})')
    return description


def load(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return check(json.load(f))


def _text(value) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    return repr(float(value))  # the shortest text that reads back as the same double


def ram_mib(description: dict, default: int) -> int:
    """The guest's RAM: the description's, or `default`."""
    return check(description).get("ram_mib", default)


def vbwork_args(description: dict, default_ram_mib: int = 2048) -> list[str]:
    """vbwork's arguments for the description: `described`, its RAM, then every key it gives,
    in the generator's order (a key not given keeps the empty description's value)."""
    check(description)
    args = ["described", "--ram-mib", str(ram_mib(description, default_ram_mib))]
    args += [f"{key}={_text(description[key])}" for key in KEYS if key in description]
    return args


def kernel_args(description: dict) -> str:
    """The guest kernel's boot arguments for the description: both settings said, so the
    guest does not fall back on its kernel's default (Debian's has init_on_alloc on)."""
    check(description)
    return " ".join(f"{key}={1 if description.get(key, False) else 0}" for key in KERNEL_SETTINGS)
