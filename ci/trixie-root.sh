#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# trixie-root.sh: ci/debian-root.sh's Debian 13 root (gcc-14, glibc 2.41, pahole 1.30; the
# module, DKMS and the userspace build), made once and cached under
# /var/cache/vballoon/roots/trixie-<hash>/; prints its path. The old name, for typing by
# hand and for older notes; the scripts call ci/debian-root.sh.
exec "$(dirname "$0")/debian-root.sh" trixie
