#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# The libFuzzer targets of tests/fuzz/: builds them (build-fuzz/, clang, ASan + UBSan),
# replays every regression input, then runs each target for SECONDS (default 60), the targets
# side by side (each is one single-threaded process: on 2 cores both run at full speed), from
# its seed corpus plus what earlier runs kept. Fails on the first crash, hang (-timeout) or
# leak; the input that did it is left in build-fuzz/fuzz-artifacts/.
#
#   ci/fuzz.sh [SECONDS]
#
# Every regression must pass: nothing is skipped and no input is steered around a known bug.
set -eu
cd "$(dirname "$0")/.."

seconds=${1:-60}
dir=build-fuzz
targets="fuzz_device_queue fuzz_core_lying_device"

cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DVB_LINE_TABLES_ONLY=ON \
	-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
	-DVB_FUZZ=ON -DVB_BUILD_BENCH=OFF >/dev/null
# shellcheck disable=SC2086 # the target list is meant to split
cmake --build "$dir" -j "$(nproc)" --target $targets

bin="$dir/tests/fuzz"
artifacts="$dir/fuzz-artifacts"
mkdir -p "$artifacts"
failed=0

for target in $targets; do
	# Regressions first: each is a bug found before, and must not come back.
	for input in tests/fuzz/regressions/"$target"/*; do
		[ -f "$input" ] || continue
		name=$(basename "$input")
		replay="$artifacts/$target-regression.log"
		if ! "$bin/$target" -timeout=25 "$input" >"$replay" 2>&1; then
			echo "fuzz: $target: FAILED on regression $name" >&2
			grep -E "FUZZ_CHECK|^  [^ ]|ERROR|SUMMARY" "$replay" | head -4 >&2
			failed=1
		fi
	done
done

# Then the timed runs, one process per target at once. The working corpus lives in the build
# tree and grows from run to run; the committed seeds are read alongside it and never written.
pids=""
for target in $targets; do
	corpus="$dir/fuzz-corpus/$target"
	mkdir -p "$corpus"
	echo "fuzz: $target for ${seconds}s"
	"$bin/$target" -max_total_time="$seconds" -timeout=25 -rss_limit_mb=2048 \
		-max_len=4096 -print_final_stats=1 -artifact_prefix="$artifacts/$target-" \
		"$corpus" "tests/fuzz/corpus/$target" >"$artifacts/$target.log" 2>&1 &
	pids="$pids $!"
done
# shellcheck disable=SC2086 # one pid per target, in the targets' order
set -- $pids
for target in $targets; do
	log="$artifacts/$target.log"
	if wait "$1"; then
		grep -E "DONE|stat::number_of_executed_units|stat::average_exec_per_sec" "$log" |
			sed "s/^/fuzz: $target: /"
	else
		echo "fuzz: $target: FAILED (log: $log)" >&2
		grep -E "FUZZ_CHECK|^  [^ ]|ERROR|SUMMARY|Test unit written" "$log" | head -8 >&2
		failed=1
	fi
	shift
done
exit $failed
