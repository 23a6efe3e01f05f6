#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# check-no-compaction.sh: builds vballoon.ko, warning-free, against a copy of the installed
# headers whose configuration has CONFIG_BALLOON_COMPACTION unset, to show the module does not
# depend on it (Debian's kernel has it on, so the normal build cannot show that).
#
# The copy changes the configuration only (.config, auto.conf, autoconf.h), and the build
# runs on a copy of the module's sources, so neither the headers nor the repository's objects
# are touched. The module it makes is for this check only: a kernel built without compaction
# would have a different vm_event layout, so it is never loaded anywhere.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)

if [ -z "${KDIR:-}" ]; then
	KDIR=$(for dir in /usr/src/linux-headers-*/; do
		[ -f "$dir/Module.symvers" ] && echo "${dir%/}"
	done | sort -V | tail -n 1)
fi
if [ -z "$KDIR" ] || [ ! -f "$KDIR/include/config/auto.conf" ]; then
	echo "check-no-compaction.sh: no kernel headers found; install linux-headers-amd64 or set KDIR" >&2
	exit 1
fi
grep -q '^CONFIG_BALLOON_COMPACTION=y' "$KDIR/include/config/auto.conf" || {
	echo "check-no-compaction.sh: $KDIR already has no balloon compaction; the normal build shows it"
	exit 0
}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

headers="$work/headers"
cp -a "$KDIR" "$headers"
# Debian's flavour folder links scripts/ and tools/ relative to /usr/src: make them absolute.
for link in "$headers"/* ; do
	[ -L "$link" ] && ln -sfn "$(readlink -f "$KDIR/$(basename "$link")")" "$link"
done
sed -i 's/^CONFIG_BALLOON_COMPACTION=y$/# CONFIG_BALLOON_COMPACTION is not set/' "$headers/.config"
sed -i '/^CONFIG_BALLOON_COMPACTION=y$/d' "$headers/include/config/auto.conf"
sed -i '/^#define CONFIG_BALLOON_COMPACTION 1$/d' "$headers/include/generated/autoconf.h"
if grep -q 'CONFIG_BALLOON_COMPACTION[ =]' "$headers/include/config/auto.conf" \
	"$headers/include/generated/autoconf.h"; then
	echo "check-no-compaction.sh: could not unset CONFIG_BALLOON_COMPACTION in the copy" >&2
	exit 1
fi

src="$work/src"
mkdir -p "$src"
cp -a "$repo/Kbuild" "$src/"
for dir in driver spec; do
	(cd "$repo" && find "$dir" -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' \
		-o -name '*.sh' \) -print) | while read -r f; do
		mkdir -p "$src/$(dirname "$f")"
		cp "$repo/$f" "$src/$f"
	done
done

KDIR="$headers" "$src/driver/linux/build-module.sh" 2>&1 | tee "$work/build.log"
if grep -q 'warning:' "$work/build.log"; then
	echo "check-no-compaction.sh: the build warned" >&2
	exit 1
fi
grep -q 'BALLOON_COMPACTION unset' "$work/build.log" || {
	echo "check-no-compaction.sh: the build did not see CONFIG_BALLOON_COMPACTION unset" >&2
	exit 1
}
test -f "$src/vballoon.ko"
echo "check-no-compaction.sh: vballoon.ko builds without CONFIG_BALLOON_COMPACTION"
