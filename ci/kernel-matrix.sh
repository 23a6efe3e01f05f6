#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# kernel-matrix.sh: vballoon.ko against every kernel line of the matrix, each with the
# compiler its distribution builds modules with:
#   - Debian 12's 6.1 (linux-headers-amd64), gcc-12: ./vballoon.ko, which the guest suite
#     loads by default;
#   - Debian's 6.12 as Debian 12 gets it (ci/install-kernel.sh 6.12), gcc-12:
#     build-kmod/6.12/vballoon.ko;
#   - Debian 13's own 6.12 (install-kernel.sh 6.12-trixie), g++-14 in the Debian 13 root
#     (ci/in-trixie-root.sh): build-kmod/6.12-trixie/vballoon.ko;
#   - the newest 7.x of trixie-backports (install-kernel.sh 7), the 2026 balloon API, g++-14
#     in the same root: build-kmod/7/vballoon.ko;
#   - the newest 7.x of Debian testing (install-kernel.sh 7-testing), g++-16 in a testing
#     root that has the module build's packages only (ci/in-testing-root.sh; made once in
#     about 30 s, 370 MB): build-kmod/7-testing/vballoon.ko, the newest compiler's warnings;
# each with W=1 and warnings as errors, no warning at all in the log, a .BTF section
# wherever the kernel generates module BTF (its headers ship vmlinux; Debian's 6.1 does
# not), then driver/linux/check-variants.sh against each (no balloon page migration, no
# reporting, an unknown balloon API, none at all, a configuration of the other generation),
# in the same toolchain as the line's build.
#
# Writes the headers folders to build-kmod/kernels.env (KDIR_6_1, KDIR_6_12,
# KDIR_6_12_TRIXIE, KDIR_7, KDIR_7_TESTING), for the guest suite and DKMS, and prints its
# path.
set -eu
cd "$(dirname "$0")/.."

kdir61=$(for dir in /usr/src/linux-headers-*/; do
	[ -f "$dir/Module.symvers" ] && echo "${dir%/}"
done | sort -V | tail -n 1)
kdir612=$(ci/install-kernel.sh 6.12)
kdir612t=$(ci/install-kernel.sh 6.12-trixie)
kdir7=$(ci/install-kernel.sh 7)
kdir7t=$(ci/install-kernel.sh 7-testing)
# Made before the first build in them, so that their cost shows in the log as its own line.
ci/debian-root.sh trixie >/dev/null
ci/debian-root.sh testing >/dev/null
log=$(mktemp)
trap 'rm -f "$log"' EXIT

# check_build LABEL KO KDIR: the log in $log
check_build() {
	warnings=$(grep -c 'warning:' "$log" || true)
	if [ "$warnings" != 0 ]; then
		grep 'warning:' "$log" >&2
		echo "kernel-matrix: $1: $warnings warnings" >&2
		exit 1
	fi
	btf=no
	if readelf -S "$2" | grep -q ' \.BTF '; then
		btf=yes
	elif grep -q '^CONFIG_DEBUG_INFO_BTF_MODULES=y' "$3/include/config/auto.conf" &&
		[ -f "$3/vmlinux" ]; then
		echo "kernel-matrix: $1: the kernel generates module BTF, $2 has no .BTF section" >&2
		exit 1
	fi
	echo "kernel-matrix: $1: $2 built by $(sed -n 's/^CONFIG_CC_VERSION_TEXT="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' \
		"$3/include/config/auto.conf") with W=1, 0 warnings, .BTF: $btf" >&2
}

# build LABEL KDIR OUT RUNNER...: the module for one line, from scratch (so that the warning
# count covers every object), RUNNER being how the line's toolchain is reached.
build() {
	label=$1 kdir=$2 out=$3
	shift 3
	echo "kernel-matrix: $label headers: $kdir" >&2
	if [ "$out" = . ]; then
		driver/linux/build-module.sh clean
		ko=vballoon.ko
		"$@" env KDIR="$kdir" driver/linux/build-module.sh W=1 >"$log" 2>&1 ||
			{ cat "$log" >&2; exit 1; }
	else
		rm -rf "$out"
		ko=$out/vballoon.ko
		"$@" env KDIR="$kdir" driver/linux/build-module.sh --out "$out" W=1 >"$log" 2>&1 ||
			{ cat "$log" >&2; exit 1; }
	fi
	cat "$log" >&2
	check_build "$label ($(basename "$kdir"))" "$ko" "$kdir"
}

build 6.1 "$kdir61" . env
build 6.12 "$kdir612" build-kmod/6.12 env
build 6.12-trixie "$kdir612t" build-kmod/6.12-trixie ci/in-trixie-root.sh
build 7 "$kdir7" build-kmod/7 ci/in-trixie-root.sh
build 7-testing "$kdir7t" build-kmod/7-testing ci/in-testing-root.sh

KDIR=$kdir61 driver/linux/check-variants.sh >&2
KDIR=$kdir612 driver/linux/check-variants.sh >&2
ci/in-trixie-root.sh env KDIR="$kdir612t" driver/linux/check-variants.sh >&2
ci/in-trixie-root.sh env KDIR="$kdir7" driver/linux/check-variants.sh >&2
ci/in-testing-root.sh env KDIR="$kdir7t" driver/linux/check-variants.sh >&2

mkdir -p build-kmod
{
	echo "KDIR_6_1=$kdir61"
	echo "KDIR_6_12=$kdir612"
	echo "KDIR_6_12_TRIXIE=$kdir612t"
	echo "KDIR_7=$kdir7"
	echo "KDIR_7_TESTING=$kdir7t"
} >build-kmod/kernels.env
echo "$PWD/build-kmod/kernels.env"
