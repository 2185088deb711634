#!/usr/bin/env bash
# third_party/fetch.sh: get, verify and unpack the Debian packages pinned in sources.lock (source
# packages) and kernel.lock (binary packages: the VM runtime's guest kernel).
#
#   fetch.sh get              every file of sources.lock present in the cache and sha256-verified;
#                             what is missing is downloaded (never with OFFLINE=1)
#   fetch.sh unpack PKG DIR   verify PKG's files again, then build DIR from the orig tarball, the
#                             debian tarball and debian/patches/series
#   fetch.sh bump             move every pin to the version Debian serves now; rewrite sources.lock
#   fetch.sh get-deb          the same as get for the binary .debs of kernel.lock (apt-get download)
#   fetch.sh unpack-deb PKG DIR  verify PKG's .deb again, then dpkg-deb -x it into DIR
#
# Environment (third_party/Makefile and the top Makefile's vm-kernel set all of it):
#   TP_LOCK   the lock file                  (default: sources.lock, or kernel.lock for *-deb,
#                                             next to this script)
#   TP_CACHE  where fetched files are kept   (default: cache/ next to this script)
#   TP_STATE  private apt state: sources, lists, downloads (default: ../build/third_party/apt, or
#             ../build/vm-fetch/apt for *-deb: a deb and a deb-src index never share one)
#   OFFLINE   1 = the network is never touched; the cache is all there is
#
# Downloads go through apt with a private sources list and private lists/cache dirs, so apt
# verifies the signed Release files and every file's hash, and the system's apt state is not
# touched. The lock then pins the exact bytes, so a cache pre-staged from anywhere is safe to use.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
case ${1:-} in
*-deb)
	lock=${TP_LOCK:-$here/kernel.lock}
	state=${TP_STATE:-$here/../build/vm-fetch/apt}
	;;
*)
	lock=${TP_LOCK:-$here/sources.lock}
	state=${TP_STATE:-$here/../build/third_party/apt}
	;;
esac
cache=${TP_CACHE:-$here/cache}
offline=${OFFLINE:-0}
export LC_ALL=C

die() { printf 'third_party: error: %s\n' "$*" >&2; exit 1; }
say() { printf 'third_party: %s\n' "$*" >&2; }

# ---- the lock ----------------------------------------------------------------------------------

# lock_lines [PKG]: "package version file sha256" for every entry (of PKG), comments dropped.
lock_lines() {
	awk -v p="${1:-}" '!/^[[:space:]]*(#|$)/ && (p == "" || $1 == p) { print $1, $2, $3, $4 }' "$lock"
}
packages() { lock_lines | awk '!seen[$1]++ { print $1 }'; }
pin_of() { lock_lines "$1" | awk 'NR == 1 { print $2 }'; }

# A malformed lock must fail loudly, not verify fewer files than it seems to.
check_lock() {
	[ -f "$lock" ] || die "no lock file at $lock"
	awk '!/^[[:space:]]*(#|$)/ {
		if (NF != 4 || length($4) != 64 || $4 ~ /[^0-9a-f]/) { printf "%s:%d: want: package version file sha256\n", FILENAME, FNR; bad = 1 }
		if (($1 in ver) && ver[$1] != $2) { printf "%s:%d: %s pinned at two versions\n", FILENAME, FNR, $1; bad = 1 }
		ver[$1] = $2
	} END { exit bad }' "$lock" >&2 || die "malformed $lock"
}

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

# verify FILE SHA256: a file that is not the pinned one is never used, and never silently replaced.
verify() {
	local got
	got=$(sha_of "$1")
	[ "$got" = "$2" ] || die "sha256 mismatch: $1
  ${lock##*/} says $2
  the file has    $got
  The file is not used. Delete it to fetch it again, or put the pinned file in its place."
}

# ---- private apt setup (network) ---------------------------------------------------------------

apt_opts=()
apt_ready=0

# apt drops privileges to _apt for downloads; let it write where it must, or it warns and
# downloads as root.
apt_owns() {
	if [ "$(id -u)" = 0 ] && getent passwd _apt >/dev/null; then chown _apt "$@" 2>/dev/null || true; fi
}

# apt_setup [TYPE]: a private index of the system's mirrors, deb-src (the default) or deb.
apt_setup() {
	local type=${1:-deb-src} list
	[ "$offline" = 1 ] && die "this needs a Debian mirror, and OFFLINE=1 forbids the network"
	[ "$apt_ready" = 1 ] && return 0
	mkdir -p "$state/lists/partial" "$state/cache"
	apt_owns "$state/lists/partial"
	# The same mirrors and keyrings the system uses, as TYPE. Copied, never edited in place.
	if [ -f /etc/apt/sources.list.d/debian.sources ]; then
		list=$state/$type.sources
		sed -E "s/^Types:.*/Types: $type/" /etc/apt/sources.list.d/debian.sources >"$list"
	elif [ -f /etc/apt/sources.list ]; then
		list=$state/$type.list
		sed -nE "s/^deb[[:space:]]+/$type /p" /etc/apt/sources.list >"$list"
	else
		die "no /etc/apt/sources.list.d/debian.sources or /etc/apt/sources.list to take mirrors from"
	fi
	# Dir::Cache too: apt would otherwise write its package caches to /var/cache/apt.
	apt_opts=(-o "Dir::Etc::SourceList=$list" -o Dir::Etc::SourceParts=/dev/null
		-o "Dir::State::Lists=$state/lists" -o "Dir::Cache=$state/cache")
	say "updating the private $type index in $state"
	# --error-on=any: by default a mirror that cannot be reached is only a warning, and the
	# "version not served" diagnosis below would then be wrong.
	apt-get -qq --error-on=any "${apt_opts[@]}" update >&2 ||
		die "apt-get update failed (no network?). Offline, build with OFFLINE=1 from a pre-staged cache."
	apt_ready=1
}

served_versions() { # PKG: the versions Debian serves now, newest first
	local vs
	mapfile -t vs < <(apt-cache "${apt_opts[@]}" showsrc --only-source "$1" 2>/dev/null |
		awk '/^Version:/ { print $2 }' | sort -u)
	newest_first "${vs[@]}"
}

newest_first() { # dpkg's version order, not the shell's
	local out=() v i
	for v in "$@"; do
		i=0
		while [ "$i" -lt "${#out[@]}" ] && dpkg --compare-versions "${out[$i]}" ge "$v"; do i=$((i + 1)); done
		out=("${out[@]:0:$i}" "$v" "${out[@]:$i}")
	done
	[ "${#out[@]}" -eq 0 ] || printf '%s\n' "${out[@]}"
}

# download PKG [VERSION]: apt-get source into a fresh private dir; prints that dir.
download() {
	local spec=$1 dl=$state/dl/$1
	[ -n "${2:-}" ] && spec=$1=$2
	rm -rf "$dl" && mkdir -p "$dl"
	apt_owns "$dl"
	# --download-only: no dpkg-source run (we unpack ourselves, from verified files only).
	if (cd "$dl" && apt-get -q "${apt_opts[@]}" source --download-only --only-source "$spec") \
		>"$dl.log" 2>&1; then
		echo "$dl"
		return 0
	fi
	return 1
}

# fetch_pinned PKG: the pinned files of PKG into the cache, each verified against the lock.
fetch_pinned() {
	local pkg=$1 ver dl served _p _v f sha
	ver=$(pin_of "$pkg")
	say "fetching $pkg $ver"
	if ! dl=$(download "$pkg" "$ver"); then
		served=$(served_versions "$pkg" | paste -sd' ')
		case " $served " in
		"  " | *" $ver "*) die "apt-get source $pkg=$ver failed (Debian serves: ${served:-nothing}):
$(sed 's/^/  | /' "$state/dl/$pkg.log")" ;;
		esac
		die "$pkg $ver is pinned but Debian no longer serves it, and it is not in $cache.
  Debian now serves: $pkg $served  (newest first)
  To move the pins (review it and commit it on its own): make -C third_party bump
  Or pre-stage the pinned files listed in sources.lock into $cache
  (e.g. from https://snapshot.debian.org/package/$pkg/)."
	fi
	mkdir -p "$cache"
	while read -r _p _v f sha; do
		[ -f "$dl/$f" ] || die "apt-get source $pkg=$ver did not deliver $f (see $state/dl/$pkg.log)"
		verify "$dl/$f" "$sha"
		cp "$dl/$f" "$cache/.$f.tmp" && mv -f "$cache/.$f.tmp" "$cache/$f"
	done < <(lock_lines "$pkg")
	rm -rf "$dl" "$dl.log"
}

# ---- binary packages (kernel.lock): apt-get download --------------------------------------------

# download_deb PKG VERSION: apt-get download into a fresh private dir; prints that dir.
download_deb() {
	local dl=$state/dl/$1
	rm -rf "$dl" && mkdir -p "$dl"
	apt_owns "$dl" # else apt warns that it downloads unsandboxed as root
	if (cd "$dl" && apt-get -q "${apt_opts[@]}" download "$1=$2") >"$dl.log" 2>&1; then
		echo "$dl"
		return 0
	fi
	return 1
}

# fetch_pinned_deb PKG: PKG's pinned .deb into the cache, verified against the lock.
fetch_pinned_deb() {
	local pkg=$1 ver dl served _p _v f sha
	ver=$(pin_of "$pkg")
	say "fetching $pkg $ver"
	if ! dl=$(download_deb "$pkg" "$ver"); then
		served=$(apt-cache "${apt_opts[@]}" madison "$pkg" 2>/dev/null | awk -F' *[|] *' '{ print $2 }' | paste -sd' ')
		case " $served " in
		"  " | *" $ver "*) ;;
		*) die "$pkg $ver is pinned but Debian no longer serves it, and it is not in $cache.
  Debian now serves: $pkg ${served}
  Move the pin (see the comment at the top of $lock; review it and commit it on its own),
  or pre-stage the pinned file listed there into $cache
  (e.g. from https://snapshot.debian.org/binary/$pkg/)." ;;
		esac
		die "apt-get download $pkg=$ver failed (Debian serves: ${served:-nothing}; for a kernel, a new
  ABI is a new package name: see the comment at the top of $lock):
$(sed 's/^/  | /' "$state/dl/$pkg.log")"
	fi
	mkdir -p "$cache"
	while read -r _p _v f sha; do
		[ -f "$dl/$f" ] || die "apt-get download $pkg=$ver did not deliver $f (see $state/dl/$pkg.log)"
		verify "$dl/$f" "$sha"
		cp "$dl/$f" "$cache/.$f.tmp" && mv -f "$cache/.$f.tmp" "$cache/$f"
	done < <(lock_lines "$pkg")
	rm -rf "$dl" "$dl.log"
}

# ---- commands -----------------------------------------------------------------------------------

# cmd_get [deb]: the source packages of the lock, or (deb) its binary packages.
cmd_get() {
	local kind=${1:-src} pkg _p _v f sha missing=() want=()
	check_lock
	for pkg in $(packages); do
		while read -r _p _v f sha; do
			if [ -f "$cache/$f" ]; then
				verify "$cache/$f" "$sha"
			else
				missing+=("$f")
				case " ${want[*]-} " in *" $pkg "*) ;; *) want+=("$pkg") ;; esac
			fi
		done < <(lock_lines "$pkg")
	done
	[ "${#missing[@]}" -eq 0 ] && return 0
	if [ "$offline" = 1 ]; then
		die "OFFLINE=1 and these pinned files are not in the cache $cache:
$(printf '  %s\n' "${missing[@]}")
  Pre-stage them: on a machine that reaches a Debian mirror run
    $([ "$kind" = deb ] && echo 'make vm-kernel' || echo 'make -C third_party fetch')
  and copy third_party/cache/ here (or point TP_CACHE=DIR at a copy). Every file is checked
  against ${lock##*/}, so it does not matter where the files come from."
	fi
	if [ "$kind" = deb ]; then
		apt_setup deb
		for pkg in "${want[@]}"; do fetch_pinned_deb "$pkg"; done
	else
		apt_setup
		for pkg in "${want[@]}"; do fetch_pinned "$pkg"; done
	fi
}

# cmd_unpack_deb PKG DIR: PKG's one .deb verified again, then unpacked (dpkg-deb -x, no scripts
# run) into DIR, built aside and moved into place.
cmd_unpack_deb() {
	local pkg=${1:?usage: fetch.sh unpack-deb PKG DIR} dest=${2:?usage: fetch.sh unpack-deb PKG DIR}
	local _p _v f sha deb='' n=0
	check_lock
	[ -n "$(pin_of "$pkg")" ] || die "$pkg is not in $lock"
	while read -r _p _v f sha; do
		case $f in *.deb) ;; *) die "$f: a binary package's lock line names its .deb" ;; esac
		[ -f "$cache/$f" ] || die "not in the cache: $cache/$f (make vm-kernel fetches it)"
		verify "$cache/$f" "$sha"
		deb=$cache/$f n=$((n + 1))
	done < <(lock_lines "$pkg")
	[ "$n" = 1 ] || die "$pkg: $lock must pin exactly one .deb for it (it pins $n)"
	rm -rf "$dest.tmp" && mkdir -p "$dest.tmp"
	dpkg-deb -x "$deb" "$dest.tmp" || die "dpkg-deb -x $deb failed"
	rm -rf "$dest" && mv "$dest.tmp" "$dest"
}

cmd_unpack() {
	local pkg=${1:?usage: fetch.sh unpack PKG DIR} dest=${2:?usage: fetch.sh unpack PKG DIR}
	local _p _v f sha orig='' deb='' tmp strip=0 name level
	check_lock
	[ -n "$(pin_of "$pkg")" ] || die "$pkg is not in $lock"
	while read -r _p _v f sha; do
		[ -f "$cache/$f" ] || die "not in the cache: $cache/$f (make -C third_party fetch)"
		verify "$cache/$f" "$sha"
		case $f in
		*.dsc) ;;
		*.orig.tar.*) orig=$cache/$f ;;
		*.debian.tar.*) deb=$cache/$f ;;
		*) die "$f: only .dsc, .orig.tar.* and .debian.tar.* files are handled" ;;
		esac
	done < <(lock_lines "$pkg")
	if [ -z "$orig" ] || [ -z "$deb" ]; then
		die "$pkg: sources.lock needs an .orig.tar.* and a .debian.tar.* file"
	fi

	# Built aside and moved into place, so DIR is either complete or absent.
	tmp=$dest.tmp
	rm -rf "$tmp" && mkdir -p "$tmp"
	# Like dpkg-source: one top-level directory in the orig tarball is the source root.
	[ "$(tar -tf "$orig" | cut -d/ -f1 | sort -u | wc -l)" = 1 ] && strip=1
	tar -xf "$orig" -C "$tmp" --strip-components=$strip --no-same-owner
	rm -rf "$tmp/debian" # the debian tarball replaces any upstream debian/, as with dpkg-source
	tar -xf "$deb" -C "$tmp" --no-same-owner
	# Debian's patches are part of the pinned version (libcap2's carry security fixes).
	if [ -f "$tmp/debian/patches/series" ]; then
		while read -r name level; do
			patch -d "$tmp" "${level:--p1}" --batch --forward --no-backup-if-mismatch --quiet \
				<"$tmp/debian/patches/$name" || die "$pkg: debian patch $name does not apply"
		done < <(sed -e 's/#.*//' "$tmp/debian/patches/series" | awk 'NF')
	fi
	rm -rf "$dest" && mv "$tmp" "$dest"
}

cmd_bump() {
	local pkg dl dsc ver old f sha new changed=0
	check_lock
	apt_setup
	new=$state/sources.lock.new
	mkdir -p "$cache"
	awk '!/^[[:space:]]*#/ { exit } { print }' "$lock" >"$new" # keep the header comment
	for pkg in $(packages); do
		old=$(pin_of "$pkg")
		dl=$(download "$pkg") || die "apt-get source $pkg failed:
$(sed 's/^/  | /' "$state/dl/$pkg.log")"
		dsc=$(find "$dl" -maxdepth 1 -name '*.dsc' | head -n 2)
		[ "$(printf '%s\n' "$dsc" | wc -l)" = 1 ] || die "$pkg: expected exactly one .dsc in $dl"
		ver=$(awk '/^Version:/ { print $2; exit }' "$dsc")
		[ -n "$ver" ] || die "$dsc has no Version field"
		# The .dsc first, then the files it lists. apt checked all of them against the signed
		# index; the .dsc's own sha256 lines are checked here as well, cheaply.
		printf '%s %s %s %s\n' "$pkg" "$ver" "${dsc##*/}" "$(sha_of "$dsc")" >>"$new"
		while read -r sha f; do
			[ -f "$dl/$f" ] || die "$pkg: $f is listed in ${dsc##*/} but was not downloaded"
			verify "$dl/$f" "$sha"
			printf '%s %s %s %s\n' "$pkg" "$ver" "$f" "$sha" >>"$new"
		done < <(awk '/^Checksums-Sha256:/ { on = 1; next } on && /^ / { print $1, $3; next } { on = 0 }' "$dsc")
		for f in "$dl"/*; do cp "$f" "$cache/.${f##*/}.tmp" && mv -f "$cache/.${f##*/}.tmp" "$cache/${f##*/}"; done
		rm -rf "$dl" "$dl.log"
		if [ "$old" = "$ver" ]; then
			say "$pkg stays at $ver"
		else
			say "$pkg moves from $old to $ver"
			changed=1
		fi
	done
	# Never install a lock that would fail the next build. (The subshell checks the new file.)
	# shellcheck disable=SC2030
	(lock=$new && check_lock)
	# shellcheck disable=SC2031
	mv -f "$new" "$lock"
	if [ "$changed" = 1 ]; then
		say "sources.lock rewritten. Review 'git diff third_party/sources.lock' and commit it on its own."
	else
		say "sources.lock: every pin is already what Debian serves (hashes re-checked)."
	fi
}

case ${1:-} in
get) cmd_get ;;
unpack) shift && cmd_unpack "$@" ;;
bump) cmd_bump ;;
get-deb) cmd_get deb ;;
unpack-deb) shift && cmd_unpack_deb "$@" ;;
*) die "usage: fetch.sh get | unpack PKG DIR | bump | get-deb | unpack-deb PKG DIR" ;;
esac
