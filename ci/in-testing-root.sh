#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# in-testing-root.sh CMD [ARGS...]: ci/in-debian-root.sh testing: CMD in the Debian testing
# root of ci/debian-root.sh (gcc-16, pahole; the module build only; made first if need be),
# with the repository and /var/cache/vballoon at their own paths. Exits with CMD's status
# (125: the root could not be entered).
exec "$(dirname "$0")/in-debian-root.sh" testing "$@"
