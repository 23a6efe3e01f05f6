#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Every test: installs what it needs, then
#   0. the layout of the C and C++ lines changed since $BASE (default origin/main; with
#      neither, nothing is checked and it says so): ci/check-format.sh, .clang-format
#   1. the userspace build and its GoogleTest suites (ctest), plain: the build the mutants
#      steps use (build-mutants/), every mutant off, so CI builds it once
#   2. the same suites under ASan + UBSan
#   3. the same suites under ThreadSanitizer (device thread, guest worker, eventfds)
#   4. the requirements table checked against the test binaries and the mutant map
#   5. the mutants: each rule broken on purpose, its tests must fail (build-mutants/); and
#      the migration model's mutants, which `vballoon-sim compare` itself must catch
#   6. the libFuzzer targets: built (clang, ASan + UBSan), every regression replayed, each
#      target run for 60 s (ci/fuzz.sh; tests/fuzz/README.md)
#   7. the kernel module against every line of the matrix (ci/kernel-matrix.sh): Debian 12's
#      6.1 and Debian's 6.12 with gcc-12, Debian 13's 6.12 and trixie-backports' 7.x (the
#      2026 balloon API) with g++-14 in a Debian 13 root (ci/trixie-root.sh, cached), and
#      testing's 7.x with g++-16 in a testing root (ci/debian-root.sh testing, cached; the
#      module only): W=1 without a warning, module BTF where the kernel generates it, and
#      the variants of driver/linux/check-variants.sh (no migration, no reporting, unknown
#      balloon APIs refused) for each
#   8. the userspace (core, simulator, tests) built with Debian 13's g++-14 in that root,
#      and its ctest run once there
#   9. the QEMU guest suite, our module next to the in-tree driver: every test on 6.1, and
#      beside it (two TCG guests fit on two cores) the kernel matrix's selections on
#      Debian's 6.12 ($KERNEL_MATRIX_TESTS, our module) and on 7.x ($KERNEL_7_TESTS, both
#      drivers); then Debian's QEMU 7.2 built with qemu/patches (qemu/build-patched-qemu.sh,
#      cached) and the chunked tests against it on 6.1 (-m patched_qemu); then live
#      migrations between two real QEMU 10.0 processes (Debian's, bookworm-backports,
#      unpacked beside 7.2 by ci/install-qemu10.sh through install-deps.sh) on 6.1: multifd
#      channels x zero-page-detection, hinted against not (-m qemu10, about 1.5 min; its
#      smoke cell is in the default run above)
#  10. DKMS from a clean clone, for every line but testing's (its root has the module build
#      only): 6.1 and 6.12 on the machine, Debian 13's 6.12 and 7.x in the Debian 13 root
#      (its dkms 3.2)
set -eu
cd "$(dirname "$0")/.."

# Each step says when it starts, in seconds since the run began, so that a slow CI run shows
# which step took the time.
started=$(date +%s)
step() { printf '\n==== [%ss] %s\n' "$(($(date +%s) - started))" "$*"; }

step "install dependencies"
ci/install-deps.sh

step "format of the changed C and C++ lines (.clang-format)"
ci/check-format.sh

step "userspace build and tests (plain; the mutant build, no mutant on)"
ci/build.sh mutants
env -u VB_MUTANT ctest --test-dir build-mutants --output-on-failure -j "$(nproc)"

step "userspace build and tests (ASan + UBSan)"
ci/build.sh sanitize
ctest --test-dir build-sanitize --output-on-failure -j "$(nproc)"

step "userspace build and tests (ThreadSanitizer)"
ci/build.sh tsan
# gcc-12's TSan aborts ("unexpected memory mapping") when the kernel places mappings where
# its shadow layout does not expect them, which happens with high mmap ASLR entropy
# (vm.mmap_rnd_bits above 28). Running without address randomisation avoids it without
# changing the machine's settings.
setarch "$(uname -m)" -R ctest --test-dir build-tsan --output-on-failure -j "$(nproc)"

step "requirements traceability"
/usr/bin/python3 spec/check_requirements.py --min-rows 92 --mutants spec/mutants.tsv --compare-mutants spec/compare_mutants.tsv spec/requirements.md $(find build-mutants/tests -maxdepth 2 -type f -name '*_tests' -perm -u+x | sort)

step "mutants: every rule with tests broken on purpose, its tests must fail"
ci/mutants.sh

step "mutants of the migration model: vballoon-sim compare must catch each"
ci/compare_mutants.sh

step "fuzzers: regressions and 60 s per target"
ci/fuzz.sh 60

step "kernel module: 6.1, 6.12 (gcc-12), Debian 13's 6.12 and 7.x (g++-14, Debian 13 root), testing's 7.x (g++-16, testing root), W=1, module BTF, variants"
. "$(ci/kernel-matrix.sh)"

step "userspace built with g++-14 in the Debian 13 root, and its tests"
ci/build.sh gcc14
ci/in-trixie-root.sh ctest --test-dir build-gcc14 --output-on-failure -j "$(nproc)"

# On 6.12, our module only (6.1's run has the in-tree driver beside it; on 6.12 it would test
# Linux's driver, not ours, and cost about four minutes): the machine itself (live code
# patching under our TCG), binding, every device option combination, inflate/deflate,
# stats, deflate-on-OOM, compaction, unloading while inflated, hinting (and its blocks
# coming back under memory pressure), reporting and the README's install lines.
KERNEL_MATRIX_TESTS="test_driver_binds_to_balloon_device \
or test_every_option_combination_binds_balloons_and_unloads or test_inflate_to_half_then_deflate \
or test_target_above_ram_deflates_everything or test_guest_stats_present_and_plausible \
or test_deflate_on_oom_lets_allocation_succeed \
or test_compaction_migrates_balloon_pages_and_accounting_balances \
or test_whole_blocks_are_split_when_a_deflate_is_refused \
or test_rmmod_while_inflated_returns_every_page or test_hinting_shrinks_migration \
or test_reporting_hands_freed_memory_back_to_host \
or test_live_code_patching_survives_static_key_flips \
or test_hinted_blocks_come_back_under_memory_pressure \
or test_modprobe_binds_the_installed_module_and_the_balloon_works"
# On 7.x, the 2026 balloon API, both drivers: Linux's own is the reference for what the
# changed contract looks like (MemTotal, Balloon:, the host's actual, a quiet dmesg after
# compaction passes over an inflated balloon), ours must match it; refused deflates under
# compaction (ours only: the fault is injected through its debugfs), hinting, reporting, a
# device that breaks mid-round, data integrity and load/unload cycles. The install lines
# are DKMS's, in the Debian 13 root below. About 6.5 min.
KERNEL_7_TESTS="test_driver_binds_to_balloon_device or test_inflate_to_half_then_deflate \
or test_target_above_ram_deflates_everything or test_guest_stats_present_and_plausible \
or test_deflate_on_oom_lets_allocation_succeed \
or test_compaction_migrates_balloon_pages_and_accounting_balances \
or test_refused_deflates_under_compaction_stay_off_the_list \
or test_whole_blocks_are_split_when_a_deflate_is_refused \
or test_rmmod_while_inflated_returns_every_page or test_hinting_shrinks_migration \
or test_reporting_hands_freed_memory_back_to_host \
or test_hinted_blocks_come_back_under_memory_pressure \
or test_device_broken_mid_round_stops_it_and_every_block_comes_back \
or test_load_unload_cycles_leak_nothing or test_patterned_memory_survives_inflate_deflate_cycles"
# Two TCG guests fit on two cores: 6.1's whole suite runs in the foreground while 6.12's and
# 7.x's selections run one after the other beside it, each with a guest work folder of its
# own (images, console logs) and no pytest cache, so the runs share nothing; their output
# follows 6.1's.
step "QEMU guest suites: 6.1 (every test, both drivers); beside it 6.12 ($(basename "$KDIR_6_12"), our module), then 7.x ($(basename "$KDIR_7"), both drivers)"
log_beside=$(mktemp)
(
	status=0
	VBALLOON_KDIR=$KDIR_6_12 VBALLOON_KO="$PWD/build-kmod/6.12/vballoon.ko" \
		VBALLOON_GUEST_WORK="$PWD/tests/guest/.work-6.12" \
		/usr/bin/python3 -m pytest tests/guest -v -p no:cacheprovider --durations=15 \
		-k "($KERNEL_MATRIX_TESTS) and not in-tree" || status=1
	VBALLOON_KDIR=$KDIR_7 VBALLOON_KO="$PWD/build-kmod/7/vballoon.ko" \
		VBALLOON_GUEST_WORK="$PWD/tests/guest/.work-7" \
		/usr/bin/python3 -m pytest tests/guest -v -p no:cacheprovider --durations=15 \
		-k "$KERNEL_7_TESTS" || status=1
	exit $status
) >"$log_beside" 2>&1 &
pid_beside=$!
status61=0
# Debian's interpreter, which has python3-pytest, whatever else is first on PATH.
/usr/bin/python3 -m pytest tests/guest -v --durations=15 || status61=$?
status_beside=0
wait "$pid_beside" || status_beside=$?
step "QEMU guest suites on 6.12 and 7.x (run beside 6.1's)"
cat "$log_beside"
rm -f "$log_beside"
[ "$status61" = 0 ] && [ "$status_beside" = 0 ] || {
	echo "guest suites: 6.1 exited $status61; 6.12 and 7.x exited $status_beside" >&2
	exit 1
}

# About 6-16 min on 2 cores (qemu/README.md), once: the binary is cached by patch hash. Not
# beside the guest suites: their migrations (QEMU's migration thread and the `cat` it writes
# to, per guest) already take both cores.
step "patched QEMU 7.2 (qemu/patches): build"
qemu/build-patched-qemu.sh >/dev/null
step "QEMU guest suite (6.1) against the patched QEMU: chunks"
/usr/bin/python3 -m pytest tests/guest -v --durations=5 -m patched_qemu
step "QEMU guest suite (6.1) on QEMU 10.0: live migrations to a real destination"
/usr/bin/python3 -m pytest tests/guest -v -s --durations=5 -m qemu10

step "kernel module packaged with DKMS (clean clone; add, build, install, remove): 6.1, 6.12; Debian 13's 6.12 and 7.x in the Debian 13 root"
ci/dkms-build.sh
VB_DKMS_KDIR=$KDIR_6_12 ci/dkms-build.sh
ci/in-trixie-root.sh env VB_DKMS_KDIR="$KDIR_6_12_TRIXIE" ci/dkms-build.sh
ci/in-trixie-root.sh env VB_DKMS_KDIR="$KDIR_7" ci/dkms-build.sh
step "done"
