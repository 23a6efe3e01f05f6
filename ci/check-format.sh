#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Checks that the C and C++ lines a branch changes are laid out as .clang-format says
# (clang-format 14 and its clang-format-diff, Debian's `clang-format` package). Only changed
# lines are held to it: older code predates .clang-format and is not reformatted.
#
#   ci/check-format.sh [BASE]      BASE: a commit, branch or tag; or the BASE variable
#
# The lines checked are those that differ between the merge base of BASE and HEAD, and HEAD
# (what `git diff BASE...HEAD` shows), plus uncommitted changes to tracked files when the
# work tree is not clean (untracked files are not seen). Without BASE it takes origin/main when that exists; with neither
# it checks nothing and says so (a clean clone of main has nothing of its own to check).
# Fails, printing the diff that would fix it, when a changed line is misformatted; exits 2
# when BASE names no commit or clang-format is missing. To fix the lines in place:
#   git diff -M -U0 "$(git merge-base BASE HEAD)" | clang-format-diff-14 -p1 -i
set -eu
cd "$(dirname "$0")/.."

base=${1:-${BASE:-}}
if [ -z "$base" ]; then
	if git rev-parse -q --verify origin/main >/dev/null; then
		base=origin/main
	else
		echo "check-format: no BASE given and no origin/main: nothing to compare with, nothing checked" >&2
		exit 0
	fi
fi
if ! git rev-parse -q --verify "$base^{commit}" >/dev/null; then
	echo "check-format: BASE '$base' names no commit" >&2
	exit 2
fi

binary=clang-format-14
command -v "$binary" >/dev/null || binary=clang-format
formatdiff=clang-format-diff-14
command -v "$formatdiff" >/dev/null || formatdiff=clang-format-diff
if ! command -v "$binary" >/dev/null || ! command -v "$formatdiff" >/dev/null; then
	echo "check-format: clang-format (with clang-format-diff) is not installed; ci/install-deps.sh installs it" >&2
	exit 2
fi

if ! from=$(git merge-base "$base" HEAD); then
	echo "check-format: $base and HEAD have no common ancestor" >&2
	exit 2
fi
since="since $base ($(git rev-parse --short "$from"))"
set -- '*.c' '*.h' '*.cpp' '*.cc' '*.hpp'
files=$(git diff -M --name-only --diff-filter=d "$from" -- "$@")
if [ -z "$files" ]; then
	echo "check-format: no C or C++ file changed $since"
	exit 0
fi
count=$(echo "$files" | wc -l)

# The changed lines, with renames found (-M): a moved file is held only to the lines the
# move changed. clang-format-diff formats exactly those lines and prints a diff of what it
# would change, nothing when they are already formatted.
changes=$(mktemp)
trap 'rm -f "$changes"' EXIT
git diff -M -U0 --no-color --diff-filter=d "$from" -- "$@" >"$changes"
if ! out=$("$formatdiff" -p1 -binary "$binary" -regex '.*\.(c|h|cpp|cc|hpp)' <"$changes"); then
	echo "check-format: $formatdiff failed (see above): nothing checked" >&2
	exit 2
fi
if [ -z "$out" ]; then
	echo "check-format: $count changed C/C++ file(s) $since: every changed line formatted"
	exit 0
fi
printf '%s\n' "$out"
echo "" >&2
echo "check-format: FAILED: lines changed $since are not formatted as .clang-format says;" >&2
echo "check-format: the diff above fixes them; to apply it:" >&2
echo "check-format:   git diff -M -U0 $from | $formatdiff -p1 -i" >&2
exit 1
