# SPDX-License-Identifier: GPL-2.0
# shellcheck shell=sh
#
# debian-mirror.sh: sourced, not run (by install-kernel.sh, debian-apt.sh and
# debian-root.sh). Suites the machine's apt sources lack are fetched from the mirror its own
# entries name, so a machine behind a local mirror or proxy never reaches for deb.debian.org
# by itself.

# mirror_of SUITE: "URI KEYRING" of the first sources entry (deb822 .sources or one-line
# .list) that lists SUITE; the keyring may be empty. Nothing when no entry lists it.
mirror_of() {
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		awk -v want="$1" '
			function flush() {
				if (types ~ /(^| )deb( |$)/ && (" " suites " ") ~ (" " want " ") && uri != "") {
					print uri " " key
					found = 1
					exit
				}
				types = suites = uri = key = ""
			}
			/^[ \t]*$/ { flush(); next }
			/^[ \t]*#/ { next }
			tolower($1) == "types:" { $1 = ""; types = substr($0, 2) }
			tolower($1) == "suites:" { $1 = ""; suites = substr($0, 2) }
			tolower($1) == "uris:" { uri = $2 }
			tolower($1) == "signed-by:" { key = $2 }
			END { if (!found) flush() }
		' "$f"
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		# deb [options] URI SUITE components...
		sed -n "s/^[ \t]*deb[ \t]\+\(\[[^]]*\][ \t]\+\)\?\([^ \t]\+\)[ \t]\+$1[ \t].*/\2 /p" "$f"
	done
}
