#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Proves that the tests spec/requirements.md names really check their rules: builds the test
# binaries once more with every deliberate breakage of spec/mutants.tsv compiled in
# (build-mutants/, -DVB_MUTANTS=ON; each VB_MUTANT() hook is off until the VB_MUTANT
# environment variable names it), then switches the mutants on one at a time and runs the
# tests of the mutant's row, which must fail; with no mutant on they must pass.
#   ci/mutants.sh [run_mutants.py options]   e.g. --only STATS04_NO_REFILL
set -eu
cd "$(dirname "$0")/.."

ci/build.sh mutants core_tests device_sim_unit_tests device_sim_tests system_tests \
	migration_tests
/usr/bin/python3 spec/check_requirements.py --no-test-check --mutants spec/mutants.tsv \
	--compare-mutants spec/compare_mutants.tsv \
	spec/requirements.md >/dev/null
# Twice as many runs as cores: a caught mutant often leaves a test sleeping out its own
# deadline (the stats tests wait 60 s for a report that never comes), which costs no CPU.
/usr/bin/python3 spec/run_mutants.py --build build-mutants --jobs "$(($(nproc) * 2))" "$@"
