#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# in-debian-root.sh SUITE CMD [ARGS...]: runs CMD in ci/debian-root.sh's root of SUITE
# (trixie or testing; made first if it is not cached), so that a build uses that release's
# compiler, glibc and pahole as its users' would, on this Debian 12 machine: Debian 13's
# gcc-14 (ci/in-trixie-root.sh), testing's gcc-16 (ci/in-testing-root.sh). Exits with CMD's
# status; 125 when the root cannot be entered.
#
# The repository and /var/cache/vballoon (the unpacked kernel headers) appear inside at the
# same absolute paths as outside: builds record absolute paths (the headers' Makefile
# includes its -common tree by path, build directories remember their source), so a path in
# a log or a build tree means the same file on both sides. The working directory is kept
# and must therefore be one of those (or a folder the root has, such as /).
#
# Everything is mounted in a private mount namespace, which ends with the command: nothing
# stays mounted, and a killed run leaves no mount behind either. The cached root is the
# read-only lower layer of an overlay whose upper layer is a tmpfs, so what CMD writes
# outside the two shared folders (/var/lib/dkms, /root, /etc) is gone when it ends: the
# cached root stays what debian-root.sh made, and two runs at once never see each other's
# files there. /tmp is a fresh tmpfs too; /dev and /sys are the host's, /proc is a new mount.
#
# The environment is rebuilt from nothing, so that nothing of Debian 12's (a PATH to other
# tools, CC, CXXFLAGS, LD_LIBRARY_PATH) reaches the other release's build unseen: Debian's
# PATH, HOME=/root, LANG=C.UTF-8, and of the caller's only TERM, CI and VB_* (the project's
# knobs). Anything else goes through `env NAME=value CMD`. Needs root (mounts).
set -eu

suite=${1:-}
case "$suite" in
trixie | testing) shift ;;
*)
	echo "usage: $0 trixie|testing CMD [ARGS...]" >&2
	exit 2
	;;
esac
me=in-$suite-root
# The host's mount, unshare and chroot, wherever the caller's PATH looks first.
PATH=/usr/sbin:/usr/bin:/sbin:/bin:$PATH

fail() {
	echo "$me: $*" >&2
	exit 125
}

if [ "${1:-}" = --in-namespace ]; then
	# The second half, inside the new mount namespace (see the end of the first half).
	shift
	[ $# -ge 7 ] || fail "--in-namespace is for the script itself"
	host_ns=$1 root=$2 scratch=$3 repo=$4 gitdir=$5 cwd=$6
	shift 6
	# Mounting in the host's namespace would leave every mount below behind.
	[ "$(readlink /proc/self/ns/mnt)" != "$host_ns" ] || fail "--in-namespace is for the script itself"
	cache=/var/cache/vballoon
	mnt() { mount "$@" || fail "mount $* failed"; }

	mnt -t tmpfs -o mode=0755 "$me" "$scratch"
	mkdir "$scratch/upper" "$scratch/work" "$scratch/root"
	new=$scratch/root
	mnt -t overlay overlay -o "lowerdir=$root,upperdir=$scratch/upper,workdir=$scratch/work" "$new"
	mnt -t proc proc "$new/proc"
	mnt --rbind /sys "$new/sys"
	mnt --rbind /dev "$new/dev"
	mnt -t tmpfs -o mode=1777 tmpfs "$new/tmp"
	mnt -t tmpfs -o mode=0755 tmpfs "$new/run"
	mkdir -p "$new$cache" "$new$repo"
	mnt --bind "$cache" "$new$cache"
	mnt --rbind "$repo" "$new$repo"
	if [ -n "$gitdir" ]; then
		mkdir -p "$new$gitdir"
		mnt --bind "$gitdir" "$new$gitdir"
	fi
	# Names resolve as on the host, for apt inside the root.
	for f in /etc/resolv.conf /etc/hosts; do
		rm -f "$new$f"
		cat "$f" >"$new$f" 2>/dev/null || true
	done

	exec chroot "$new" /bin/sh -c '
		cd "$0" 2>/dev/null || {
			echo "'"$me"': the working directory $0 does not exist in the root; run from the repository or /var/cache/vballoon" >&2
			exit 125
		}
		exec "$@"' "$cwd" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		HOME=/root LANG=C.UTF-8 "$@"
fi

[ $# -gt 0 ] || {
	echo "usage: $0 $suite CMD [ARGS...]" >&2
	exit 2
}
[ "$(id -u)" -eq 0 ] || fail "needs root (it mounts the root's folders); run it as root or with sudo"

ci=$(cd "$(dirname "$0")" && pwd -P)
repo=$(cd "$ci/.." && pwd -P)
cwd=$(pwd -P)
root=$("$ci/debian-root.sh" "$suite") || fail "no $suite root (ci/debian-root.sh $suite failed, above)"
mkdir -p /var/cache/vballoon

# A git worktree keeps its repository elsewhere; git inside (driver/linux/module-version.sh,
# DKMS) needs that too.
gitdir=""
if command -v git >/dev/null; then
	common=$(git -C "$repo" rev-parse --path-format=absolute --git-common-dir 2>/dev/null || true)
	case "$common" in
	"" | "$repo"/*) ;;
	*) gitdir=$common ;;
	esac
fi

# The caller's variables that go in: `env` arguments, built before the environment is cleared.
passed=$(env | sed -n 's/^\(TERM\|CI\|VB_[A-Za-z0-9_]*\)=.*/\1/p')
for name in $passed; do
	eval "value=\${$name}"
	# shellcheck disable=SC2154 # set by the eval
	set -- "$name=$value" "$@"
done

# The mount point of the namespace's tmpfs: a folder of the host, empty outside the
# namespace, removed when the command ends.
scratch=$(mktemp -d "${TMPDIR:-/tmp}/$me.XXXXXX")
trap 'rmdir "$scratch"' EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
rc=0
unshare --mount --propagation private -- "$ci/in-debian-root.sh" "$suite" --in-namespace \
	"$(readlink /proc/self/ns/mnt)" "$root" "$scratch" "$repo" "$gitdir" "$cwd" "$@" || rc=$?
exit "$rc"
