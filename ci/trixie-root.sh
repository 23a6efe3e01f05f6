#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# trixie-root.sh: a Debian 13 (trixie) root made from Debian's archive, for the builds that
# must use the toolchain Debian 13 users have. Debian 12 has no gcc-13 or gcc-14, its glibc
# (2.36) is too old for the kbuild tools of the 7.x headers in trixie-backports, and its
# pahole (1.24) too old for their BTF step (/work/shared/docs/kernel-versions.md); a Debian
# 13 user's DKMS build runs gcc-14, glibc 2.41 and pahole 1.30, and so does CI inside this
# root. ci/in-trixie-root.sh runs commands in it.
#
# The root is made by mmdebstrap (variant apt: apt and the Essential packages, then
# $PACKAGES with their dependencies, no Recommends) from trixie and trixie-backports (main),
# the suites a Debian 13 user builds modules from, on the mirror and with the keyring of the
# machine's bookworm entry (ci/debian-mirror.sh): a machine behind a local mirror or proxy
# keeps using it. No manuals, documentation (the copyright files stay) or translations,
# which nothing here reads. The root has no trixie-security or trixie-updates: the toolchain
# changes with point releases only, and the kernel headers come through ci/trixie-apt.sh,
# not through apt in here.
#
# It is cached under $VB_ROOTS (default /var/cache/vballoon/roots) as trixie-<hash>/, the
# hash over $RECIPE and $PACKAGES: a changed list or recipe makes a new root beside the old
# one instead of patching a root in place. A cached root keeps the package versions of the
# day it was made; remove its folder to make it again from today's archive. The marker file
# is written last, so a root without it was interrupted and is made again from nothing;
# ci/in-trixie-root.sh never writes into the cached root.
#
# Prints the root's path on stdout, everything else on stderr. With the root cached it
# prints the path and does nothing else. Two runs at once make the root once: the second
# waits for the first. Needs root (mmdebstrap's root mode: real owners and device nodes).
# Making it took 73-79 s here and it takes 970 MB, a quarter of that python3-matplotlib's
# numpy, scipy and sympy.
set -eu

# Bump when the way the root is made changes (options, sources, the steps below), so that
# roots made the old way are not reused.
RECIPE=1

# What the builds inside use, by name: the kernel module's M= build against Debian's
# unpacked headers (gcc-14, make, pahole for module BTF, kmod, xz-utils and zstd for
# compressed modules and images, cpio) and DKMS on top of it (dkms; git for
# driver/linux/module-version.sh); the userspace build with Debian 13's libraries and its
# tests ($USERSPACE_PACKAGES, ci/userspace-packages.sh: the same list as Debian 12's);
# ca-certificates for apt inside the root when the mirror is https. No bison, flex, bc,
# libelf-dev or libssl-dev: an M= build uses the tools linux-kbuild ships already built
# (their libelf and libssl come with pahole and apt).
# shellcheck source=ci/userspace-packages.sh
. "$(dirname "$0")/userspace-packages.sh"
PACKAGES="
build-essential
gcc-14
g++-14
make
pahole
kmod
dkms
cpio
xz-utils
zstd
git
$USERSPACE_PACKAGES
ca-certificates
"

me=trixie-root
ci=$(cd "$(dirname "$0")" && pwd -P)
base=${VB_ROOTS:-/var/cache/vballoon/roots}
hash=$(printf '%s\n' "recipe $RECIPE" $PACKAGES | sha256sum | cut -c1-10)
root="$base/trixie-$hash"
marker="$root/.vballoon-root-complete"

if [ -f "$marker" ]; then
	echo "$root"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	exec sudo VB_ROOTS="$base" "$0" "$@"
fi

fail() {
	echo "$me: $*" >&2
	exit 1
}

# A root that is half made may still have the host's /dev, /proc or /sys mounted in it (an
# mmdebstrap killed before it unmounted them): removing through those would delete the
# host's device nodes, so refuse and say what is mounted.
remove_root() {
	mounted=$(awk -v r="$root" 'index($5, r "/") == 1 || $5 == r { print $5 }' /proc/self/mountinfo)
	[ -z "$mounted" ] || fail "cannot remove $root, these are mounted in it: $(echo $mounted)"
	rm -rf --one-file-system "$root"
}

command -v mmdebstrap >/dev/null ||
	fail "mmdebstrap is not installed (Debian 12 package mmdebstrap; ci/install-deps.sh installs it)"

mkdir -p "$base"
# One maker at a time; whoever waited finds the root made.
exec 9>"$base/.trixie-root.lock"
flock 9
if [ -f "$marker" ]; then
	echo "$root"
	exit 0
fi

# shellcheck source=ci/debian-mirror.sh
. "$ci/debian-mirror.sh"
entry=$(mirror_of bookworm | head -n 1)
uri=${entry%% *}
key=${entry#* }
[ -n "$uri" ] || fail "no bookworm entry in the apt sources to take the mirror from"
opts=""
[ -z "$key" ] || opts="[signed-by=$key] "

if [ -e "$root" ]; then
	echo "$me: removing $root, a root whose making was interrupted" >&2
	remove_root
fi
echo "$me: making $root from $uri (trixie, trixie-backports)" >&2
started=$(date +%s)
# shellcheck disable=SC2086 # the package list is meant to split
if ! mmdebstrap --mode=root --variant=apt --components=main \
	--include="$(echo $PACKAGES | tr ' ' ',')" \
	--aptopt='Acquire::Languages "none"' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-include=/usr/share/locale/locale.alias' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	trixie "$root" \
	"deb ${opts}$uri trixie main" \
	"deb ${opts}$uri trixie-backports main" >&2; then
	remove_root
	fail "mmdebstrap failed (its messages are above); nothing is cached"
fi

# What Debian 13 users build with; a root without it is no use here.
version_of() {
	dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Version}' "$1" 2>/dev/null
}
gcc=$(version_of gcc-14) || true
pahole=$(version_of pahole) || true
libc=$(version_of libc6) || true
if [ -z "$gcc" ] || [ -z "$pahole" ] || [ -z "$libc" ]; then
	remove_root
	fail "the new root lacks gcc-14 ($gcc), pahole ($pahole) or libc6 ($libc); nothing is cached"
fi

{
	echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) by ci/trixie-root.sh, recipe $RECIPE, in $(($(date +%s) - started)) s"
	echo "mirror $uri"
	echo "gcc-14 $gcc"
	echo "pahole $pahole"
	echo "libc6 $libc"
} >"$marker.new"
mv "$marker.new" "$marker"
echo "$me: made $root in $(($(date +%s) - started)) s, $(du -sh "$root" | cut -f1)" >&2
echo "$root"
