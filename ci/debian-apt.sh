#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# debian-apt.sh SUITE <apt-get|apt-cache> ARGS...: apt-get or apt-cache over another Debian
# release than the machine's (component main, amd64) with a private configuration under
# $VB_APT/apt-SUITE/ ($VB_APT default /var/cache/vballoon): its own sources, preferences,
# lists, package cache and an empty dpkg status. SUITE is
#
#   trixie   Debian 13: trixie, trixie-updates, trixie-security, trixie-backports
#            (ci/trixie-apt.sh is this with SUITE trixie);
#   testing  Debian testing: testing, testing-security. The archive copy here froze testing's
#            Release files weeks past their Valid-Until, so these two entries (and only they)
#            say check-valid-until=no: the signatures are still checked, but a stale testing
#            is taken as it is rather than refused.
#
# Why private: trixie or testing in the machine's /etc/apt sources would make the next
# `apt-get upgrade` turn the Debian 12 host into another release. Here apt only reads their
# lists for `apt-get download` and `apt-cache`; nothing is ever installed from them (an
# `install` would act on the real root with an empty status, so this script refuses it).
#
# The suites come from the mirrors of the machine's own bookworm and bookworm-security
# entries, verified with Debian 12's debian-archive-keyring: trixie's and testing's Release
# files are signed with the archive keys of 12 and 13 (and trixie's also with the 13 release
# key), and 2023.3+deb12u2 (a bookworm stable update, April 2025) added the trixie keys. A
# keyring older than that still verifies them by the bookworm key until the archive stops
# signing with it; `apt-get install debian-archive-keyring` from bookworm brings the newer one.
# The lists are fetched on the first call; later calls use them as they are:
# `debian-apt.sh SUITE apt-get update` refreshes them.
#
# The same configuration by hand: apt-get -c $VB_APT/apt-SUITE/apt.conf ...
set -eu

here=$(dirname "$0")
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
usage() {
	echo "usage: $0 trixie|testing <apt-get|apt-cache> ARGS..." >&2
	exit 2
}

suite=${1:-}
case "$suite" in
trixie | testing) ;;
*) usage ;;
esac
case "${2:-}" in
apt-get | apt-cache) ;;
*) usage ;;
esac
tool=$2
shift 2
me=$suite-apt
base=${VB_APT:-/var/cache/vballoon}
dir=$base/apt-$suite
# Every argument, not just the first word: option values come before the command.
[ "$tool" = apt-cache ] || for arg in "$@"; do
	case "$arg" in
	install | reinstall | remove | purge | upgrade | dist-upgrade | full-upgrade | \
		build-dep | autoremove | autopurge | satisfy | markauto | unmarkauto)
		echo "$me: refusing '$arg': this apt only downloads (see the header)" >&2
		exit 2
		;;
	esac
done

if [ "$(id -u)" -ne 0 ] && ! { mkdir -p "$dir" 2>/dev/null && [ -w "$dir" ]; }; then
	exec sudo VB_APT="$base" "$0" "$suite" "$tool" "$@"
fi

# shellcheck source=ci/debian-mirror.sh
. "$here/debian-mirror.sh"

entry=$(mirror_of bookworm | head -n 1)
uri=${entry%% *}
if [ -z "$uri" ]; then
	echo "$me: no bookworm entry in the apt sources to take the mirror from" >&2
	exit 1
fi
entry=$(mirror_of bookworm-security | head -n 1)
security_uri=${entry%% *}
[ -n "$security_uri" ] || security_uri=${uri%/debian}/debian-security
[ -r "$keyring" ] || {
	echo "$me: $keyring is missing: apt-get install debian-archive-keyring" >&2
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

case "$suite" in
trixie)
	write_if_changed "$dir/sources.list" <<EOF
# Written by vballoon's ci/debian-apt.sh (the mirrors of the machine's bookworm entries).
deb [signed-by=$keyring] $uri trixie main
deb [signed-by=$keyring] $uri trixie-updates main
deb [signed-by=$keyring] $security_uri trixie-security main
deb [signed-by=$keyring] $uri trixie-backports main
EOF
	;;
testing)
	write_if_changed "$dir/sources.list" <<EOF
# Written by vballoon's ci/debian-apt.sh (the mirrors of the machine's bookworm entries).
deb [signed-by=$keyring check-valid-until=no] $uri testing main
deb [signed-by=$keyring check-valid-until=no] $security_uri testing-security main
EOF
	;;
esac

# Read after the machine's apt.conf.d (apt's -c), so these win: the machine's proxy and
# Acquire settings still apply, its post-update hooks (PackageKit, AppStream) do not run
# for lists they have nothing to do with, and a binary cache is kept even where
# docker-clean switched it off, since every apt-cache call would rebuild it otherwise.
write_if_changed "$dir/apt.conf" <<EOF
// Written by vballoon's ci/debian-apt.sh: $suite's lists beside a Debian 12 machine.
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
