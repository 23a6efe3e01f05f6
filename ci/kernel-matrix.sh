#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# kernel-matrix.sh: vballoon.ko against both kernels of the matrix, as CI builds it:
#   - Debian 12's 6.1 (linux-headers-amd64): ./vballoon.ko, which the guest suite loads;
#   - Debian's 6.12 (ci/install-kernel-6.12.sh): build-kmod/6.12/vballoon.ko;
# each with W=1 and warnings as errors, no warning at all in the log, a .BTF section
# wherever the kernel generates module BTF (its headers ship vmlinux; Debian's 6.1 does
# not), then driver/linux/check-variants.sh against both (no compaction, no reporting,
# unknown balloon API). Prints the 6.12 headers folder last, for the guest suite and DKMS.
set -eu
cd "$(dirname "$0")/.."

kdir61=$(for dir in /usr/src/linux-headers-*/; do
	[ -f "$dir/Module.symvers" ] && echo "${dir%/}"
done | sort -V | tail -n 1)
kdir612=$(ci/install-kernel-6.12.sh)
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
	echo "kernel-matrix: $1: $2 built with W=1, 0 warnings, .BTF: $btf" >&2
}

# From scratch, so that the warning count covers every object.
driver/linux/build-module.sh clean
rm -rf build-kmod/6.12

echo "kernel-matrix: 6.1 headers: $kdir61" >&2
KDIR=$kdir61 driver/linux/build-module.sh W=1 >"$log" 2>&1 || { cat "$log" >&2; exit 1; }
cat "$log" >&2
check_build "$(basename "$kdir61")" vballoon.ko "$kdir61"

echo "kernel-matrix: 6.12 headers: $kdir612" >&2
KDIR=$kdir612 driver/linux/build-module.sh --out build-kmod/6.12 W=1 >"$log" 2>&1 || {
	cat "$log" >&2
	exit 1
}
cat "$log" >&2
check_build "$(basename "$kdir612")" build-kmod/6.12/vballoon.ko "$kdir612"

KDIR=$kdir61 driver/linux/check-variants.sh >&2
KDIR=$kdir612 driver/linux/check-variants.sh >&2
echo "$kdir612"
