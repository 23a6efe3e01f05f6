#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Install every Debian 12 package the project needs: the userspace build (CMake, GoogleTest,
# Google Benchmark, CLI11, nlohmann-json, fmt), the fuzzers (clang + its runtime), the format
# check of changed lines (clang-format 14 with clang-format-diff, ci/check-format.sh), the kernel
# module build (linux-headers-amd64, g++-12), the QEMU guest suite (qemu-system-x86,
# busybox-static, kmod for depmod, cpio, xz-utils, python3-pytest), the plot of
# `vballoon-sim compare` (python3-matplotlib), and DKMS packaging (dkms, ci/dkms-build.sh);
# for the second kernel of the matrix, Debian's 6.12: pahole (module BTF), zstd (its
# bzImage), and its headers, unpacked by ci/install-kernel-6.12.sh; the patched QEMU's build
# (qemu/build-patched-qemu.sh: dpkg-dev for apt-get source, meson, pkg-config,
# python3-setuptools, glib, pixman, libfdt; the script adds the deb-src entry it needs); the
# Debian 13 root that builds with Debian 13's gcc-14, glibc and pahole, and the testing root
# with testing's gcc-16 (mmdebstrap, ci/debian-root.sh); QEMU 10.0 from bookworm-backports,
# unpacked beside the installed 7.2, never installed (ci/install-qemu10.sh; the guest suite's
# test_qemu10.py).
#
# Idempotent and quiet: when every package is already installed, the 6.12 headers and QEMU 10 are
# unpacked it does nothing, not even `apt-get update`. Needs root (or sudo) only when
# something is missing.
set -eu

# shellcheck source=ci/userspace-packages.sh
. "$(dirname "$0")/userspace-packages.sh"
PACKAGES="
build-essential
g++-12
$USERSPACE_PACKAGES
python3-pytest
qemu-system-x86
busybox-static
linux-headers-amd64
dkms
kmod
cpio
xz-utils
zstd
pahole
clang
libclang-rt-14-dev
clang-format
dpkg-dev
meson
pkg-config
python3-setuptools
libglib2.0-dev
libpixman-1-dev
libfdt-dev
mmdebstrap
"

kernel_6_12() {
	"$(dirname "$0")/install-kernel-6.12.sh" >/dev/null
}

# After kernel_6_12, which adds the bookworm-backports entry both use.
qemu_10() {
	"$(dirname "$0")/install-qemu10.sh" >/dev/null
}

missing=""
for p in $PACKAGES; do
    # "install ok installed" is the only state that means the package is usable.
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        missing="$missing $p"
    fi
done

if [ -z "$missing" ]; then
    kernel_6_12
    qemu_10
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

echo "install-deps: installing:$missing" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # word splitting of the package list is intended
$SUDO apt-get install -y -qq $missing >/dev/null

# Check the result instead of trusting the exit status of a quiet install.
for p in $missing; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    if [ "$status" != "install ok installed" ]; then
        echo "install-deps: $p is still not installed" >&2
        exit 1
    fi
done

kernel_6_12
qemu_10
