#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# install-kernel-6.12.sh: the second kernel of the build matrix, Debian's 6.12 LTS, next to
# Debian 12's own 6.1 (which stays the machine's kernel and the default everywhere).
#
#   1. adds a sources entry for bookworm-backports (component main) on the same Debian
#      mirror as the machine's own bookworm entry, unless one exists already, and runs
#      `apt-get update` once;
#   2. picks the newest linux-headers-6.12.<n>+<suffix>-amd64 that apt offers (Debian 12
#      carries 6.12 in bookworm-backports and, newer, in bookworm-security);
#   3. downloads that package, its -common package and its linux-kbuild package with
#      `apt-get download` and unpacks them with `dpkg -x` under $VB_KERNELS (default
#      /var/cache/vballoon/kernels/<version>/). Not installed: Debian's 6.12 header
#      package depends on the 6.12 image, so installing it would install a 6.12 host
#      kernel. The guest suite unpacks the matching linux-image itself (tests/guest).
#
# Prints the headers folder (the KDIR to build against) on stdout. Idempotent: with a 6.12
# tree unpacked it prints the newest one and touches nothing. Needs root (or sudo) for steps
# 1-2 and write access to $VB_KERNELS.
set -eu

base=${VB_KERNELS:-/var/cache/vballoon/kernels}

unpacked() {
	for dir in "$base"/6.12.*/usr/src/linux-headers-6.12.*-amd64; do
		[ -f "$dir/Module.symvers" ] && [ -f "$dir/.vballoon-unpacked" ] && echo "$dir"
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

# The Debian mirror and keyring of the machine's bookworm entry, from deb822 (.sources) or
# one-line (.list) files: "URI KEYRING" (the keyring may be empty).
mirror_of_bookworm() {
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ / bookworm / && uri != "") {
					print uri " " key
					found = 1
					exit
				}
				types = suites = uri = key = ""
			}
			/^[ \t]*$/ { flush(); next }
			/^[ \t]*#/ { next }
			tolower($1) == "types:" { $1 = ""; types = substr($0, 2) }
			tolower($1) == "suites:" { $1 = ""; suites = substr($0, 2) }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "signed-by:" { key = $2 }
			END { if (!found) flush() }
		' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		# deb [options] URI bookworm components...
		sed -n 's/^[ \t]*deb[ \t]\+\(\[[^]]*\][ \t]\+\)\?\([^ \t]\+\)[ \t]\+bookworm[ \t].*/\2 /p' "$f"
	done
}

if ! grep -rqs '^[^#]*bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
	entry=$(mirror_of_bookworm | head -n 1)
	uri=${entry%% *}
	key=${entry#* }
	if [ -z "$uri" ]; then
		echo "install-kernel-6.12: no bookworm entry in the apt sources to take the mirror from" >&2
		exit 1
	fi
	echo "install-kernel-6.12: adding bookworm-backports from $uri" >&2
	{
		echo "# Added by vballoon's ci/install-kernel-6.12.sh: Debian's 6.12 kernel."
		echo "Types: deb"
		echo "URIs: $uri"
		echo "Suites: bookworm-backports"
		echo "Components: main"
		[ -z "$key" ] || echo "Signed-By: $key"
	} | $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
	$SUDO apt-get update -qq
fi

newest_available() {
	apt-cache pkgnames linux-headers-6.12. |
		grep -E '^linux-headers-6\.12\.[0-9]+\+[a-z0-9]+-amd64$' | sort -V | tail -n 1
}

pkg=$(newest_available)
if [ -z "$pkg" ]; then
	$SUDO apt-get update -qq
	pkg=$(newest_available)
fi
if [ -z "$pkg" ]; then
	echo "install-kernel-6.12: apt offers no linux-headers-6.12.*-amd64 (bookworm-backports)" >&2
	exit 1
fi
kver=${pkg#linux-headers-}
# Its -common and linux-kbuild packages, as the package itself names them.
deps=$(apt-cache depends --no-recommends --no-suggests "$pkg" |
	sed -n 's/^ *Depends: \(linux-\(headers-[^ ]*-common\|kbuild-[^ ]*\)\)$/\1/p' | sort -u)
case "$deps" in
*-common*kbuild*|*kbuild*-common*) ;;
*) echo "install-kernel-6.12: cannot tell the -common and kbuild packages of $pkg: $deps" >&2; exit 1 ;;
esac

root="$base/$kver"
echo "install-kernel-6.12: unpacking $pkg $(echo $deps) into $root" >&2
rm -rf "$root"
mkdir -p "$root/debs"
# apt-get download writes into the current folder; _apt must be able to write there.
(cd "$root/debs" && chmod 0777 . && apt-get download -q "$pkg" $deps >/dev/null)
for deb in "$root"/debs/*.deb; do
	dpkg -x "$deb" "$root"
done
rm -rf "$root/debs"

kdir="$root/usr/src/linux-headers-$kver"
# The arch folder's Makefile includes the -common one by its absolute /usr/src path; the
# scripts and tools links are relative and stay inside the tree.
sed -i "s|^include /usr/src/|include $root/usr/src/|" "$kdir/Makefile"
grep -q "^include $root/" "$kdir/Makefile" || {
	echo "install-kernel-6.12: unexpected $kdir/Makefile: $(cat "$kdir/Makefile")" >&2
	exit 1
}
[ -x "$kdir/scripts/mod/modpost" ] || {
	echo "install-kernel-6.12: $kdir/scripts/mod/modpost is missing (linux-kbuild not unpacked?)" >&2
	exit 1
}
touch "$kdir/.vballoon-unpacked"
echo "$kdir"
