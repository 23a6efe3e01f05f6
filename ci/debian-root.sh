#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# debian-root.sh SUITE: a root of another Debian release made from Debian's archive, for the
# builds that must use the toolchain that release's users have. SUITE is
#
#   trixie   Debian 13 (ci/trixie-root.sh is this with SUITE trixie). Debian 12 has no
#            gcc-13 or gcc-14, its glibc (2.36) is too old for the kbuild tools of the 7.x
#            headers in trixie-backports, and its pahole (1.24) too old for their BTF step
#            (/work/shared/docs/kernel-versions.md); a Debian 13 user's DKMS build runs
#            gcc-14, glibc 2.41 and pahole 1.30, and so does CI inside this root: the module,
#            DKMS and the userspace build (ci/build.sh gcc14) with its tests. 73-94 s and
#            970 MB here, a quarter of that python3-matplotlib's numpy, scipy and sympy.
#   testing  Debian testing, for the module only: testing's 7.x headers were built with
#            gcc-16 (16.2.0), which neither Debian 12 nor 13 has; the root has gcc-16, g++-16,
#            make, pahole and kmod (glibc 2.43, pahole 1.32) and nothing else of ours: no
#            DKMS, no userspace build. Its mirror entry says check-valid-until=no, as in
#            ci/debian-apt.sh (the archive copy here froze testing past its Valid-Until).
#            Testing moves daily: a cached root keeps the day it was made (see below).
#
# ci/in-debian-root.sh (ci/in-trixie-root.sh, ci/in-testing-root.sh) runs commands in it.
#
# The root is made by mmdebstrap (variant apt: apt and the Essential packages, then
# the suite's package list with their dependencies, no Recommends) from the suites that
# release's users build modules from (trixie and trixie-backports; testing), component main,
# on the mirror and with the keyring of the machine's bookworm entry (ci/debian-mirror.sh):
# a machine behind a local mirror or proxy keeps using it. No manuals, documentation (the
# copyright files stay) or translations, which nothing here reads. The root has no
# -security or -updates suite: the toolchain changes with point releases only, and the
# kernel headers come through ci/debian-apt.sh, not through apt in here.
#
# It is cached under $VB_ROOTS (default /var/cache/vballoon/roots) as SUITE-<hash>/, the
# hash over the suite's $RECIPE and $PACKAGES: a changed list or recipe makes a new root
# beside the old one instead of patching a root in place. A cached root keeps the package
# versions of the day it was made; remove its folder to make it again from today's archive.
# The marker file is written last, so a root without it was interrupted and is made again
# from nothing; ci/in-debian-root.sh never writes into the cached root.
#
# Prints the root's path on stdout, everything else on stderr. With the root cached it
# prints the path and does nothing else. Two runs at once make a root once: the second
# waits for the first. Needs root (mmdebstrap's root mode: real owners and device nodes).
set -eu

suite=${1:-}
case "$suite" in
trixie | testing) ;;
*)
	echo "usage: $0 trixie|testing" >&2
	exit 2
	;;
esac

# Per suite: RECIPE, bumped when the way the root is made changes (options, sources, the
# steps below) so that roots made the old way are not reused; PACKAGES, what the builds
# inside use, by name; the sources; the compiler a root without is no use.
#
# trixie: the kernel module's M= build against Debian's unpacked headers (gcc-14, make,
# pahole for module BTF, kmod, xz-utils and zstd for compressed modules and images, cpio)
# and DKMS on top of it (dkms; git for driver/linux/module-version.sh); the userspace build
# with Debian 13's libraries and its tests ($USERSPACE_PACKAGES, ci/userspace-packages.sh:
# the same list as Debian 12's); ca-certificates for apt inside the root when the mirror is
# https. No bison, flex, bc, libelf-dev or libssl-dev: an M= build uses the tools
# linux-kbuild ships already built (their libelf and libssl come with pahole and apt). The
# list and its order make the hash: the cached root stays valid while they stay as they are.
#
# testing: the module's M= build and nothing else: gcc-16 and g++-16 (binutils with them),
# make, pahole for module BTF (the libelf the kbuild tools need with it), kmod. No git, so
# modinfo's version has no commit (driver/linux/module-version.sh), no DKMS, no userspace.
case "$suite" in
trixie)
	RECIPE=1
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
	suites="trixie trixie-backports"
	source_opts=""
	compiler="gcc-14"
	;;
testing)
	RECIPE=1
	PACKAGES="
gcc-16
g++-16
make
pahole
kmod
"
	suites="testing"
	source_opts="check-valid-until=no "
	compiler="gcc-16"
	;;
esac

me=$suite-root
base=${VB_ROOTS:-/var/cache/vballoon/roots}
# shellcheck disable=SC2086 # the package list is meant to split
hash=$(printf '%s\n' "recipe $RECIPE" $PACKAGES | sha256sum | cut -c1-10)
root="$base/$suite-$hash"
marker="$root/.vballoon-root-complete"

if [ -f "$marker" ]; then
	echo "$root"
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	exec sudo VB_ROOTS="$base" "$0" "$suite"
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
exec 9>"$base/.$suite-root.lock"
flock 9
if [ -f "$marker" ]; then
	echo "$root"
	exit 0
fi

# shellcheck source=ci/debian-mirror.sh
. "$(dirname "$0")/debian-mirror.sh"
entry=$(mirror_of bookworm | head -n 1)
uri=${entry%% *}
key=${entry#* }
[ -n "$uri" ] || fail "no bookworm entry in the apt sources to take the mirror from"
opts=$source_opts
[ -z "$key" ] || opts="${opts}signed-by=$key "
[ -z "$opts" ] || opts="[${opts% }] "
# One sources line for each suite, as mmdebstrap takes them.
set --
for s in $suites; do
	set -- "$@" "deb ${opts}$uri $s main"
done

if [ -e "$root" ]; then
	echo "$me: removing $root, a root whose making was interrupted" >&2
	remove_root
fi
echo "$me: making $root from $uri ($(echo "$suites" | sed 's/ /, /g'))" >&2
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
	"$suite" "$root" "$@" >&2; then
	remove_root
	fail "mmdebstrap failed (its messages are above); nothing is cached"
fi

# What the release's users build with; a root without it is no use here.
version_of() {
	dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${Version}' "$1" 2>/dev/null
}
gcc=$(version_of "$compiler") || true
pahole=$(version_of pahole) || true
libc=$(version_of libc6) || true
if [ -z "$gcc" ] || [ -z "$pahole" ] || [ -z "$libc" ]; then
	remove_root
	fail "the new root lacks $compiler ($gcc), pahole ($pahole) or libc6 ($libc); nothing is cached"
fi

{
	echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) by ci/debian-root.sh $suite, recipe $RECIPE," \
		"in $(($(date +%s) - started)) s"
	echo "mirror $uri"
	echo "$compiler $gcc"
	echo "pahole $pahole"
	echo "libc6 $libc"
} >"$marker.new"
mv "$marker.new" "$marker"
echo "$me: made $root in $(($(date +%s) - started)) s, $(du -sh "$root" | cut -f1)" >&2
echo "$root"
