#!/usr/bin/env bash
# verify-container-security.sh: the sanitized verifier, with the reference's interface.
#
#   tools/verify-container-security.sh                  a temporary sandbox, verified, removed
#   AGENTIC_SECURITY_IMAGE=agentic/base:local tools/verify-container-security.sh
#   tools/verify-container-security.sh --json           the same, one JSON object
#   tools/verify-container-security.sh NAME... | --all | --container ID   what `agentic verify` checks
#
# Without a sandbox named (no NAME, --all or --container), it provisions a temporary sandbox
# from AGENTIC_SECURITY_IMAGE (default agentic/base:local) through the agenticd answering on
# AGENTIC_ADMIN_SOCKET (default /run/agentic/admin.sock), runs `agentic verify` on it with the
# arguments given (--json, --junit FILE) and removes it. When no agenticd answers there, it
# starts a private one (root only) on sockets, an agentshare and a subnet pool in a temp dir of
# its own (under $TMPDIR, default /tmp), and removes all of it afterwards: the sandbox, the
# daemon's networks, its mounts, the temp dir. With a sandbox named, the arguments go to
# `agentic verify` unchanged.
#
# AGENTIC_REQUIRE_DEDICATED_AGENTSHARE=1 makes the check that the agentshare root is on a device
# other than `/`'s (AGV-041, otherwise INFO) a boundary: `agentic verify` reads it from the
# environment (it is --require-dedicated-agentshare).
#
# It prints only what `agentic verify` prints (pass/fail evidence, never an env value, token,
# transcript byte or host inventory) and its own failures on stderr. Exit status as the CLI's:
# 0 every check passed, 1 a check failed, 2 it could not run (no agenticd and no way to start
# one, no engine, a sandbox that could not be made, bad arguments).
set -u
me=verify-container-security.sh
here=$(cd "$(dirname "$0")" && pwd)
image=${AGENTIC_SECURITY_IMAGE:-agentic/base:local}
sock=${AGENTIC_ADMIN_SOCKET:-/run/agentic/admin.sock}

bin=${AGENTIC_BIN:-}
if [ -z "$bin" ]; then
	for c in "$here/agentic" "$here/../agentic"; do
		if [ -x "$c" ] && [ ! -d "$c" ]; then
			bin=$c
			break
		fi
	done
fi
if [ -z "$bin" ]; then
	bin=$(command -v agentic) || {
		echo "$me: cannot find the agentic binary (set AGENTIC_BIN)" >&2
		exit 2
	}
fi

# Does the caller name what to verify? Then the arguments are all `agentic verify`'s.
named=0 skip=
for a in "$@"; do
	case $skip in
	socket) sock=$a skip=; continue ;;
	1) skip=; continue ;;
	esac
	case $a in
	-h | --help)
		sed -n '2,/^set -u/p' "$0" | sed '$d; s/^# \{0,1\}//'
		exit 0 ;;
	--all | --container=*) named=1 ;;
	--container) named=1 skip=1 ;;
	--junit) skip=1 ;;
	--socket) skip=socket ;;
	-*) ;;
	*) named=1 ;;
	esac
done

run_verify() { "$bin" verify "$@"; }

# the socket a --socket names is the agenticd to provision through, too (the CLI is given the
# same one through the environment, and an argument of its own wins anyway)
export AGENTIC_ADMIN_SOCKET=$sock
if [ "$named" = 1 ]; then
	run_verify "$@"
	exit $?
fi

# ---- a temporary sandbox ----
rid=$(od -An -N4 -tx1 /dev/urandom | tr -d ' \n')
name=verify-$rid
tmp= dpid= made=0

answers() { AGENTIC_ADMIN_SOCKET=$1 "$bin" ls >/dev/null 2>&1; }

cleanup() {
	local ok=0 m
	if [ "$made" = 1 ]; then
		"$bin" rm --force "$name" >/dev/null 2>&1 || ok=1
	fi
	if [ -n "$dpid" ]; then
		kill -TERM "$dpid" 2>/dev/null
		wait "$dpid" 2>/dev/null
	fi
	if [ -n "$tmp" ]; then
		# a container the daemon could not remove, by the label only this run carries
		m=$(docker ps -aq --filter "label=verify-run=$rid" 2>/dev/null)
		[ -z "$m" ] || docker rm -f $m >/dev/null 2>&1
		"$here/remove-daemon-networks" "$tmp/agenticd.log"
		for m in $(awk -v d="$tmp/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r); do
			umount -l "$m" 2>/dev/null
		done
		rm -rf --one-file-system "$tmp" || ok=1
	fi
	return $ok
}

if ! answers "$sock"; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "$me: no agenticd answers on $sock, and a private one needs root" >&2
		exit 2
	fi
	if ! docker version >/dev/null 2>&1; then
		echo "$me: no agenticd answers on $sock, and no Docker engine answers to start one" >&2
		exit 2
	fi
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/agentic-verify-XXXXXX") || exit 2
	trap 'cleanup; exit 2' INT TERM HUP
	# a /16 of 10.200-249.0.0 that no network on the engine uses yet
	used=" $(docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' \
		$(docker network ls -q) 2>/dev/null | tr '\n' ' ') "
	for _ in $(seq 1 50); do
		octet=$((200 + $(od -An -N1 -tu1 /dev/urandom | tr -d ' ') % 50))
		case $used in *" 10.$octet."*) ;; *) break ;; esac
	done
	# a control uid window of its own, far from the default allocation's start
	uidmin=$((700000 + ($(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 90) * 1000))
	sock=$tmp/run/admin.sock
	export AGENTIC_ADMIN_SOCKET=$sock
	cat >"$tmp/agenticd.conf" <<-EOF
	agent_socket_dir = $tmp/run/agent
	admin_socket = $sock
	agentshare_root = $tmp/share
	state_dir = $tmp/state
	default_image = $image
	sandbox_subnet_pool = 10.$octet.0.0/16
	control_uid_min = $uidmin
	control_uid_max = $((uidmin + 999))
	default_disk_bytes = 64m
	ready_timeout_ms = 30000
	stop_grace_ms = 1000
	EOF
	"$bin" agenticd -c "$tmp/agenticd.conf" >"$tmp/agenticd.log" 2>&1 &
	dpid=$!
	for _ in $(seq 1 600); do
		grep -q 'msg=ready ' "$tmp/agenticd.log" && break
		kill -0 "$dpid" 2>/dev/null || break
		sleep 0.1
	done
	if ! grep -q 'msg=ready ' "$tmp/agenticd.log"; then
		echo "$me: the private agenticd did not start:" >&2
		grep -E 'level=(error|warn)|^[^ ]+:[0-9]+:' "$tmp/agenticd.log" | tail -n 5 >&2
		dpid=
		cleanup
		exit 2
	fi
fi

trap 'cleanup; exit 2' INT TERM HUP
if ! err=$("$bin" create --name "$name" --image "$image" --label "verify-run=$rid" \
	--disk 64m 2>&1 >/dev/null); then
	echo "$me: cannot provision a sandbox from $image:" >&2
	sed -n 1,5p <<<"$err" >&2
	made=1
	cleanup
	exit 2
fi
made=1
run_verify "$@" "$name"
rc=$?
if ! cleanup; then
	echo "$me: the temporary sandbox $name could not be removed" >&2
	[ "$rc" -ne 0 ] || rc=2
fi
exit "$rc"
