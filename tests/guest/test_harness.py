# SPDX-License-Identifier: GPL-2.0
"""The harness's own guarantee: the guest kernel's live code patching works under our TCG.

Linux rewrites its own text while other CPUs run it (static keys, alternatives) and relies
on x86's cross-modifying-code rules for that. QEMU 7.2's multi-threaded TCG does not keep
them: a vCPU can execute a stale int3 the patching CPU has already replaced. Debian's 6.12
then oopses ("Oops: int3" in hrtimer_start_range_ns, dequeue_entity, urandom_read_iter:
whatever code a static key guards), at boot or whenever a key flips later (crng init done),
and 6.1 stalls in RCU. guestvm.TCG_ACCEL runs every vCPU on one host thread, which keeps
them. This test flips a static key on the scheduler's hot path while the other vCPU keeps
scheduling: with multi-threaded TCG it failed in each of 3 runs on 6.12 (an int3 oops
within 300 flips) and 2 on 6.1 (RCU stalls, then no answer in 600 s).
No driver is loaded: it checks the machine every other guest test runs on.
"""

from __future__ import annotations

import re

import guest_image
from guestvm import GuestVM

FLIPS = 1000
# Whatever the kernel says when patched code goes wrong under it.
KERNEL_DISTRESS = re.compile(r"Oops|BUG:|rcu: INFO|watchdog: BUG|Kernel panic")


def test_live_code_patching_survives_static_key_flips():
    vm = GuestVM(guest_image.prepare(None), name="code-patching", ram_mib=512, smp=2)
    try:
        vm.start()
        out = vm.sh(f"""set -e
test -w /proc/sys/kernel/sched_schedstats
(while :; do /bin/true; done) >/dev/null 2>&1 &
spinner=$!
i=0
while [ $i -lt {FLIPS} ]; do
    echo 1 > /proc/sys/kernel/sched_schedstats
    echo 0 > /proc/sys/kernel/sched_schedstats
    i=$((i + 1))
done
kill $spinner
echo flipped $i""", timeout=600)
        console = vm.console_text()
    finally:
        vm.stop()
    assert out.split()[-2:] == ["flipped", str(FLIPS)]
    distress = KERNEL_DISTRESS.search(console)
    assert distress is None, f"the guest kernel said {distress.group(0)!r}: see {vm.console_log}"
