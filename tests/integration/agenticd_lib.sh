# agenticd_lib.sh: runs a private agenticd for an integration test (sourced after lib.sh).
# Everything lives under one temp dir; sandboxes carry the label test-run=$RUN_ID and the
# daemon's networks its owner label, so the trap removes exactly what the test made, however it
# ended. Each daemon draws subnets from a /16 of its own.
DOCKER_SOCK=/var/run/docker.sock
IMAGE=agentic/loadout:local
PROBE_CONNECT=$AGENTIC_TOP/build/musl/probe/agent_connect

ad_require() { # exits with a SKIP when the engine or the image is missing
	if ! curl -sf --max-time 2 --unix-socket "$DOCKER_SOCK" http://docker/_ping >/dev/null 2>&1; then
		echo "ok 1 # SKIP no Docker engine answers on $DOCKER_SOCK (tools/dockerd-up starts one)"
		exit 0
	fi
	if [ "$(id -u)" -ne 0 ]; then
		echo "ok 1 # SKIP agenticd runs as root"
		exit 0
	fi
	if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
		echo "not ok 1 - image $IMAGE is present (make images)"
		exit 1
	fi
	if [ ! -x "$PROBE_CONNECT" ]; then
		echo "not ok 1 - $PROBE_CONNECT is built (make test-build)"
		exit 1
	fi
}

# ad_setup [config lines...]: a fresh temp dir and config (extra lines appended).
ad_setup() {
	T=$(mktemp -d /tmp/agt-XXXXXX)
	chmod 0755 "$T" # host users reach what the test loosens below it, nothing else
	RUN_ID=$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')
	# a /16 no network on the engine uses yet, nor another test's daemon that has not made one
	# yet: daemons of other runs may share the engine (agenticd skips what they take, but a
	# pool of its own keeps each test's numbers its own)
	local used i
	used=" $(docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}} {{end}}' \
		$(docker network ls -q) 2>/dev/null | tr '\n' ' ') $(sed -n \
		's/^sandbox_subnet_pool = //p' /tmp/agt-*/agenticd.conf 2>/dev/null | tr '\n' ' ') "
	for i in $(seq 1 50); do
		POOL_OCTET=$((200 + $(od -An -N1 -tu1 /dev/urandom | tr -d ' ') % 50))
		case $used in *" 10.$POOL_OCTET."*) ;; *) break ;; esac
	done
	SOCK=$T/run/admin.sock
	AGENT_SOCK=$T/run/agent/agent.sock
	CONF=$T/agenticd.conf
	LOG=$T/agenticd.log
	DPID=
	export AGENTIC_ADMIN_SOCKET=$SOCK
	cat >"$CONF" <<-EOF
	agent_socket_dir = $T/run/agent
	admin_socket = $SOCK
	agentshare_root = $T/share
	state_dir = $T/state
	default_image = $IMAGE
	sandbox_subnet_pool = 10.$POOL_OCTET.0.0/16
	ready_timeout_ms = 8000
	stop_grace_ms = 2000
	default_disk_bytes = 64m
	EOF
	for line in "$@"; do echo "$line" >>"$CONF"; done
	trap ad_cleanup EXIT
}

ad_cleanup() {
	local ids n share rec
	[ -z "$DPID" ] || kill -9 "$DPID" 2>/dev/null
	# a VM's QEMU outlives its agenticd by design: this daemon's, by their records
	for rec in "$T"/state/vm/*/vm.rec; do
		[ -f "$rec" ] || continue
		n=$(awk '$1 == "pid" { print $2 }' "$rec")
		# that pid still the QEMU that started then (its start time, field 22 of stat)
		[ "${n:-0}" -gt 1 ] 2>/dev/null &&
			[ "$(awk '{ print $22 }' /proc/"$n"/stat 2>/dev/null)" = "$(awk '$1 == "start" { print $2 }' "$rec")" ] &&
			kill -9 "$n" 2>/dev/null
	done
	ids=$(docker ps -aq --filter "label=test-run=$RUN_ID")
	[ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1
	# only this daemon's networks (by its owner label): a pool's octet may be another run's too
	"$AGENTIC_TOP/tools/remove-daemon-networks" "$LOG"
	for n in ${EXTRA_NETWORKS:-}; do docker network rm "$n" >/dev/null 2>&1; done
	for n in ${EXTRA_CONTAINERS:-}; do docker rm -f "$n" >/dev/null 2>&1; done
	mkdir -p "$AGENTIC_TOP/build/test-logs"
	cp "$LOG" "$AGENTIC_TOP/build/test-logs/$(basename "$0").agenticd.log" 2>/dev/null
	# workspaces are mounts: below an agentshare of the test's own outside $T too
	share=$(sed -n 's/^agentshare_root = //p' "$CONF" 2>/dev/null | tail -1)
	[ -z "$share" ] || ad_unmount_under "$share/instances"
	ad_unmount_under "$T"
	rm -rf --one-file-system "$T"
}

# ad_unmount_under DIR: lazily unmounts every mount below DIR (workspaces a killed agenticd
# left mounted, the test's own agentshare), deepest first.
ad_unmount_under() {
	local m
	for m in $(awk -v d="$1/" 'index($2, d) == 1 { print $2 }' /proc/self/mounts | sort -r); do
		umount -l "$m" 2>/dev/null
	done
}

# ad_start: starts the daemon (allocation checking on) and waits for its ready line (recovering
# 40 sandboxes on a loaded machine has taken 30 s).
ad_start() {
	local i start
	: >>"$LOG"
	start=$(($(wc -l <"$LOG") + 1))
	AGENTIC_ALLOC_CHECK=1 "$AGENTIC_BIN" agenticd -c "$CONF" >>"$LOG" 2>&1 &
	DPID=$!
	for i in $(seq 1 1200); do
		if tail -n +"$start" "$LOG" | grep -q 'msg=ready '; then return 0; fi
		if ! kill -0 "$DPID" 2>/dev/null; then DPID=; return 1; fi
		sleep 0.1
	done
	return 1
}

ad_stop() { # SIGTERM; returns the daemon's exit status
	local rc
	[ -n "$DPID" ] || return 0
	kill -TERM "$DPID"
	wait "$DPID"
	rc=$?
	DPID=
	return $rc
}

ad_kill9() {
	[ -n "$DPID" ] || return 0
	kill -9 "$DPID"
	wait "$DPID" 2>/dev/null
	DPID=
}

cli() { "$AGENTIC_BIN" "$@"; }

# api METHOD PATH [BODY]: prints "STATUS BODY"
api() {
	local out
	out=$(curl -s --max-time 60 --unix-socket "$SOCK" -X "$1" -w '\n%{http_code}' \
		${3:+-H 'Content-Type: application/json' --data "$3"} "http://agenticd$2")
	echo "$(tail -n1 <<<"$out") $(sed '$d' <<<"$out")"
}

# create NAME [more cli args]: a sandbox carrying the test label
create() {
	local name=$1
	shift
	cli create --name "$name" --label "test-run=$RUN_ID" "$@"
}

jfield() { # JSON FIELD: a top-level field of a JSON object on stdin
	/usr/bin/python3 -c 'import json,sys; v=json.load(sys.stdin).get(sys.argv[1]); print("" if v is None else v)' "$1"
}

info_field() { api GET /api/v1/info | cut -d' ' -f2- | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); k=sys.argv[1].split("."); v=d[k[0]]; v=v[k[1]] if len(k)>1 else v; print(v)' "$1"; }
