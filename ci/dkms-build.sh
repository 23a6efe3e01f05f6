#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# dkms-build.sh: the DKMS packaging, as a user runs it, from a clean clone of HEAD:
# `dkms add`, `dkms build` and `dkms install` against Debian's installed headers, then
# checks the built module (modinfo: version, description, parameters) and removes every
# trace again (`dkms remove --all`, the /usr/src copy, the clone).
#
# So that it can never touch a vballoon a user installed with DKMS, it registers the clone
# under a version of its own, PACKAGE_VERSION with "+ci<pid>" appended. Needs root and the
# dkms package (ci/install-deps.sh installs it).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)

# Flavour headers (linux-headers-<version>-amd64) are the ones with Module.symvers.
kver=${VB_DKMS_KERNEL:-$(for dir in /usr/src/linux-headers-*/; do
	[ -f "$dir/Module.symvers" ] && basename "$dir"
done | sed 's/^linux-headers-//' | sort -V | tail -n 1)}
if [ -z "$kver" ] || [ ! -e "/lib/modules/$kver/build" ]; then
	echo "dkms-build: no kernel headers with /lib/modules/<version>/build; install linux-headers-amd64" >&2
	exit 1
fi
command -v dkms >/dev/null || { echo "dkms-build: dkms is not installed (ci/install-deps.sh)" >&2; exit 1; }

work=$(mktemp -d)
version=
# On a machine with the headers but not the kernel, /lib/modules/<version> holds only the
# build links until depmod (run by dkms install and remove) writes its indexes there.
moddir=/lib/modules/$kver
had_depmod=$([ -e "$moddir/modules.dep" ] && echo yes || true)
cleanup() {
	if [ -n "$version" ]; then
		dkms remove "vballoon/$version" --all >/dev/null 2>&1 || true
		rm -rf "/usr/src/vballoon-$version"
	fi
	if [ -z "$had_depmod" ]; then
		rm -f "$moddir"/modules.*
		rmdir "$moddir/updates/dkms" "$moddir/updates" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

git clone -q --no-local "$repo" "$work/vballoon"
base=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$work/vballoon/dkms.conf")
version="$base+ci$$"
sed -i "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$version\"/" "$work/vballoon/dkms.conf"

echo "dkms-build: clone of $(git -C "$repo" rev-parse --short HEAD) as vballoon/$version, kernel $kver"
dkms add "$work/vballoon"
# dkms copies the top level without dot files: no .git, so the version is dkms.conf's.
dkms build "vballoon/$version" -k "$kver" || {
	cat "/var/lib/dkms/vballoon/$version/build/make.log" >&2 2>/dev/null || true
	exit 1
}
dkms install "vballoon/$version" -k "$kver"
dkms status "vballoon/$version"

ko=$(find "/lib/modules/$kver/updates/dkms" -name 'vballoon.ko*' | head -n 1)
[ -n "$ko" ] || { echo "dkms-build: dkms install left no vballoon.ko under /lib/modules/$kver/updates/dkms" >&2; exit 1; }
modinfo "$ko"
fail=0
check() { # field expected
	got=$(modinfo -F "$1" "$ko")
	[ "$got" = "$2" ] || { echo "dkms-build: modinfo $1 is '$got', expected '$2'" >&2; fail=1; }
}
check version "$version"
modinfo -F vermagic "$ko" | grep -q "^$kver " || { echo "dkms-build: not built for $kver" >&2; fail=1; }
check alias "virtio:d00000005v*"
modinfo -F description "$ko" | grep -q . || { echo "dkms-build: no description" >&2; fail=1; }
modinfo -F kernel_features "$ko" | grep -q . || { echo "dkms-build: no kernel_features" >&2; fail=1; }
for p in max_chunk_order log_level; do
	modinfo -F parm "$ko" | grep -q "^$p:.* (uint)$" || { echo "dkms-build: parameter $p lacks its help" >&2; fail=1; }
done
modprobe_dep=$(grep -c "updates/dkms/vballoon.ko" "/lib/modules/$kver/modules.dep" || true)
[ "$modprobe_dep" = 1 ] || { echo "dkms-build: depmod did not list the installed module" >&2; fail=1; }
[ $fail = 0 ] || exit 1

dkms remove "vballoon/$version" --all
[ ! -e "$ko" ] || { echo "dkms-build: dkms remove left $ko" >&2; exit 1; }
echo "dkms-build: add, build, install and remove of vballoon/$version for $kver: OK"
