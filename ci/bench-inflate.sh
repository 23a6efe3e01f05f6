#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# bench/inflate in one command: installs what the build needs (ci/install-deps.sh), builds
# vballoon-bench-inflate in build/ (the plain configuration of ci/build.sh; VB_BENCH_BUILD_DIR
# picks another directory) and runs it with the arguments given. Build output goes to
# stderr, so stdout is only the benchmark's report.
#   ci/bench-inflate.sh                               # 8 GiB guest, 7 GiB balloon, 3 reps
#   ci/bench-inflate.sh --reps 5 --json inflate.json
#   ci/bench-inflate.sh --modes chunked,limit --ram-gib 2 --balloon-gib 1.5
#   ci/bench-inflate.sh --sweep 1,2,4,8,16          # cost per GiB across guest sizes
set -eu
cd "$(dirname "$0")/.."

ci/install-deps.sh
dir=${VB_BENCH_BUILD_DIR:-build}
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVB_BUILD_BENCH=ON >&2
cmake --build "$dir" --target vballoon-bench-inflate -j "$(nproc)" >&2
exec "$dir/bench/inflate/vballoon-bench-inflate" "$@"
