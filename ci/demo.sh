#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The main job on its built-in default scenario: install what is needed, build, then
# inflate and deflate a simulated 2 GiB guest and print what the host saw.
# Arguments are passed to `vballoon-sim inflate` (try --help); a first argument naming a
# subcommand (see `ci/demo.sh --help`) picks that one instead.
set -eu
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh plain >/dev/null
case "${1:-}" in
inflate | -h | --help) ;;
*) set -- inflate "$@" ;;
esac
exec build/tools/vballoon-sim "$@"
