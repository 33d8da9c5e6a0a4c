#!/bin/sh
# The os stage's files as a tree whose bytes depend on the packages only (issue 21; docs/reproducible.md).
#
#   os_delta.sh begin          before the install: mark the time, list what the base holds
#   os_delta.sh end OUT        after it: copy what the install wrote or changed into OUT, owners and modes as
#                              they are; every time later than the mark becomes 0 (dpkg keeps a package's own
#                              times, which are already the same on every build)
#
# The os stage then COPYs OUT onto the base: a copied tree's layer holds its entries only, where a RUN's
# layer also holds what BuildKit wrote around the step (/etc where it bound the hosts files, /run, /run/secrets)
# with the times of the build. So the os layer is the same bytes on every rebuild, and the venv layers above it
# keep their chain: Docker reuses a pulled layer only when every layer under it is the same.
#
# Left out: the logs and ldconfig's aux-cache (they hold the time of the install), the cache mounts, what
# BuildKit mounts, /tmp. A file of the base that the install removed cannot be removed by a copy: it is
# named on stderr and stays (an upgraded package's file that its new version dropped).
# POSIX sh and the base's tools (find, sort, comm, awk, sed, xargs, tar, touch): no Python exists before the install.
set -eu

state=/tmp/torchyard-os-delta

listing() {
	find / -xdev \( -path /proc -o -path /sys -o -path /dev -o -path /run -o -path /tmp -o -path /var/tmp \
		-o -path /var/log -o -path /var/cache/apt -o -path /var/lib/apt/lists -o -path /var/cache/ldconfig/aux-cache \
		-o -path /etc/hosts -o -path /etc/hostname -o -path /etc/resolv.conf -o -path /etc/apt/apt.conf.d/99torchyard-ca \) \
		-prune -o "$@" -print
}

case "${1:-}" in
begin)
	rm -rf "$state"
	mkdir -p "$state"
	touch "$state/mark"
	listing | LC_ALL=C sort >"$state/before"
	;;
end)
	out="${2:?os_delta.sh end OUT}"
	[ -f "$state/mark" ] || { echo "os_delta.sh: no mark: run 'os_delta.sh begin' before the install" >&2; exit 2; }
	listing | LC_ALL=C sort >"$state/after"
	LC_ALL=C comm -23 "$state/before" "$state/after" >"$state/removed"
	if [ -s "$state/removed" ]; then
		echo "torchyard: the install removed $(wc -l <"$state/removed") file(s) of the base image; a copied layer keeps them:" >&2
		head -n 20 "$state/removed" >&2
	fi
	# What changed, with every directory above it (a copied parent keeps its real owner and mode).
	# (relative to /, so tar has no leading slash to strip; / itself is the tree's root)
	listing -cnewer "$state/mark" | LC_ALL=C awk -F/ '$0 != "/" { p = ""; for (i = 2; i < NF; i++) { p = p $i "/"; print substr(p, 1, length(p) - 1) } print substr($0, 2) }' \
		| LC_ALL=C sort -u >"$state/changed"
	mkdir -p "$out"
	tar --create --directory=/ --no-recursion --numeric-owner --verbatim-files-from --files-from="$state/changed" \
		--file="$state/tree.tar"
	tar --extract --same-permissions --same-owner --numeric-owner --directory="$out" --file="$state/tree.tar"
	rm -f "$state/tree.tar"
	# Which times to clear is read from the originals (nanoseconds): tar keeps whole seconds, so a copy written in
	# the mark's second would not look newer than it. Only what the tree holds (-cnewer): a base file whose time
	# lies in the future is not the install's.
	listing -cnewer "$state/mark" -newer "$state/mark" | sed "s|^|$out|" | xargs -r -d '\n' touch --no-dereference --date=@0
	touch --no-dereference --date=@0 "$out"
	;;
*)
	echo "usage: os_delta.sh begin | end OUT" >&2
	exit 2
	;;
esac
