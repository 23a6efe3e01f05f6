#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# install-kernel.sh LINE: the headers of one kernel line the project builds for, unpacked
# beside Debian 12's own 6.1 (which stays the machine's kernel and the default everywhere).
#
#   6.12         Debian's 6.12 LTS as Debian 12 gets it (bookworm-backports, newer in
#                bookworm-security; built with gcc-12). Adds a bookworm-backports entry on the
#                mirror of the machine's bookworm entry unless one exists, and `apt-get update`s.
#   6.12-trixie  Debian 13's own 6.12 (trixie, trixie-security; built with gcc-14), through
#                `ci/debian-apt.sh trixie`: the machine's apt sources stay Debian 12's.
#   7            the newest 7.x trixie-backports offers (gcc-14), through
#                `ci/debian-apt.sh trixie`.
#   7-testing    the newest 7.x Debian testing offers (gcc-16), through
#                `ci/debian-apt.sh testing`.
#
# Picks the newest linux-headers-<line>.*-amd64 apt offers, downloads it with the packages it
# names for building (its -common, its linux-kbuild and, from 7.x on, linux-base-<version>,
# which holds the config, System.map and modules.builtin) and unpacks them with `dpkg -x`
# under $VB_KERNELS (default /var/cache/vballoon/kernels/): <version>/ for 6.12,
# trixie/<version>/ for the trixie lines, testing/<version>/ for testing's, so builds of one
# version by two releases never share a folder. Not installed: a header package depends on
# its image, which would become a host kernel. The guest suite unpacks the matching image itself
# (tests/guest/guest_image.py, told by the tree's .vballoon-unpacked which apt to use).
#
# The trees name only themselves by absolute path, so a Debian 13 or testing root that
# bind-mounts $VB_KERNELS at the same path builds against them (ci/in-trixie-root.sh,
# ci/in-testing-root.sh: their kbuild tools need that release's glibc, their compiler is
# its gcc-14 or gcc-16).
#
# Prints the headers folder (the KDIR to build against) on stdout. Idempotent: with a tree of
# that line unpacked it prints the newest one and touches nothing. Needs root (or sudo) for
# apt and write access to $VB_KERNELS.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
base=${VB_KERNELS:-/var/cache/vballoon/kernels}
line=${1:-}

case "$line" in
6.12)
	dir="$base"
	headers_re='6\.12\.[0-9]+'
	;;
6.12-trixie)
	dir="$base/trixie"
	headers_re='6\.12\.[0-9]+'
	;;
7)
	dir="$base/trixie"
	headers_re='7\.[0-9]+(\.[0-9]+)?'
	;;
7-testing)
	dir="$base/testing"
	headers_re='7\.[0-9]+(\.[0-9]+)?'
	;;
*)
	echo "usage: $0 6.12|6.12-trixie|7|7-testing" >&2
	exit 2
	;;
esac
me="install-kernel $line"

unpacked() {
	for kdir in "$dir"/*/usr/src/linux-headers-*-amd64; do
		if [ -f "$kdir/Module.symvers" ] && [ -f "$kdir/.vballoon-unpacked" ] &&
			basename "$kdir" | grep -Eq "^linux-headers-$headers_re\+"; then
			echo "$kdir"
		fi
	done | sort -V | tail -n 1
}

kdir=$(unpacked)
if [ -n "$kdir" ]; then
	echo "$kdir"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	# The unpacked tree goes where this user may not write: the whole job as root then.
	if ! { mkdir -p "$base" 2>/dev/null && [ -w "$base" ]; }; then
		exec sudo VB_KERNELS="$base" "$0" "$@"
	fi
	SUDO="sudo"
fi

if [ "$line" = 6.12 ]; then
	apt_origin=host
	apt_get() { apt-get "$@"; }
	apt_cache() { apt-cache "$@"; }
	if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
		# shellcheck source=ci/debian-mirror.sh
		. "$here/debian-mirror.sh"
		entry=$(mirror_of bookworm | head -n 1)
		uri=${entry%% *}
		key=${entry#* }
		if [ -z "$uri" ]; then
			echo "$me: no bookworm entry in the apt sources to take the mirror from" >&2
			exit 1
		fi
		echo "$me: adding bookworm-backports from $uri" >&2
		{
			echo "# Added by vballoon's ci/install-kernel.sh: Debian's 6.12 kernel."
			echo "Types: deb"
			echo "URIs: $uri"
			echo "Suites: bookworm-backports"
			echo "Components: main"
			[ -z "$key" ] || echo "Signed-By: $key"
		} | $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
		$SUDO apt-get update -qq
	fi
	refresh() { $SUDO apt-get update -qq; }
else
	# trixie or testing: the release whose apt has the line (ci/debian-apt.sh)
	case "$line" in
	*-testing) apt_origin=testing ;;
	*) apt_origin=trixie ;;
	esac
	apt_get() { "$here/debian-apt.sh" "$apt_origin" apt-get "$@"; }
	apt_cache() { "$here/debian-apt.sh" "$apt_origin" apt-cache "$@"; }
	refresh() { "$here/debian-apt.sh" "$apt_origin" apt-get update >/dev/null; }
fi

newest_available() {
	apt_cache pkgnames linux-headers- |
		grep -E "^linux-headers-$headers_re\+[a-z0-9.]+-amd64\$" | sort -V | tail -n 1
}

pkg=$(newest_available)
if [ -z "$pkg" ]; then
	refresh
	pkg=$(newest_available)
fi
if [ -z "$pkg" ]; then
	echo "$me: apt offers no linux-headers-$headers_re+*-amd64 (regex)" >&2
	exit 1
fi
kver=${pkg#linux-headers-}
# What the package itself names for building: -common, linux-kbuild, and on 7.x
# linux-base-<version> (not the unversioned linux-base, Debian's maintainer scripts).
deps=$(apt_cache depends --no-recommends --no-suggests "$pkg" |
	sed -n 's/^ *Depends: \(linux-\(headers-[^ ]*-common\|kbuild-[^ ]*\|base-[0-9][^ ]*\)\)$/\1/p' |
	sort -u)
case "$deps" in
*-common*kbuild*|*kbuild*-common*) ;;
*) echo "$me: cannot tell the -common and kbuild packages of $pkg: $deps" >&2; exit 1 ;;
esac

root="$dir/$kver"
echo "$me: unpacking $pkg $(echo $deps) into $root" >&2
rm -rf "$root"
mkdir -p "$root/debs"
# apt-get download writes into the current folder; _apt must be able to write there.
(cd "$root/debs" && chmod 0777 . && apt_get download -q "$pkg" $deps >/dev/null)
for deb in "$root"/debs/*.deb; do
	dpkg -x "$deb" "$root"
done
version=$(dpkg-deb -f "$root/debs/${pkg}_"*.deb Version)
rm -rf "$root/debs"

kdir="$root/usr/src/linux-headers-$kver"
# The arch folder's Makefile names the -common folder (include) and, from 7.x on, itself
# (KBUILD_OUTPUT) by their /usr/src paths; the scripts and tools links are relative and
# stay inside the tree.
sed -i -e "s|^include /usr/src/|include $root/usr/src/|" \
	-e "s|^KBUILD_OUTPUT=/usr/src/|KBUILD_OUTPUT=$root/usr/src/|" "$kdir/Makefile"
if ! grep -qF "include $root/" "$kdir/Makefile" ||
	grep -vF "$root/usr/src/" "$kdir/Makefile" | grep -qF /usr/src/; then
	echo "$me: unexpected $kdir/Makefile: $(cat "$kdir/Makefile")" >&2
	exit 1
fi
[ -x "$kdir/scripts/mod/modpost" ] || {
	echo "$me: $kdir/scripts/mod/modpost is missing (linux-kbuild not unpacked?)" >&2
	exit 1
}
# Read by tests/guest/guest_image.py: which apt has the matching linux-image.
printf 'apt=%s\nversion=%s\n' "$apt_origin" "$version" >"$kdir/.vballoon-unpacked"
echo "$kdir"
