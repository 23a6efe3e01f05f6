#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# install-kernel-6.12.sh: `ci/install-kernel.sh 6.12` (Debian's 6.12 as Debian 12 gets it),
# under the name ci/test.sh, ci/kernel-matrix.sh and ci/install-deps.sh call it by.
exec "$(dirname "$0")/install-kernel.sh" 6.12 "$@"
