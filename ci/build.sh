#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Configure and build one userspace configuration: `plain` (build/) or `sanitize`
# (build-sanitize/, AddressSanitizer + UndefinedBehaviorSanitizer) or `tsan` (build-tsan/,
# ThreadSanitizer: the simulator's device thread, guest worker and eventfds). Debug
# information is line tables only (VB_LINE_TABLES_ONLY): sanitizer reports keep their file
# and line, and the three builds take about a third less time on CI's two cores.
set -eu
cd "$(dirname "$0")/.."

config=${1:-plain}
case "$config" in
plain) dir=build; extra="" ;;
sanitize) dir=build-sanitize; extra="-DVB_SANITIZE=ON -DVB_BUILD_BENCH=OFF" ;;
tsan) dir=build-tsan; extra="-DVB_TSAN=ON -DVB_BUILD_BENCH=OFF" ;;
*) echo "usage: $0 [plain|sanitize|tsan]" >&2; exit 2 ;;
esac

cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVB_LINE_TABLES_ONLY=ON $extra >/dev/null
cmake --build "$dir" -j "$(nproc)"
