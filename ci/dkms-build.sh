#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# dkms-build.sh: the DKMS packaging, as a user runs it, from a clean clone of HEAD:
# `dkms add`, `dkms build` and `dkms install` against Debian's installed headers, then
# checks the built module (modinfo: version, description, parameters) and removes every
# trace again (`dkms remove --all`, the /usr/src copy, the clone).
#
# VB_DKMS_KDIR=<headers folder>: against headers that are not installed as a package
# (ci/install-kernel-6.12.sh unpacks 6.12's), through dkms's --kernelsourcedir; the kernel
# version is the folder's (linux-headers-<version>).
#
# So that it can never touch a vballoon a user installed with DKMS, it registers the clone
# under a version of its own, PACKAGE_VERSION with "+ci<pid>" appended. Needs root and the
# dkms package (ci/install-deps.sh installs it).
set -eu
repo=$(cd "$(dirname "$0")/.." && pwd)

kdir_args=
if [ -n "${VB_DKMS_KDIR:-}" ]; then
	kver=$(basename "$VB_DKMS_KDIR" | sed -n 's/^linux-headers-//p')
	[ -n "$kver" ] && [ -f "$VB_DKMS_KDIR/Module.symvers" ] || {
		echo "dkms-build: VB_DKMS_KDIR=$VB_DKMS_KDIR is not a linux-headers-<version> folder" >&2
		exit 1
	}
	kdir_args="--kernelsourcedir=$VB_DKMS_KDIR"
else
	# Flavour headers (linux-headers-<version>-amd64) are the ones with Module.symvers.
	kver=${VB_DKMS_KERNEL:-$(for dir in /usr/src/linux-headers-*/; do
		[ -f "$dir/Module.symvers" ] && basename "$dir"
	done | sed 's/^linux-headers-//' | sort -V | tail -n 1)}
	if [ -z "$kver" ] || [ ! -e "/lib/modules/$kver/build" ]; then
		echo "dkms-build: no kernel headers with /lib/modules/<version>/build; install linux-headers-amd64" >&2
		exit 1
	fi
fi
command -v dkms >/dev/null || { echo "dkms-build: dkms is not installed (ci/install-deps.sh)" >&2; exit 1; }

work=$(mktemp -d)
version=
# On a machine with the headers but not the kernel, /lib/modules/<version> holds only the
# build links until depmod (run by dkms install and remove) writes its indexes there.
moddir=/lib/modules/$kver
had_moddir=$([ -d "$moddir" ] && echo yes || true)
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
	# Only the folder this script had dkms create (a kernel whose headers are not installed).
	[ -n "$had_moddir" ] || [ -z "$kver" ] || rm -rf "$moddir"
	rm -rf "$work"
}
trap cleanup EXIT INT TERM
# dkms installs only into an existing /lib/modules/<version>.
[ -n "$had_moddir" ] || mkdir -p "$moddir"

git clone -q --no-local "$repo" "$work/vballoon"
base=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$work/vballoon/dkms.conf")
version="$base+ci$$"
sed -i "s/^PACKAGE_VERSION=.*/PACKAGE_VERSION=\"$version\"/" "$work/vballoon/dkms.conf"
# dkms 3.2 (Debian 13) copies .git along, so the module's version names the clone's commit:
# the version change is committed, as a user's checkout would be clean.
git -C "$work/vballoon" -c user.name=dkms-build -c user.email=dkms-build@localhost \
	commit -q -am "dkms-build: version $version"

echo "dkms-build: clone of $(git -C "$repo" rev-parse --short HEAD) as vballoon/$version, kernel $kver"
dkms add "$work/vballoon"
# dkms copies the top level without dot files: no .git, so the version is dkms.conf's.
dkms build "vballoon/$version" -k "$kver" $kdir_args || {
	cat "/var/lib/dkms/vballoon/$version/build/make.log" >&2 2>/dev/null || true
	exit 1
}
# dkms 3.2 runs depmod only where the kernel's modules.dep exists: a machine with headers but
# not the kernel (CI) gets an empty one, as the installed kernel would have a full one.
[ -n "$had_depmod" ] || touch "$moddir/modules.dep"
dkms install "vballoon/$version" -k "$kver" $kdir_args
dkms status "vballoon/$version"

ko=$(find "/lib/modules/$kver/updates/dkms" -name 'vballoon.ko*' | head -n 1)
[ -n "$ko" ] || { echo "dkms-build: dkms install left no vballoon.ko under /lib/modules/$kver/updates/dkms" >&2; exit 1; }
modinfo "$ko"
fail=0
check() { # field expected
	got=$(modinfo -F "$1" "$ko")
	[ "$got" = "$2" ] || { echo "dkms-build: modinfo $1 is '$got', expected '$2'" >&2; fail=1; }
}
# dkms 3.0 copies no dot files (the plain version); 3.2 copies .git (the commit follows).
modinfo -F version "$ko" | grep -Eq "^$(echo "$version" | sed 's/[.+]/\\&/g')(-g[0-9a-f]{12})?\$" || {
	echo "dkms-build: modinfo version is '$(modinfo -F version "$ko")', expected '$version'" \
		"(with the commit where dkms copies .git, never -dirty)" >&2
	fail=1
}
modinfo -F vermagic "$ko" | grep -q "^$kver " || { echo "dkms-build: not built for $kver" >&2; fail=1; }
check alias "virtio:d00000005v*"
modinfo -F description "$ko" | grep -q . || { echo "dkms-build: no description" >&2; fail=1; }
modinfo -F kernel_features "$ko" | grep -q . || { echo "dkms-build: no kernel_features" >&2; fail=1; }
# A DKMS build is what users run: no test hooks (driver/linux/vballoon_test_hooks.h), so no
# fault-injection knob in modinfo or anywhere in the module.
[ -z "$(modinfo -F test_hooks "$ko")" ] || { echo "dkms-build: the module has test hooks" >&2; fail=1; }
case $ko in
*.xz) knobs=$(xz -dc "$ko" | strings | grep -c 'refuse_deflates\|break_after_hint_blocks\|fail_next_restore\|misalign_next_inflate' || true) ;;
*) knobs=$(strings "$ko" | grep -c 'refuse_deflates\|break_after_hint_blocks\|fail_next_restore\|misalign_next_inflate' || true) ;;
esac
[ "$knobs" = 0 ] || { echo "dkms-build: the module names $knobs fault-injection knobs" >&2; fail=1; }
echo "dkms-build: no test hooks: modinfo test_hooks empty, no fault-injection knob in the module"
for p in max_chunk_order; do
	modinfo -F parm "$ko" | grep -q "^$p:.* (uint)$" || { echo "dkms-build: parameter $p lacks its help" >&2; fail=1; }
done
# Where the kernel wants module BTF (its headers ship vmlinux), the module carries it.
kdir=${VB_DKMS_KDIR:-/lib/modules/$kver/build}
if grep -q '^CONFIG_DEBUG_INFO_BTF_MODULES=y' "$kdir/include/config/auto.conf" &&
	[ -f "$kdir/vmlinux" ]; then
	case $ko in
	*.xz) xz -dc "$ko" >"$work/vballoon.ko" ;;
	*.zst) zstd -dcq "$ko" >"$work/vballoon.ko" ;;
	*.gz) gzip -dc "$ko" >"$work/vballoon.ko" ;;
	*) cp "$ko" "$work/vballoon.ko" ;;
	esac
	if readelf -S "$work/vballoon.ko" | grep -q ' \.BTF '; then
		echo "dkms-build: $(basename "$ko") has a .BTF section"
	else
		echo "dkms-build: the kernel wants module BTF, $ko has no .BTF section" >&2
		fail=1
	fi
fi
modprobe_dep=$(grep -c "updates/dkms/vballoon.ko" "/lib/modules/$kver/modules.dep" || true)
[ "$modprobe_dep" = 1 ] || { echo "dkms-build: depmod did not list the installed module" >&2; fail=1; }
[ $fail = 0 ] || exit 1

dkms remove "vballoon/$version" --all
[ ! -e "$ko" ] || { echo "dkms-build: dkms remove left $ko" >&2; exit 1; }

# A kernel without the balloon page list is skipped, not failed: dkms.conf's
# BUILD_EXCLUSIVE_CONFIG, tried on a copy of the same headers whose configuration lacks it
# (.config, which dkms 3.0 reads, and include/config/auto.conf, which 3.2 reads). DKMS says
# so and exits 77.
dkms add "$work/vballoon" >/dev/null
cp -a "$(readlink -f "$kdir")" "$work/no-balloon"
sed -i -E '/^CONFIG_(MEMORY_)?BALLOON=/d' "$work/no-balloon/.config" \
	"$work/no-balloon/include/config/auto.conf"
status=0
dkms build "vballoon/$version" -k "$kver" --kernelsourcedir="$work/no-balloon" \
	>"$work/excluded.log" 2>&1 || status=$?
if [ $status != 77 ] || ! grep -q BUILD_EXCLUSIVE "$work/excluded.log"; then
	cat "$work/excluded.log" >&2
	echo "dkms-build: a kernel without CONFIG_(MEMORY_)BALLOON was not skipped (exit $status)" >&2
	exit 1
fi
dkms remove "vballoon/$version" --all >/dev/null
echo "dkms-build: a kernel without the balloon page list is skipped: $(grep -o 'includes a BUILD_EXCLUSIVE.*' "$work/excluded.log")"
echo "dkms-build: add, build, install and remove of vballoon/$version for $kver: OK"
