#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The main job on its built-in default scenario: install what is needed, build, then
# inflate and deflate a simulated 2 GiB guest and print what the host saw.
# Arguments are passed to vballoon-sim (try --help).
set -eu
cd "$(dirname "$0")/.."
ci/install-deps.sh
ci/build.sh plain >/dev/null
exec build/tools/vballoon-sim "$@"
