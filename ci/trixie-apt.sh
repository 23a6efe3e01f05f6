#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# trixie-apt.sh <apt-get|apt-cache> ARGS...: apt-get or apt-cache over Debian 13 (trixie,
# trixie-updates, trixie-security, trixie-backports; component main, amd64) with a private
# configuration under $VB_TRIXIE_APT (default /var/cache/vballoon/apt-trixie/): its own
# sources, preferences, lists, package cache and an empty dpkg status.
#
# Why private: trixie in the machine's /etc/apt sources would make the next `apt-get upgrade`
# turn the Debian 12 host into a Debian 13 one. Here apt only reads trixie's lists for
# `apt-get download` and `apt-cache`; nothing is ever installed from them (an `install`
# would act on the real root with an empty status, so this script refuses it).
#
# The suites come from the mirrors of the machine's own bookworm and bookworm-security
# entries, verified with Debian 12's debian-archive-keyring: trixie's Release files are signed
# with the archive keys of 12 and 13 (and trixie's also with the 13 release key), and
# 2023.3+deb12u2 (a bookworm stable update, April 2025) added the trixie keys. A keyring
# older than that still verifies them by the bookworm key until the archive stops signing
# with it; `apt-get install debian-archive-keyring` from bookworm brings the newer one.
# The lists are fetched on the first call; later calls use them as they are:
# `trixie-apt.sh apt-get update` refreshes them.
#
# The same configuration by hand: apt-get -c $VB_TRIXIE_APT/apt.conf ...
set -eu

here=$(dirname "$0")
dir=${VB_TRIXIE_APT:-/var/cache/vballoon/apt-trixie}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg

case "${1:-}" in
apt-get | apt-cache) ;;
*)
	echo "usage: $0 <apt-get|apt-cache> ARGS..." >&2
	exit 2
	;;
esac
tool=$1
shift
# Every argument, not just the first word: option values come before the command.
[ "$tool" = apt-cache ] || for arg in "$@"; do
	case "$arg" in
	install | reinstall | remove | purge | upgrade | dist-upgrade | full-upgrade | \
		build-dep | autoremove | autopurge | satisfy | markauto | unmarkauto)
		echo "trixie-apt: refusing '$arg': this apt only downloads (see the header)" >&2
		exit 2
		;;
	esac
done

if [ "$(id -u)" -ne 0 ] && ! { mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; }; then
	exec sudo VB_TRIXIE_APT="$dir" "$0" "$tool" "$@"
fi

# shellcheck source=ci/debian-mirror.sh
. "$here/debian-mirror.sh"

entry=$(mirror_of bookworm | head -n 1)
uri=${entry%% *}
if [ -z "$uri" ]; then
	echo "trixie-apt: no bookworm entry in the apt sources to take the mirror from" >&2
	exit 1
fi
entry=$(mirror_of bookworm-security | head -n 1)
security_uri=${entry%% *}
[ -n "$security_uri" ] || security_uri=${uri%/debian}/debian-security
[ -r "$keyring" ] || {
	echo "trixie-apt: $keyring is missing: apt-get install debian-archive-keyring" >&2
	exit 1
}

mkdir -p "$dir/state/lists/partial" "$dir/cache/archives/partial" "$dir/sources.list.d" \
	"$dir/preferences.d"
[ -f "$dir/state/status" ] || : >"$dir/state/status"

write_if_changed() { # FILE, content on stdin
	tmp=$(mktemp "$1.XXXXXX")
	cat >"$tmp"
	if cmp -s "$tmp" "$1"; then
		rm -f "$tmp"
	else
		chmod 0644 "$tmp"
		mv -f "$tmp" "$1"
	fi
}

write_if_changed "$dir/sources.list" <<EOF
# Written by vballoon's ci/trixie-apt.sh (the mirrors of the machine's bookworm entries).
deb [signed-by=$keyring] $uri trixie main
deb [signed-by=$keyring] $uri trixie-updates main
deb [signed-by=$keyring] $security_uri trixie-security main
deb [signed-by=$keyring] $uri trixie-backports main
EOF

# Read after the machine's apt.conf.d (apt's -c), so these win: the machine's proxy and
# Acquire settings still apply, its post-update hooks (PackageKit, AppStream) do not run
# for lists they have nothing to do with, and a binary cache is kept even where
# docker-clean switched it off, since every apt-cache call would rebuild it otherwise.
write_if_changed "$dir/apt.conf" <<EOF
// Written by vballoon's ci/trixie-apt.sh: Debian 13's lists beside a Debian 12 machine.
Dir::Etc::SourceList "$dir/sources.list";
Dir::Etc::SourceParts "$dir/sources.list.d";
Dir::Etc::Preferences "$dir/preferences";
Dir::Etc::PreferencesParts "$dir/preferences.d";
Dir::State "$dir/state";
Dir::State::status "$dir/state/status";
Dir::Cache "$dir/cache";
Dir::Cache::pkgcache "pkgcache.bin";
Dir::Cache::srcpkgcache "srcpkgcache.bin";
#clear APT::Architectures;
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
#clear APT::Update::Post-Invoke-Success;
#clear APT::Update::Post-Invoke;
#clear DPkg::Post-Invoke;
#clear DPkg::Pre-Invoke;
#clear DPkg::Pre-Install-Pkgs;
EOF

apt_update() {
	# One update at a time: the guest suite and the kernel script may both get here first.
	flock "$dir/update.lock" apt-get -c "$dir/apt.conf" -q update
}

if [ "$tool" = apt-get ] && [ "${1:-}" = update ]; then
	apt_update
	exit 0
fi
if ! ls "$dir"/state/lists/*_InRelease >/dev/null 2>&1; then
	apt_update >&2
fi
exec "$tool" -c "$dir/apt.conf" "$@"
