#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# trixie-apt.sh <apt-get|apt-cache> ARGS...: ci/debian-apt.sh over Debian 13 (trixie,
# trixie-updates, trixie-security, trixie-backports), its configuration in
# /var/cache/vballoon/apt-trixie/ (apt-get -c /var/cache/vballoon/apt-trixie/apt.conf by
# hand). The old name, for typing by hand and for older notes; the scripts call
# ci/debian-apt.sh.
exec "$(dirname "$0")/debian-apt.sh" trixie "$@"
