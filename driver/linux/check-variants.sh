#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# check-variants.sh [VARIANT...]: builds vballoon.ko against copies of one kernel's headers
# (KDIR, default: the newest installed) whose configuration or balloon header was changed, so
# that the builds for kernels configured unlike Debian's can be shown here. Each variant is
# made from the tree's own balloon API generation (Kbuild: <linux/balloon_compaction.h> up
# to 6.x, <linux/balloon.h> from 7.0):
#
#   no-migration    balloon page migration unset (CONFIG_BALLOON_COMPACTION up to 6.x,
#                   CONFIG_BALLOON_MIGRATION from 7.0; and balloon_mops no longer exported
#                   where it was): the module builds warning-free (W=1) and says
#                   "<OPTION> unset"
#   no-reporting    CONFIG_PAGE_REPORTING unset (and page_reporting_register/unregister
#                   not exported, as modpost then sees it): builds warning-free and says
#                   "PAGE_REPORTING unset"
#   unknown-api     a balloon API vballoon does not know: the tree's balloon header is
#                   replaced by a <linux/balloon.h> without the 2026 API's members (a
#                   later rework, as the 2026 one was to 6.x): the build must FAIL, with
#                   Kbuild's "unknown balloon page API"
#   no-api          no balloon header at all (neither generation): the build must FAIL the
#                   same way
#   mixed-config    the other generation's migration option set as well (headers and
#                   configuration disagree): the build must FAIL the same way
#
# Default: all five. Each copy changes the configuration (.config, auto.conf, autoconf.h),
# Module.symvers or include/ only; the builds run on copies of the module's sources
# (build-module.sh --out), so neither the headers nor the repository's objects are touched.
# The modules made here are for this check only and are never loaded: a kernel configured
# differently would also have, e.g., a different vm_event layout.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)

if [ -z "${KDIR:-}" ]; then
	KDIR=$(for dir in /usr/src/linux-headers-*/; do
		[ -f "$dir/Module.symvers" ] && echo "${dir%/}"
	done | sort -V | tail -n 1)
fi
if [ -z "$KDIR" ] || [ ! -f "$KDIR/include/config/auto.conf" ]; then
	echo "check-variants.sh: no kernel headers found; install linux-headers-amd64 or set KDIR" >&2
	exit 1
fi
[ $# -gt 0 ] || set -- no-migration no-reporting unknown-api no-api mixed-config

# The tree's balloon API generation, as Kbuild tells it: by header.
balloon_header() {
	for d in "$KDIR" "$(sed -n 's|^include \(.*\)/Makefile$|\1|p' "$KDIR/Makefile")"; do
		[ -n "$d" ] && [ -f "$d/include/linux/$1" ] && echo "$d/include/linux/$1"
	done | head -n 1
}
if [ -n "$(balloon_header balloon.h)" ]; then
	migration_option=BALLOON_MIGRATION
	other_migration_option=BALLOON_COMPACTION
else
	migration_option=BALLOON_COMPACTION
	other_migration_option=BALLOON_MIGRATION
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# copy_headers NAME: a copy of $KDIR at $work/NAME/headers
copy_headers() {
	headers="$work/$1/headers"
	mkdir -p "$work/$1"
	cp -a "$KDIR" "$headers"
	# Debian's flavour folder links scripts/ and tools/ relative to /usr/src: make them absolute.
	for link in "$headers"/*; do
		[ -L "$link" ] && ln -sfn "$(readlink -f "$KDIR/$(basename "$link")")" "$link"
	done
	# From 6.13 Debian's arch Makefile names its own folder as the output tree: the copy's.
	sed -i "s|^KBUILD_OUTPUT=.*|KBUILD_OUTPUT=$headers|" "$headers/Makefile"
	return 0
}

# unset_option NAME OPTION: OPTION (without CONFIG_) unset in the copy's configuration
unset_option() {
	h="$work/$1/headers"
	grep -q "^CONFIG_$2=y" "$h/include/config/auto.conf" || {
		echo "check-variants.sh: $KDIR has no CONFIG_$2=y to unset" >&2
		exit 1
	}
	sed -i "s/^CONFIG_$2=y\$/# CONFIG_$2 is not set/" "$h/.config"
	sed -i "/^CONFIG_$2=y\$/d" "$h/include/config/auto.conf"
	sed -i "/^#define CONFIG_$2 1\$/d" "$h/include/generated/autoconf.h"
	if grep -q "CONFIG_$2[ =]" "$h/include/config/auto.conf" "$h/include/generated/autoconf.h"; then
		echo "check-variants.sh: could not unset CONFIG_$2 in the copy" >&2
		exit 1
	fi
}

# unexport NAME SYMBOL...: the symbols gone from the copy's Module.symvers
unexport() {
	name=$1
	shift
	for sym in "$@"; do
		grep -q "	$sym	" "$work/$name/headers/Module.symvers" || {
			echo "check-variants.sh: $KDIR does not export $sym" >&2
			exit 1
		}
		sed -i "/	$sym	/d" "$work/$name/headers/Module.symvers"
	done
}

# build NAME: builds against the copy; the log in $work/NAME/build.log, make's status returned
build() {
	status=0
	KDIR="$work/$1/headers" "$repo/driver/linux/build-module.sh" --out "$work/$1/src" W=1 \
		>"$work/$1/build.log" 2>&1 || status=$?
	return $status
}

# must_build NAME "FEATURE unset"
must_build() {
	if ! build "$1"; then
		cat "$work/$1/build.log" >&2
		echo "check-variants.sh: $1: the build failed" >&2
		exit 1
	fi
	if grep -q 'warning:' "$work/$1/build.log"; then
		grep 'warning:' "$work/$1/build.log" >&2
		echo "check-variants.sh: $1: the build warned" >&2
		exit 1
	fi
	grep -q "$2" "$work/$1/build.log" || {
		echo "check-variants.sh: $1: the build did not say '$2'" >&2
		exit 1
	}
	test -f "$work/$1/src/vballoon.ko"
	echo "check-variants.sh: $1: vballoon.ko builds warning-free against $(basename "$KDIR") ($2)"
}

# must_fail NAME MESSAGE
must_fail() {
	if build "$1"; then
		echo "check-variants.sh: $1: the build succeeded; it must refuse this kernel" >&2
		exit 1
	fi
	grep -q "$2" "$work/$1/build.log" || {
		cat "$work/$1/build.log" >&2
		echo "check-variants.sh: $1: the build failed without saying '$2'" >&2
		exit 1
	}
	echo "check-variants.sh: $1: the build stops, saying: $(grep -m1 -o "$2.*" "$work/$1/build.log")"
}

# copy_common NAME: the copy's -common tree (where Debian keeps include/linux) made a real
# copy too, so its headers can be changed; the arch tree's Makefile points at the copy.
copy_common() {
	h="$work/$1/headers"
	src=$(sed -n 's|^include \(.*\)/Makefile$|\1|p' "$h/Makefile")
	if [ -n "$src" ] && [ -d "$src/include/linux" ]; then
		cp -a "$src" "$work/$1/common"
		for link in "$work/$1/common"/*; do
			[ -L "$link" ] && ln -sfn "$(readlink -f "$src/$(basename "$link")")" "$link"
		done
		sed -i "s|^include $src/Makefile\$|include $work/$1/common/Makefile|" "$h/Makefile"
		# Links in the arch tree that pointed into the -common one point into the copy.
		for link in "$h"/*; do
			[ -L "$link" ] || continue
			target=$(readlink "$link")
			case $target in
			"$src"/*) ln -sfn "$work/$1/common/${target#"$src"/}" "$link" ;;
			esac
		done
		echo "$work/$1/common"
	else
		echo "$h"
	fi
}

for variant in "$@"; do
	case $variant in
	no-migration | no-compaction)
		copy_headers $variant
		unset_option $variant $migration_option
		if grep -q "	balloon_mops	" "$work/$variant/headers/Module.symvers"; then
			unexport $variant balloon_mops
		fi
		must_build $variant "$migration_option unset"
		;;
	no-reporting)
		copy_headers $variant
		unset_option $variant PAGE_REPORTING
		unexport $variant page_reporting_register page_reporting_unregister
		must_build $variant "PAGE_REPORTING unset"
		;;
	unknown-api)
		copy_headers $variant
		inc=$(copy_common $variant)/include/linux
		rm -f "$inc/balloon_compaction.h" "$work/$variant/headers/include/linux/balloon_compaction.h"
		cat >"$inc/balloon.h" <<-'EOT'
			/* A later balloon API (check-variants.sh): neither 2012's nor 2026's shape. */
			#ifndef _LINUX_BALLOON_H
			#define _LINUX_BALLOON_H
			struct balloon_dev_info;
			#endif
		EOT
		must_fail $variant "vballoon: unknown balloon page API"
		;;
	no-api)
		copy_headers $variant
		inc=$(copy_common $variant)/include/linux
		rm -f "$inc/balloon_compaction.h" "$inc/balloon.h" \
			"$work/$variant/headers/include/linux/balloon_compaction.h" \
			"$work/$variant/headers/include/linux/balloon.h"
		must_fail $variant "vballoon: unknown balloon page API"
		;;
	mixed-config)
		copy_headers $variant
		h="$work/$variant/headers"
		echo "CONFIG_$other_migration_option=y" >>"$h/include/config/auto.conf"
		echo "#define CONFIG_$other_migration_option 1" >>"$h/include/generated/autoconf.h"
		must_fail $variant "vballoon: unknown balloon page API: CONFIG_$other_migration_option"
		;;
	*)
		echo "check-variants.sh: unknown variant $variant" >&2
		exit 1
		;;
	esac
done
