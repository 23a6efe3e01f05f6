#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The migration verifier can fail: builds vballoon-sim and the migration unit tests with the
# mutants compiled in (build-mutants/, -DVB_MUTANTS=ON), then runs a small `vballoon-sim
# compare` with each mutant of spec/compare_mutants.tsv switched on. compare itself must
# report a run not verified and exit non-zero; with no mutant every run must verify. The
# table also lists the migration unit tests that fail with each mutant.
#
# The run: a 256 MiB guest, busy (writes until the VM stops, rewrites pages already sent,
# anonymous memory and page cache through the two marking paths), every strategy three times,
# on a 1 Gbit/s link so that it takes several rounds. Two of the breakages (stop-and-copy
# ignoring the log, the final harvest reading one bitmap) lose only the writes between the
# last bitmap sync and the VM stop, which a run does not always have: since a sync waits for
# the workload to catch up with the model clock that window is the sync's and the VM stop's
# own model time, and 2-6 runs of 6 caught each. So a mutant gets up to three compare runs
# of the six strategies and stops at the first that catches it; 18 runs make a miss unlikely
# (6-10 of 18 caught in two runs of all 18).
#   ci/compare_mutants.sh [run_compare_mutants.py options]   e.g. --only MIG_FIRST_HARVEST_DROPPED
set -eu
cd "$(dirname "$0")/.."

ci/build.sh mutants vballoon-sim migration_tests
/usr/bin/python3 spec/run_compare_mutants.py --build build-mutants --tries 3 "$@" -- \
	--ram-mib 256 --workload busy --link-gbit 1 --repeat 1 --strategy all
