#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# install-qemu10.sh: Debian's QEMU 10.0 (bookworm-backports' qemu-system-x86, the QEMU Debian 13
# ships) in a private prefix beside the machine's QEMU 7.2, which stays the one on PATH: the
# guest suite, the calibration and CI run on 7.2, and `apt install`ing the backport would
# replace it. tests/guest/test_qemu10.py (`-m qemu10`, and its smoke test in the default run)
# migrates guests between two QEMU 10 processes with it.
#
#   ci/install-qemu10.sh               # download and unpack once; prints the binary's path last
#   ci/install-qemu10.sh --print-path  # the path it has; exit 1 if not unpacked
#
# What it does: adds a bookworm-backports entry on the mirror of the machine's bookworm entry
# unless one exists (as ci/install-kernel.sh does for 6.12) and `apt-get update`s; picks the
# newest qemu-system-x86 1:10.0.* apt offers; `apt-get download`s it with qemu-system-common
# and qemu-system-data of the same version and seabios from bookworm-backports (QEMU 10.0
# depends on seabios >> 1.16.3-1~, bookworm has 1.16.2); unpacks them with `dpkg -x` into
# $VB_QEMU10 (default /var/cache/vballoon/qemu10)/<version>/. Every shared library it needs is
# one Debian 12 already has (libcapstone4, libbpf1, libpmem1, liburing2, ... are what 7.2
# links too): `ldd` must find them all, else it stops and names what is missing. Then it writes
# <prefix>/qemu-system-x86_64, a wrapper that runs the unpacked binary with -L for its own data
# folder and seabios first (the built-in firmware path, /usr/share/qemu, is 7.2's) and
# QEMU_MODULE_DIR set to its own modules (7.2's in /usr/lib/x86_64-linux-gnu/qemu carry
# another build stamp); ipxe stays Debian 12's (the suite's guests have no NIC). The marker
# .vballoon-unpacked is written last, once `<wrapper> --version` said 10.0: an interrupted run
# leaves no marker and starts over.
#
# Cost here (2 cores, deb.debian.org): 13.4 MB downloaded (qemu-system-x86 10.2 MB, -data 2.1
# MB, -common 0.96 MB, seabios 0.16 MB), 86 MB unpacked; 2.8-3.1 s fresh with apt's lists
# current (an `apt-get update` for an added backports entry comes on top), 0.01 s cached.
#
# Why not the other two ways:
# - A Debian 13 root with qemu-system-x86 installed (ci/debian-root.sh makes one for gcc-14):
#   that root is 970 MB and 73-94 s here before QEMU; adding QEMU changes its package set (and
#   so its cache key: the whole root is rebuilt) and pulls trixie's own copies of some 30
#   libraries, and every guest would run through a chroot that must see the suite's sockets,
#   images and /dev/kvm, with the harness's pdeathsig crossing the chroot. A few minutes once
#   (an estimate: not built here) and more moving parts, for the same stable branch (trixie
#   has 10.0.13 today; the backport is 10.0.2, built for bookworm's libraries).
# - Building from Debian's source package, as qemu/build-patched-qemu.sh does for 7.2:
#   7.2's 1440 ninja steps take 6-7 min of an idle 2-core machine and 16 min on a loaded one;
#   10.0 has more of them, and its source package wants meson >> 1.5 (bookworm has 1.0.1,
#   bookworm-backports 1.7, which the build would install over the system's) and a 39 MB
#   source download: 7 min or more of CPU, on every fresh CI machine, to obtain the binary
#   Debian already built from that source. Worth it only for a patched QEMU 10.
#
# Needs root (or sudo) on a fresh machine: apt's sources and the cache folder.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
base=${VB_QEMU10:-/var/cache/vballoon/qemu10}
me=install-qemu10

newest_cached() {
	for marker in "$base"/*/.vballoon-unpacked; do
		[ -f "$marker" ] && dirname "$marker"
	done | sort -V | tail -n 1
}

if [ "${1:-}" = "--print-path" ]; then
	prefix=$(newest_cached)
	[ -n "$prefix" ] || { echo "$base/<version>/qemu-system-x86_64"; exit 1; }
	echo "$prefix/qemu-system-x86_64"
	exit 0
fi
prefix=$(newest_cached)
if [ -n "$prefix" ]; then
	echo "$prefix/qemu-system-x86_64"
	exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
	if ! { mkdir -p "$base" 2>/dev/null && [ -w "$base" ]; }; then
		exec sudo VB_QEMU10="$base" "$0" "$@"
	fi
	SUDO=sudo
fi

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
		echo "# Added by vballoon's ci/install-qemu10.sh (and install-kernel.sh): QEMU 10, 6.12."
		echo "Types: deb"
		echo "URIs: $uri"
		echo "Suites: bookworm-backports"
		echo "Components: main"
		[ -z "$key" ] || echo "Signed-By: $key"
	} | $SUDO tee /etc/apt/sources.list.d/bookworm-backports.sources >/dev/null
	$SUDO apt-get update -qq
fi

# "newest version of PKG apt offers whose version matches the extended regex RE"
offered() {
	apt-cache madison "$1" | awk -F' [|] ' '{ gsub(/ /, "", $2); print $2 }' |
		grep -E "$2" | sort -V | tail -n 1
}
version=$(offered qemu-system-x86 '^1:10\.0\.')
if [ -z "$version" ]; then
	$SUDO apt-get update -qq
	version=$(offered qemu-system-x86 '^1:10\.0\.')
fi
if [ -z "$version" ]; then
	echo "$me: apt offers no qemu-system-x86 1:10.0.* (is bookworm-backports reachable?)" >&2
	exit 1
fi
seabios=$(offered seabios '~bpo12')
[ -n "$seabios" ] || { echo "$me: bookworm-backports offers no seabios" >&2; exit 1; }

upstream=${version#*:}
prefix="$base/$upstream"
echo "$me: unpacking qemu-system-x86 $version and seabios $seabios into $prefix" >&2
rm -rf "$prefix"
mkdir -p "$prefix/debs"
# apt-get download writes into the current folder; _apt must be able to write there.
(cd "$prefix/debs" && chmod 0777 . &&
	apt-get download -q "qemu-system-x86=$version" "qemu-system-common=$version" \
		"qemu-system-data=$version" "seabios=$seabios" >/dev/null)
for deb in "$prefix"/debs/*.deb; do
	dpkg -x "$deb" "$prefix/root"
done
bytes=$(cat "$prefix"/debs/*.deb | wc -c)
rm -rf "$prefix/debs"

bin="$prefix/root/usr/bin/qemu-system-x86_64"
missing=$(ldd "$bin" | grep -E 'not found|version .* not found' || true)
if [ -n "$missing" ]; then
	echo "$me: $bin needs libraries Debian 12 does not have here:" >&2
	echo "$missing" >&2
	exit 1
fi

cat >"$prefix/qemu-system-x86_64" <<EOF
#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Written by vballoon's ci/install-qemu10.sh: Debian's QEMU $version, unpacked here, with
# its own data folder, seabios and modules ahead of the machine's QEMU 7.2 ones.
export QEMU_MODULE_DIR="$prefix/root/usr/lib/x86_64-linux-gnu/qemu"
exec "$bin" -L "$prefix/root/usr/share/qemu" -L "$prefix/root/usr/share/seabios" "\$@"
EOF
chmod 0755 "$prefix/qemu-system-x86_64"
got=$("$prefix/qemu-system-x86_64" --version | head -n 1)
case "$got" in
"QEMU emulator version 10.0."*) ;;
*) echo "$me: the unpacked QEMU says: $got" >&2; exit 1 ;;
esac
printf 'version=%s\nseabios=%s\ndownloaded_bytes=%s\n' "$version" "$seabios" "$bytes" \
	>"$prefix/.vballoon-unpacked"
echo "$me: $got" >&2
echo "$prefix/qemu-system-x86_64"
