#!/usr/bin/env bash
# tests/integration/test_third_party_offline.sh: third_party builds without a network from its
# cache alone, reproducibly, and never uses a cached file whose sha256 is not the pinned one.
# Prints TAP; exits 0 iff every case passed. Works on copies in a temp dir: the repo's build and
# cache stay as they are.
#
# The network is taken away with `unshare -n` (a new, empty network namespace), so "offline" is
# enforced by the kernel rather than trusted to the Makefile.
set -u
cd "$(dirname "$0")/../.." || exit 1
top=$PWD
cache=${TP_CACHE:-$top/third_party/cache}
# When run from `make check`, the outer make's jobserver must not leak into ours.
unset MAKEFLAGS MFLAGS MAKELEVEL
jobs=$(nproc 2>/dev/null || echo 2)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tp-offline.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

n=0 failed=0
result() { # 0|1 description [log]: one TAP line; on failure, the log's tail as TAP comments
	n=$((n + 1))
	if [ "$1" = 0 ]; then
		echo "ok $n - $2"
	else
		echo "not ok $n - $2"
		failed=$((failed + 1))
		[ -n "${3:-}" ] && [ -f "$3" ] && tail -n 15 "$3" | sed 's/^/#   /'
	fi
}
# tp_make LOG ARGS...: make -C <copy>/third_party with no network at all
tp_make() {
	local log=$1
	shift
	"${netless[@]}" make -j"$jobs" -C "$tmp/third_party" "$@" >"$log" 2>&1
}
# pinned FILE-PATTERN: a file name from the lock (the lock is read, never hard-coded here)
pinned() { awk -v pat="$1" '!/^[[:space:]]*#/ && $3 ~ pat { print $3; exit }' "$tmp/third_party/sources.lock"; }

echo "1..10"

# Root makes a network namespace directly; otherwise a user namespace brings the right to.
if [ "$(id -u)" = 0 ]; then netless=(unshare -n); else netless=(unshare -rn); fi
"${netless[@]}" true 2>/dev/null
result $? "${netless[*]} works here (the network can be taken away)"

# The copy: the glue as committed plus the cache; fill the cache first if it is incomplete
# (that needs a Debian mirror once; everything after this runs without a network).
cp -a "$top/third_party" "$tmp/"
rm -rf "$tmp/third_party/cache"
if ! OFFLINE=1 TP_CACHE=$cache TP_STATE=$tmp/apt "$top/third_party/fetch.sh" get >"$tmp/prep.log" 2>&1; then
	make -C "$top/third_party" fetch OUT="$tmp/prep-out" TP_CACHE="$cache" >>"$tmp/prep.log" 2>&1
fi
cp -a "$cache" "$tmp/third_party/cache" 2>/dev/null
OFFLINE=1 TP_LOCK=$tmp/third_party/sources.lock TP_CACHE=$tmp/third_party/cache TP_STATE=$tmp/apt \
	"$tmp/third_party/fetch.sh" get >>"$tmp/prep.log" 2>&1
result $? "every pinned file is in the cache and matches sources.lock" "$tmp/prep.log"

# 1. A clean offline build produces the three libraries and their headers.
tp_make "$tmp/build.log" OFFLINE=1 OUT="$tmp/out"
result $? "make OFFLINE=1 under ${netless[*]} succeeds on a clean output dir" "$tmp/build.log"
missing=""
for f in lib/libbearssl.a lib/libcap.a lib/libprotobuf-c.a include/bearssl.h \
	include/sys/capability.h include/protobuf-c/protobuf-c.h src/protobuf-c/protobuf-c/protobuf-c.c; do
	[ -s "$tmp/out/$f" ] || missing="$missing $f"
done
[ -z "$missing" ]
result $? "libbearssl.a, libcap.a, libprotobuf-c.a, headers and sources are in OUT${missing:+ (missing:$missing)}"

# 2. A second run has nothing to do (make -q: exit 0 iff everything is up to date).
tp_make "$tmp/again.log" -q OFFLINE=1 OUT="$tmp/out"
result $? "a second make is a no-op" "$tmp/again.log"

# 3. Reproducible: a second clean build at another path gives bit-identical archives.
tp_make "$tmp/repro.log" OFFLINE=1 OUT="$tmp/elsewhere/deeper/out"
differ=""
for a in libbearssl.a libcap.a libprotobuf-c.a; do
	cmp -s "$tmp/out/lib/$a" "$tmp/elsewhere/deeper/out/lib/$a" || differ="$differ $a"
done
[ -z "$differ" ]
result $? "a clean build at another path gives bit-identical archives${differ:+ (differ:$differ)}" "$tmp/repro.log"

# 4. One flipped byte in a cached file: a hard error naming the file, offline or not. With
#    OFFLINE=0 it must not be "repaired" by a download either: a wrong file is never used.
bad=$(pinned 'libcap2_.*debian\.tar')
cp -a "$tmp/third_party/cache" "$tmp/bad-cache"
printf '\x00' | dd of="$tmp/bad-cache/$bad" bs=1 seek=100 conv=notrunc status=none
for offline in 1 0; do
	if tp_make "$tmp/bad$offline.log" OFFLINE=$offline OUT="$tmp/out-bad$offline" TP_CACHE="$tmp/bad-cache"; then
		result 1 "OFFLINE=$offline: make fails on a corrupted cached $bad (it succeeded)" "$tmp/bad$offline.log"
	else
		grep -q "sha256 mismatch: .*$bad" "$tmp/bad$offline.log"
		result $? "OFFLINE=$offline: make fails on a corrupted cached file, naming $bad" "$tmp/bad$offline.log"
	fi
done
[ ! -e "$tmp/out-bad1/src/libcap2" ] && [ ! -e "$tmp/out-bad0/src/libcap2" ]
result $? "the corrupted package was never unpacked"

# 5. A missing cached file with OFFLINE=1: an error naming the file and how to pre-stage it.
gone=$(pinned 'protobuf-c_.*orig\.tar')
cp -a "$tmp/third_party/cache" "$tmp/short-cache"
rm -f "$tmp/short-cache/$gone"
if tp_make "$tmp/short.log" OFFLINE=1 OUT="$tmp/out-short" TP_CACHE="$tmp/short-cache"; then
	result 1 "OFFLINE=1: make fails when $gone is not cached (it succeeded)" "$tmp/short.log"
else
	grep -q "^  $gone\$" "$tmp/short.log" && grep -q 'make -C third_party fetch' "$tmp/short.log"
	result $? "OFFLINE=1: a missing $gone is named, with how to pre-stage it" "$tmp/short.log"
fi

[ "$failed" = 0 ]
