#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Configure and build one userspace configuration, all of it or the targets named after it:
#   plain     build/: what users run (ci/demo.sh)
#   mutants   build-mutants/: the same with every deliberate breakage of spec/mutants.tsv and
#             spec/compare_mutants.tsv compiled in, each off until the VB_MUTANT environment
#             variable names it (ci/mutants.sh, ci/compare_mutants.sh); CI runs the plain
#             tests on it too, with no mutant on, rather than build everything twice
#   sanitize  build-sanitize/: AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan      build-tsan/: ThreadSanitizer (the simulator's device thread, guest worker,
#             eventfds)
#   gcc14     build-gcc14/: the plain build as a Debian 13 user makes it, with gcc-14 and
#             Debian 13's CMake, GoogleTest, Benchmark, CLI11, nlohmann-json and fmt, whose
#             newer versions warn and break where Debian 12's did not. Debian 12 has no
#             g++-14, so there it builds in the Debian 13 root of ci/in-trixie-root.sh, and
#             its tests run there too: ci/in-trixie-root.sh ctest --test-dir build-gcc14
# Debug information is line tables only (VB_LINE_TABLES_ONLY): sanitizer reports keep their
# file and line, and the builds take about a third less time on CI's two cores.
#   ci/build.sh [plain|mutants|sanitize|tsan|gcc14] [target ...]
set -eu
cd "$(dirname "$0")/.."

config=${1:-plain}
[ $# -gt 0 ] && shift
case "$config" in
plain) dir=build; extra="" ;;
mutants) dir=build-mutants; extra="-DVB_MUTANTS=ON" ;;
sanitize) dir=build-sanitize; extra="-DVB_SANITIZE=ON -DVB_BUILD_BENCH=OFF" ;;
tsan) dir=build-tsan; extra="-DVB_TSAN=ON -DVB_BUILD_BENCH=OFF" ;;
gcc14)
	command -v g++-14 >/dev/null || exec ci/in-trixie-root.sh ci/build.sh gcc14 "$@"
	dir=build-gcc14; extra="-DCMAKE_C_COMPILER=gcc-14 -DCMAKE_CXX_COMPILER=g++-14"
	;;
*) echo "usage: $0 [plain|mutants|sanitize|tsan|gcc14] [target ...]" >&2; exit 2 ;;
esac

# shellcheck disable=SC2086 # the extra options are meant to split
cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVB_LINE_TABLES_ONLY=ON $extra >/dev/null
if [ $# -gt 0 ]; then
	cmake --build "$dir" -j "$(nproc)" --target "$@"
else
	cmake --build "$dir" -j "$(nproc)"
fi
