# SPDX-License-Identifier: GPL-2.0
#
# Sourced by ci/install-deps.sh (Debian 12, the machine) and ci/debian-root.sh trixie
# (Debian 13, the root; not testing's, which builds the module only): the userspace build's tools and libraries (CMake, Ninja, GoogleTest, Google
# Benchmark, CLI11, nlohmann-json, fmt, xxHash) and what its tests run (python3, and
# python3-matplotlib for `vballoon-sim compare --plot`), under the same names on both
# releases. One list, so that the g++-12 and the g++-14 builds use the same libraries.
# shellcheck disable=SC2034
USERSPACE_PACKAGES="cmake ninja-build libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev
nlohmann-json3-dev libfmt-dev libxxhash-dev python3 python3-matplotlib"
