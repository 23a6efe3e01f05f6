#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# in-trixie-root.sh CMD [ARGS...]: ci/in-debian-root.sh trixie: CMD in the Debian 13 root
# of ci/debian-root.sh (gcc-14, glibc 2.41, pahole 1.30; made first if need be), with the
# repository and /var/cache/vballoon at their own paths. Exits with CMD's status (125: the
# root could not be entered).
exec "$(dirname "$0")/in-debian-root.sh" trixie "$@"
