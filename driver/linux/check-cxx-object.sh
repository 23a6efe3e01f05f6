#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# check-cxx-object.sh SYMVERS 'MODULE_OBJECTS' CXX_OBJECT...
#
# Fails the module build when a C++ object needs something the kernel cannot give it:
#
#   .init_array .ctors .fini_array .dtors .preinit_array
#       a global constructor or destructor. Distribution kernels have CONFIG_CONSTRUCTORS
#       off: the module would load and the constructor would silently never run.
#   .eh_frame .gcc_except_table
#       unwind tables, for exceptions; the kernel unwinds with objtool's ORC data.
#   a GNU unique symbol (nm type 'u')
#       the module loader does not know STB_GNU_UNIQUE.
#   an undefined symbol (nm U, w or v) that is neither exported by the kernel (SYMVERS:
#   the headers' Module.symvers, which lists vmlinux's and the in-tree modules' exports)
#   nor defined by one of the module's own objects (MODULE_OBJECTS)
#       the C++ runtime (operator new/delete, __cxa_*, __gxx_personality_v0, _Unwind_*)
#       or a libgcc helper (__popcountdi2, __udivti3, __atomic_load_16, ...).
#       memcpy, memset, __fentry__, __stack_chk_fail, __x86_return_thunk and the
#       __x86_indirect_thunk_* are kernel exports, so they pass.
#
# NM and OBJDUMP come from the environment (Kbuild passes its own).
set -eu

if [ $# -lt 3 ]; then
	echo "usage: $0 SYMVERS 'MODULE_OBJECTS' CXX_OBJECT..." >&2
	exit 2
fi

nm=${NM:-nm}
objdump=${OBJDUMP:-objdump}
symvers=$1
module_objects=$2
shift 2

if [ ! -r "$symvers" ]; then
	echo "error: $symvers: cannot read the kernel's exports" >&2
	exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

demangle() {
	if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi
}

{
	awk '{ print $2 }' "$symvers"
	for object in $module_objects; do
		"$nm" --defined-only --extern-only "$object" | awk 'NF == 3 { print $3 }'
	done
} | LC_ALL=C sort -u >"$tmp/allowed"

status=0
for object in "$@"; do
	"$objdump" -h -w "$object" | awk '$1 ~ /^[0-9]+$/ { print $2 }' >"$tmp/sections"
	while read -r section; do
		case $section in
		.init_array* | .fini_array* | .preinit_array* | .ctors* | .dtors*)
			echo "error: $object: section $section: a global with a dynamic constructor" \
				"or destructor, which the kernel never runs (CONFIG_CONSTRUCTORS is off);" \
				"make it constinit/constexpr or set it up in probe" >&2
			status=1
			;;
		.eh_frame* | .gcc_except_table*)
			echo "error: $object: section $section: unwind tables, which the kernel does not use;" \
				"compile with -fno-exceptions -fno-asynchronous-unwind-tables -fno-unwind-tables" >&2
			status=1
			;;
		esac
	done <"$tmp/sections"

	"$nm" "$object" >"$tmp/symbols"
	awk 'NF == 3 && $2 == "u" { print $3 }' "$tmp/symbols" >"$tmp/unique"
	if [ -s "$tmp/unique" ]; then
		demangle <"$tmp/unique" | while read -r symbol; do
			echo "error: $object: GNU unique symbol $symbol: the module loader does not" \
				"support it; compile with -fno-gnu-unique" >&2
		done
		status=1
	fi

	awk 'NF == 2 && ($1 == "U" || $1 == "w" || $1 == "v") { print $2 }' "$tmp/symbols" |
		LC_ALL=C sort -u >"$tmp/undefined"
	LC_ALL=C comm -23 "$tmp/undefined" "$tmp/allowed" >"$tmp/missing"
	if [ -s "$tmp/missing" ]; then
		while read -r symbol; do
			echo "error: $object: undefined symbol $symbol ($(echo "$symbol" | demangle)):" \
				"the kernel does not export it and the module does not define it" >&2
		done <"$tmp/missing"
		status=1
	fi
done

exit $status
