#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# module-version.sh SRCDIR: the version modinfo shows. PACKAGE_VERSION from SRCDIR/dkms.conf,
# followed, in a git checkout whose top is SRCDIR, by the commit ("0.1.0-g39a3ae3") and
# "-dirty" for uncommitted changes. Outside git (a dkms copy, a tarball) the plain version.
set -u
src=$1

version=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$/\1/p' "$src/dkms.conf" 2>/dev/null)
[ -n "$version" ] || version=unknown

# Only the repository SRCDIR is the top of: a copy inside some other repository must not
# take that repository's commit.
top=$(git -C "$src" rev-parse --show-toplevel 2>/dev/null) &&
	[ "$(cd "$top" && pwd -P)" = "$(cd "$src" && pwd -P)" ] &&
	commit=$(git -C "$src" rev-parse --short=12 HEAD 2>/dev/null) || commit=
if [ -n "$commit" ]; then
	version="$version-g$commit"
	git -C "$src" update-index -q --refresh >/dev/null 2>&1
	git -C "$src" diff-index --quiet HEAD -- 2>/dev/null || version="$version-dirty"
fi
printf '%s\n' "$version"
