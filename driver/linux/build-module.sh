#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# build-module.sh [--out DIR] [clean | make target and variables...]
#
# Builds vballoon.ko at the top of the repository against the newest installed kernel
# headers (or KDIR=/path/to/headers), with the top-level Kbuild:
#
#   driver/linux/build-module.sh              make -C $KDIR M=<repo> modules
#   driver/linux/build-module.sh V=1          the same, showing every command
#   driver/linux/build-module.sh clean        removes this module's build outputs only
#   driver/linux/build-module.sh --out DIR    copies the module's sources (Kbuild, dkms.conf,
#                                             driver/, spec/) to DIR and builds there
#                                             (DIR/vballoon.ko): a second kernel's module
#                                             beside the first, or a variant. The version
#                                             modinfo shows is the repository's.
#
# Warnings in our C and C++ are errors here (VB_WERROR=1), as in CI; a plain `make` or a
# DKMS build only warns. It makes a test build (VB_TEST_HOOKS=1: the guest suite's
# fault-injection knobs, driver/linux/vballoon_test_hooks.h) unless VB_TEST_HOOKS= (empty)
# is in the environment; a plain `make` or a DKMS build has none.
#
# Why a clean of its own: Kbuild's `make M=<repo> clean` deletes every *.o, *.a, *.ko,
# *.mod, .*.cmd ... anywhere under <repo>, including CMake build trees and the guest
# kernel's modules that tests/guest unpacks under <repo>.
set -eu

repo=$(cd "$(dirname "$0")/../.." && pwd)

version_args=
if [ "${1:-}" = --out ]; then
	[ -n "${2:-}" ] || { echo "build-module.sh: --out needs a folder" >&2; exit 1; }
	out=$2
	shift 2
	mkdir -p "$out"
	out=$(cd "$out" && pwd)
	[ "$out" != "$repo" ] || { echo "build-module.sh: --out is the repository itself" >&2; exit 1; }
	cp "$repo/Kbuild" "$repo/dkms.conf" "$out/"
	for dir in driver spec; do
		(cd "$repo" && find "$dir" -type f \( -name '*.c' -o -name '*.cpp' -o -name '*.h' \
			-o -name '*.sh' \) -print) | while read -r f; do
			mkdir -p "$out/$(dirname "$f")"
			# Unchanged files keep their time stamps, so Kbuild rebuilds only what changed;
			# a changed one gets the time of the copy (not cp -p: a source older than its
			# stale object would not be rebuilt).
			cmp -s "$repo/$f" "$out/$f" || cp "$repo/$f" "$out/$f"
		done
		# A source file gone from the repository goes from the copy too.
		[ -d "$out/$dir" ] && (cd "$out" && find "$dir" -type f \( -name '*.c' -o -name '*.cpp' \
			-o -name '*.h' -o -name '*.sh' \) -print) | while read -r f; do
			[ -e "$repo/$f" ] || rm -f "$out/$f" "$out/${f%.*}.o"
		done
	done
	version_args="vb-version-once=$("$repo/driver/linux/module-version.sh" "$repo")"
	repo=$out
fi

if [ "${1:-}" = clean ]; then
	find "$repo/driver" "$repo/spec" -type f \( -name '*.o' -o -name '.*.o.cmd' -o -name '.*.o.d' \
		-o -name '.*.tmp' \) -delete
	rm -f "$repo"/vballoon.ko "$repo"/vballoon.o "$repo"/vballoon.mod "$repo"/vballoon.mod.c \
		"$repo"/vballoon.mod.o "$repo"/Module.symvers "$repo"/modules.order \
		"$repo"/.vballoon.*.cmd "$repo"/.Module.symvers.cmd "$repo"/.modules.order.cmd
	exit 0
fi

if [ -z "${KDIR:-}" ]; then
	# Flavour directories (linux-headers-<version>-amd64) carry Module.symvers; the
	# -common ones do not.
	KDIR=$(for dir in /usr/src/linux-headers-*/; do
		[ -f "$dir/Module.symvers" ] && echo "${dir%/}"
	done | sort -V | tail -n 1)
fi
if [ -z "$KDIR" ] || [ ! -f "$KDIR/Makefile" ]; then
	echo "build-module.sh: no kernel headers found; install linux-headers-amd64 or set KDIR" >&2
	exit 1
fi

# Distribution headers ship without vmlinux, so no module BTF can be generated: skip the
# step rather than have Kbuild print "Skipping BTF generation" on every build.
no_btf=
if [ ! -f "$KDIR/vmlinux" ] &&
	grep -q '^CONFIG_DEBUG_INFO_BTF_MODULES=y' "$KDIR/include/config/auto.conf"; then
	no_btf=CONFIG_DEBUG_INFO_BTF_MODULES=
fi

[ $# -gt 0 ] || set -- modules
exec make -C "$KDIR" M="$repo" VB_WERROR=1 VB_TEST_HOOKS="${VB_TEST_HOOKS-1}" $no_btf ${version_args:+"$version_args"} "$@"
