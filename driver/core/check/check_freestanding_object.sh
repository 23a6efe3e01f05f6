#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Fails when a C++ object carries something a kernel module cannot: constructors that
# never run (CONFIG_CONSTRUCTORS is off), unwind tables, or calls into a C++/compiler
# runtime that no kernel exports.
set -eu
object=$1
status=0

sections=$(objdump -h "$object" | awk '{print $2}')
for forbidden in .init_array .ctors .fini_array .dtors .eh_frame .gcc_except_table; do
	if printf '%s\n' "$sections" | grep -qx -- "$forbidden"; then
		echo "$object: has section $forbidden" >&2
		status=1
	fi
done

runtime=$(nm -u "$object" | awk '{print $2}' |
	grep -E '^(_Znw|_Zna|_Zdl|_Zda|__cxa_|__gxx_|_Unwind_|__popcount|__udivti3|__umodti3|__divti3|__modti3|__atomic_.*_16|abort$|__stack_chk_guard$|_ZSt|_ZNSt)' || true)
if [ -n "$runtime" ]; then
	echo "$object: needs runtime symbols no kernel exports:" >&2
	printf '  %s\n' $runtime >&2
	status=1
fi
exit $status
