# tests/fleet/fleet_nodes.sh: agenticd nodes of a test fleet on this host's engine, each with
# its own directory under $T (sockets, state, agentshare, log), subnet pool and fleet settings,
# against the rig's etcd (etcd_rig.sh, started first). Sourced after lib.sh and agenticd_lib.sh;
# the caller sets T, LEASE and `declare -A NPID=()`, and FLEET_EXTRA for more config lines.

# node_conf NAME CERT OCTET: NAME's directory and config, with CERT's certificate and key; the
# node advertises 127.0.0.1:(7000 + OCTET), and listens there for relayed requests when
# FLEET_RELAY=1. The nodes share this host's kernel, so each gets uids of its own (docs/FLEET.md
# "Nodes on one host"): control uids, egress workers' and the fleet worker's, by OCTET % 32.
node_conf() {
	local d=$T/$1 k=$(($3 % 32))
	mkdir -p "$d"
	cat >"$d/agenticd.conf" <<-EOF
	control_uid_min = $((200000 + k * 10000))
	control_uid_max = $((209999 + k * 10000))
	egress_uid = $((199999 - k * 40))
	fleet_uid = $((198000 - k))
	agent_socket_dir = $d/run/agent
	admin_socket = $d/run/admin.sock
	agentshare_root = $d/share
	state_dir = $d/state
	default_image = $IMAGE
	sandbox_subnet_pool = 10.$3.0.0/16
	max_sandboxes = 8
	ready_timeout_ms = 15000
	stop_grace_ms = 1000
	default_disk_bytes = 16m
	fleet_endpoints = $RIG_EP1,$RIG_EP2,$RIG_EP3
	fleet_node = $1
	fleet_ca_file = $RIG_PKI/ca.crt
	fleet_cert_file = $RIG_PKI/$2.crt
	fleet_key_file = $RIG_PKI/$2.key
	fleet_advertise = 127.0.0.1:$((7000 + $3))
	fleet_lease_s = $LEASE
	${FLEET_EXTRA:-}
	EOF
	[ "${FLEET_RELAY:-0}" = 1 ] && echo "fleet_listen = 127.0.0.1:$((7000 + $3))" >>"$d/agenticd.conf"
	return 0
}

node_start() { # NAME: its agenticd, ready
	local d=$T/$1 i start
	: >>"$d/agenticd.log"
	start=$(($(wc -l <"$d/agenticd.log") + 1))
	AGENTIC_ALLOC_CHECK=1 "$AGENTIC_BIN" agenticd -c "$d/agenticd.conf" >>"$d/agenticd.log" 2>&1 &
	NPID[$1]=$!
	for i in $(seq 1 300); do
		tail -n +"$start" "$d/agenticd.log" | grep -q 'msg=ready ' && return 0
		kill -0 "${NPID[$1]}" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}

# nodes_cleanup TEST: every node killed, the test's containers removed (label test-run=$RUN_ID),
# each node's networks removed and log kept in build/test-logs/TEST.NODE.log, the rig stopped
nodes_cleanup() {
	local n ids
	for n in "${!NPID[@]}"; do kill -9 "${NPID[$n]}" 2>/dev/null; done
	ids=$(docker ps -aq --filter "label=test-run=$RUN_ID")
	[ -z "$ids" ] || docker rm -f $ids >/dev/null 2>&1
	mkdir -p "$AGENTIC_TOP/build/test-logs"
	for n in "$T"/node-*; do
		[ -d "$n" ] || continue
		"$AGENTIC_TOP/tools/remove-daemon-networks" "$n/agenticd.log"
		cp "$n/agenticd.log" "$AGENTIC_TOP/build/test-logs/$1.${n##*/}.log" 2>/dev/null
		ad_unmount_under "$n"
	done
	rig_stop
	rm -rf --one-file-system "$T"
}

# wait_for SECONDS COMMAND...: until COMMAND succeeds; the seconds it took (-1: it never did)
wait_for() {
	local limit=$(($1 * 10)) i
	shift
	for ((i = 0; i < limit; i++)); do
		if "$@"; then echo $((i / 10)).$((i % 10)); return 0; fi
		sleep 0.1
	done
	echo -1
	return 1
}

# logged NODE PATTERN: NODE's log has a line matching PATTERN (grep -E). A line that follows an
# etcd call (a name released) is written after etcd answered, so a test that saw the call's
# effect in etcd waits for its line: wait_for 5 logged NODE PATTERN.
logged() { grep -qE -- "$2" "$T/$1/agenticd.log"; }

# api NODE METHOD PATH [BODY]: NODE's admin API, the body then "HTTP <status>" on a last line
api() {
	local body=()
	[ $# -ge 4 ] && body=(-H 'Content-Type: application/json' --data-binary "$4")
	curl -s --max-time 60 --unix-socket "$T/$1/run/admin.sock" -X "$2" "${body[@]}" \
		-w '\nHTTP %{http_code}\n' "http://agenticd$3"
}
