#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The main job on its built-in default scenario: install what is needed, build, then
# live-migrate a simulated 8 GiB guest with each strategy its host can run side by side
# (QEMU 7.2's: zero detection alone, with free page hinting, with free page reporting;
# --strategy all adds the ones without zero detection) for each workload (fresh, freed,
# busy), and print a table per workload.
# Arguments are passed to `vballoon-sim compare` (try --help); a first argument naming a
# subcommand picks that one instead: `ci/demo.sh inflate` is the inflate/deflate scenario.
set -eu
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh plain >/dev/null
case "${1:-}" in
compare | inflate) ;;
*) set -- compare "$@" ;;
esac
exec build/tools/vballoon-sim "$@"
