#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Builds Debian 12's QEMU (the source of the installed qemu-system-x86, exact version) with
# qemu/patches/*.patch applied, x86_64-softmmu only, and caches qemu-system-x86_64 in
# <guest work>/qemu-patched/<key>/, where key hashes the source version, the patches and the
# configure line: a changed patch rebuilds, an unchanged one returns at once. Idempotent.
# Prints the binary's path on stdout as its last line (progress goes to stderr).
#
#   qemu/build-patched-qemu.sh              # build (or find) it
#   qemu/build-patched-qemu.sh --print-path # the path it would have; exit 1 if not built
#
# Needs root on a fresh machine: it adds a deb-src entry for bookworm if apt has none and
# installs the build dependencies (ci/install-deps.sh does too).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/.." && pwd)
work=${VBALLOON_GUEST_WORK:-$repo/tests/guest/.work}/qemu-patched
jobs=${VBALLOON_QEMU_JOBS:-2}

# Only what the guest suite uses: q35, PVH -kernel boot, serial, QMP, virtio-pci, TCG
# (KVM kept for machines that have it). Firmware comes from Debian's packages.
configure_args=(
    --target-list=x86_64-softmmu --without-default-features --enable-tcg --enable-kvm
    --disable-docs --disable-tools --disable-werror
    --firmwarepath=/usr/share/qemu:/usr/share/seabios:/usr/lib/ipxe/qemu
)
build_deps=(dpkg-dev meson ninja-build pkg-config python3-setuptools libglib2.0-dev
            libpixman-1-dev libfdt-dev qemu-system-x86)

say() { echo "build-patched-qemu: $*" >&2; }

version=$(dpkg-query -W -f='${source:Version}' qemu-system-x86 2>/dev/null || true)
if [ -z "$version" ]; then
    say "qemu-system-x86 is not installed (ci/install-deps.sh installs it)"
    exit 1
fi
upstream=${version#*:}          # 7.2+dfsg-7+deb12u18
upstream=${upstream%-*}         # 7.2+dfsg
patches=("$here"/patches/*.patch)
key=$( { echo "$version"; echo "${configure_args[*]}"; cat "${patches[@]}"; } |
       sha256sum | cut -c1-16)
out="$work/$key"
binary="$out/qemu-system-x86_64"

if [ "${1:-}" = "--print-path" ]; then
    echo "$binary"
    [ -x "$binary" ]
    exit
fi
if [ -x "$binary" ]; then
    say "cached: patched QEMU $version ($key)"
    echo "$binary"
    exit 0
fi

start=$(date +%s)
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo

missing=()
for p in "${build_deps[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] ||
        missing+=("$p")
done
have_src() {
    grep -rqsE '^(Types:.*deb-src|deb-src )' /etc/apt/sources.list /etc/apt/sources.list.d/
}
updated=0
if ! have_src; then
    say "adding /etc/apt/sources.list.d/vballoon-src.sources (deb-src for bookworm)"
    $SUDO tee /etc/apt/sources.list.d/vballoon-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    $SUDO apt-get update -qq
    updated=1
fi
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    [ $updated = 1 ] || $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

# The pristine tree, once per source version: apt-get source unpacks and applies Debian's
# own patches (dpkg-source).
pristine="$work/src-$version/qemu-$upstream"
if [ ! -f "$pristine/VERSION" ]; then
    say "fetching the source of qemu $version"
    rm -rf "$work/src-$version"
    mkdir -p "$work/src-$version"
    # apt's sandbox user cannot write into a root-owned folder: download unsandboxed there
    (cd "$work/src-$version" &&
         apt-get -qq -o APT::Sandbox::User=root source "qemu=$version" >/dev/null)
    [ -f "$pristine/VERSION" ] || { say "apt-get source gave no $pristine"; exit 1; }
fi

# One build tree, copied once from the pristine one. Before patching, the files the last
# patches touched are put back from the pristine tree (and touched, so ninja sees them
# change): a patch change then recompiles only what it touches.
tree="$work/tree"
if [ "$(cat "$tree/.source-version" 2>/dev/null)" != "$version" ]; then
    say "copying the source tree"
    rm -rf "$tree"
    cp -a "$pristine" "$tree.tmp"
    mv "$tree.tmp" "$tree"
    echo "$version" > "$tree/.source-version"
    : > "$tree/.patched-files"
fi
while read -r f; do
    [ -n "$f" ] || continue
    if [ -f "$pristine/$f" ]; then
        cp "$pristine/$f" "$tree/$f"
        touch "$tree/$f"
    else
        rm -f "$tree/$f"
    fi
done < "$tree/.patched-files"
: > "$tree/.patched-files"
for p in "${patches[@]}"; do
    say "applying $(basename "$p")"
    sed -n 's|^+++ [^/]*/\([^[:space:]]*\).*|\1|p' "$p" >> "$tree/.patched-files"
    patch -d "$tree" -p1 --quiet --forward < "$p"
done

mkdir -p "$tree/build"
if [ "$(cat "$tree/build/.configured" 2>/dev/null)" != "${configure_args[*]}" ]; then
    say "configuring"
    (cd "$tree/build" && ../configure "${configure_args[@]}" > configure.log 2>&1) || {
        tail -30 "$tree/build/configure.log" >&2; exit 1; }
    echo "${configure_args[*]}" > "$tree/build/.configured"
fi
say "building qemu-system-x86_64 (ninja -j$jobs; log: $tree/build/build.log)"
(cd "$tree/build" && ninja -j"$jobs" qemu-system-x86_64 > build.log 2>&1) || {
    grep -B2 -A10 -m3 'error' "$tree/build/build.log" >&2 || tail -30 "$tree/build/build.log" >&2
    exit 1; }

mkdir -p "$out"
cp "$tree/build/qemu-system-x86_64" "$binary.tmp"
mv "$binary.tmp" "$binary"
# Older keys are older patches: keep only this one.
find "$work" -mindepth 1 -maxdepth 1 -type d -regextype posix-extended \
     -regex '.*/[0-9a-f]{16}' ! -name "$key" -exec rm -rf {} +
say "built $binary in $(( $(date +%s) - start )) s"
"$binary" --version | head -1 >&2
echo "$binary"
