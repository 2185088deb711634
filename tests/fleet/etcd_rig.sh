# etcd_rig.sh: a real 3-member etcd v3 cluster on 127.0.0.1 for the fleet tests (sourced).
# Mutual TLS everywhere (client and peer), users named by their certificate's CN, one role per
# node: the cluster the fleet mode will be run against. Everything lives under one directory
# the caller owns: pki/ (rig_certs), m1..m3/ (data), m1..m3.log, m1..m3.pid. Members are this
# shell's background children, their pids in RIG_PID1..3 and in the .pid files, so a test's
# EXIT trap (rig_stop) ends them however the test ended. Nothing listens off loopback.
#
# Needs etcd and etcdctl (3.4, tools/bootstrap: etcd-server etcd-client), openssl, ss.

RIG_NODES="node-a node-b node-c"
# Loss detection in about a second, not etcd's default ten: the tests kill members and wait for
# a leader and for leases to expire, on a 2-core machine that may be busy with benchmarks.
RIG_HEARTBEAT_MS=100
RIG_ELECTION_MS=1000
RIG_START_WAIT_S=30 # a first election and three fsyncing WALs on a loaded machine
RIG_DIAL_TIMEOUT=2s
RIG_COMMAND_TIMEOUT=5s

# rig_require: exits the test with a SKIP when a tool the rig runs is missing.
rig_require() {
	local tool
	for tool in etcd etcdctl openssl ss; do
		command -v "$tool" >/dev/null 2>&1 && continue
		echo "ok 1 # SKIP the fleet's etcd rig: $tool is not installed (tools/bootstrap installs it)"
		exit 0
	done
}

# rig_certs DIR: DIR/pki, a PKI of this rig alone. EC P-256 keys in SEC1 PEM ("BEGIN EC PRIVATE
# KEY", from ecparam -noout), mode 0600; what Go's tls.X509KeyPair and so etcd read as they are.
#   ca.crt                  the fleet CA, CN=agentic-fleet-ca
#   m1..m3.{crt,key}        members' client TLS (SAN DNS:etcd, the name a node checks)
#   peer-ca, m1..m3-peer    members' peer TLS, a CA of its own: no node's certificate is a peer
#   root, node-a..node-c    clients; the CN is the etcd user. Nodes will serve each other too,
#                           so every leaf is serverAuth+clientAuth with SAN IP:127.0.0.1
#   node-x.{crt,key}        signed by the CA, but no etcd user is ever made for it
#   rogue-ca.crt            an unrelated CA, and rogue-node-a.{crt,key} (CN=node-a) it signed
# The leaves are made side by side: on a busy 2-core machine one after another took 6 s.
rig_certs() {
	local d=$1/pki n pids rc=0
	mkdir -p "$d" || return 1
	# a config of our own: the system's openssl.cnf would add its own extensions
	cat >"$d/rig.cnf" <<-'EOF'
	[req]
	distinguished_name = dn
	prompt = no
	[dn]
	[ca]
	basicConstraints = critical,CA:TRUE
	keyUsage = critical,keyCertSign,cRLSign
	subjectKeyIdentifier = hash
	[leaf]
	basicConstraints = critical,CA:FALSE
	keyUsage = critical,digitalSignature
	extendedKeyUsage = serverAuth,clientAuth
	subjectAltName = IP:127.0.0.1
	subjectKeyIdentifier = hash
	authorityKeyIdentifier = keyid
	[member]
	basicConstraints = critical,CA:FALSE
	keyUsage = critical,digitalSignature
	extendedKeyUsage = serverAuth,clientAuth
	subjectAltName = DNS:etcd,IP:127.0.0.1
	subjectKeyIdentifier = hash
	authorityKeyIdentifier = keyid
	EOF
	rig_cert "$d" "" ca agentic-fleet-ca &
	pids=($!)
	rig_cert "$d" "" rogue-ca agentic-fleet-rogue-ca &
	pids+=($!)
	# the members' peer TLS trusts a CA of its own, which signs no node's certificate: a
	# stolen node certificate cannot join the raft group
	rig_cert "$d" "" peer-ca agentic-fleet-peer-ca &
	rig_wait_all "${pids[@]}" $! || rc=1
	pids=()
	# a member's certificate carries DNS:etcd, the name a node checks (fleet_etcd_name); no
	# node's does, so a node's certificate cannot pose as etcd
	for n in m1 m2 m3; do
		rig_cert "$d" ca "$n" "$n" member &
		pids+=($!)
		rig_cert "$d" peer-ca "$n-peer" "$n" &
		pids+=($!)
	done
	for n in root $RIG_NODES node-x; do
		rig_cert "$d" ca "$n" "$n" &
		pids+=($!)
	done
	rig_cert "$d" rogue-ca rogue-node-a node-a &
	rig_wait_all "${pids[@]}" $! || rc=1
	rm -f "$d/rig.cnf"
	return $rc
}

# rig_cert DIR CA NAME CN [EXT]: DIR/NAME.{key,crt}, signed by DIR/CA.{crt,key} with the
# extensions of section EXT (default leaf), or a CA when CA is "".
# The key is never readable by others, not even for a moment.
rig_cert() {
	local d=$1
	(umask 077 && openssl ecparam -name prime256v1 -genkey -noout -out "$d/$3.key") 2>/dev/null &&
		if [ -z "$2" ]; then
			openssl req -config "$d/rig.cnf" -x509 -new -key "$d/$3.key" -subj "/CN=$4" \
				-days 2 -extensions ca -out "$d/$3.crt" >/dev/null 2>&1
		else # req -CA: a random serial, no CSR file
			openssl req -config "$d/rig.cnf" -new -key "$d/$3.key" -subj "/CN=$4" \
				-CA "$d/$2.crt" -CAkey "$d/$2.key" -days 2 -extensions "${5:-leaf}" \
				-out "$d/$3.crt" >/dev/null 2>&1
		fi
}

# rig_ports: sets RIG_BASE so that RIG_BASE..RIG_BASE+5 (member i: client 2i-2, peer 2i-1
# past it) are not listened on now. Random in 20000-29999, below the ephemeral range, so
# parallel runs rarely meet; a port taken between here and etcd's bind shows in rig_start.
rig_ports() {
	local i p listening free
	listening=" $(ss -ltnH | awk '{ n = split($4, a, ":"); print a[n] }' | tr '\n' ' ') "
	for i in $(seq 1 50); do
		RIG_BASE=$((20000 + (($(od -An -N2 -tu2 /dev/urandom)) % 9994)))
		free=1
		for p in $(seq "$RIG_BASE" $((RIG_BASE + 5))); do
			case $listening in *" $p "*) free=0 ;; esac
		done
		[ $free = 1 ] && return 0
	done
	return 1
}

rig_wait_all() { # PID...: waits for each; fails when any of them failed
	local p rc=0
	for p in "$@"; do wait "$p" || rc=1; done
	return $rc
}

rig_client_port() { echo $((RIG_BASE + 2 * $1 - 2)); }
rig_peer_port() { echo $((RIG_BASE + 2 * $1 - 1)); }

# rig_start DIR: a new cluster (data a former one left under DIR is removed): starts m1..m3
# (DIR/pki made by rig_certs), waits until all three are healthy, then sets up users and roles
# (rig_rbac) and enables auth. Exports RIG_DIR, RIG_PKI,
# RIG_ENDPOINTS, RIG_EP1..3, RIG_PID1..3. On failure says why on stderr (with each member's
# log tail) and leaves nothing running.
rig_start() {
	local i
	RIG_DIR=$1 RIG_PKI=$1/pki
	export RIG_DIR RIG_PKI
	[ -f "$RIG_PKI/ca.crt" ] || { echo "rig_start: no $RIG_PKI/ca.crt (rig_certs first)" >&2; return 1; }
	for _ in 1 2 3; do
		rig_ports || { echo "rig_start: no 6 free ports found in 20000-29999" >&2; return 1; }
		RIG_CLUSTER='' RIG_ENDPOINTS=''
		for i in 1 2 3; do
			RIG_CLUSTER+="${RIG_CLUSTER:+,}m$i=https://127.0.0.1:$(rig_peer_port $i)"
			RIG_ENDPOINTS+="${RIG_ENDPOINTS:+,}https://127.0.0.1:$(rig_client_port $i)"
			printf -v "RIG_EP$i" 'https://127.0.0.1:%s' "$(rig_client_port $i)"
			export "RIG_EP$i"
		done
		export RIG_ENDPOINTS
		# a fresh cluster's token: a member of another run can never join this one
		RIG_TOKEN=agentic-rig-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
		rm -rf "$RIG_DIR"/m[123] "$RIG_DIR"/m[123].log
		for i in 1 2 3; do rig_start_member "$i" new; done
		if rig_wait_healthy "$RIG_START_WAIT_S"; then
			rig_rbac && return 0
			echo "rig_start: setting up users, roles and auth failed" >&2
			rig_stop
			return 1
		fi
		rig_stop
		# another process took a port after rig_ports looked: new ports, a new cluster
		grep -qs 'address already in use' "$RIG_DIR"/m[123].log || break
	done
	echo "rig_start: the cluster was not healthy within ${RIG_START_WAIT_S} s, or a member exited" >&2
	rig_log_tails >&2
	return 1
}

# rig_start_member N [new]: starts member N in the background; without "new" it is a restart
# on the data dir it has (etcd ignores the --initial-* flags then). Refused while N runs.
# RIG_LISTEN_EXTRA=IP: the members serve clients at that address of this host too (a test's
# own veth, for a node in a network namespace), on the same ports.
rig_start_member() {
	local n=$1 state=${2:-existing} pid v=RIG_PID$1
	# a second etcd would fail to bind, and the first one's pid would be lost to rig_stop
	if [ -n "${!v:-}" ] && kill -0 "${!v}" 2>/dev/null; then
		echo "rig_start_member: m$n is running (pid ${!v})" >&2
		return 1
	fi
	# an env of its own: ETCD_* variables of the caller's would conflict with these flags
	env -i PATH="$PATH" etcd --name "m$n" --data-dir "$RIG_DIR/m$n" \
		--listen-client-urls "https://127.0.0.1:$(rig_client_port "$n")${RIG_LISTEN_EXTRA:+,https://$RIG_LISTEN_EXTRA:$(rig_client_port "$n")}" \
		--advertise-client-urls "https://127.0.0.1:$(rig_client_port "$n")" \
		--listen-peer-urls "https://127.0.0.1:$(rig_peer_port "$n")" \
		--initial-advertise-peer-urls "https://127.0.0.1:$(rig_peer_port "$n")" \
		--initial-cluster "$RIG_CLUSTER" --initial-cluster-state "$state" \
		--initial-cluster-token "$RIG_TOKEN" \
		--client-cert-auth --trusted-ca-file "$RIG_PKI/ca.crt" \
		--cert-file "$RIG_PKI/m$n.crt" --key-file "$RIG_PKI/m$n.key" \
		--peer-client-cert-auth --peer-trusted-ca-file "$RIG_PKI/peer-ca.crt" \
		--peer-cert-file "$RIG_PKI/m$n-peer.crt" --peer-key-file "$RIG_PKI/m$n-peer.key" \
		--max-request-bytes 65536 \
		--heartbeat-interval "$RIG_HEARTBEAT_MS" --election-timeout "$RIG_ELECTION_MS" \
		--logger zap --log-outputs stderr >>"$RIG_DIR/m$n.log" 2>&1 </dev/null &
	pid=$!
	printf -v "RIG_PID$n" '%s' "$pid"
	export "RIG_PID$n"
	echo "$pid" >"$RIG_DIR/m$n.pid"
}

# rig_kill_member N: SIGKILL, a crash (no goodbye to the peers); returns once it is reaped.
rig_kill_member() {
	local v=RIG_PID$1
	[ -n "${!v:-}" ] || return 0
	kill -KILL "${!v}" 2>/dev/null
	wait "${!v}" 2>/dev/null
	printf -v "$v" '%s' ""
	rm -f "$RIG_DIR/m$1.pid"
}

# rig_stop [purge]: kills every member and reaps it; purge also removes RIG_DIR. SIGKILL, not
# SIGTERM: a member told to stop first hands its leadership over, to peers that are stopping
# too, and that took 7 s here; every write is in its fsynced WAL anyway, so rig_start_member
# can start it again. Safe to call twice, and from a trap.
rig_stop() {
	local i
	for i in 1 2 3; do rig_kill_member "$i"; done
	[ "${1:-}" != purge ] || [ -z "${RIG_DIR:-}" ] || rm -rf "$RIG_DIR"
}

# rig_wait_healthy SECONDS [N...]: waits until members N (default all three) answer a health
# check (a linearized read through the leader, so it needs a quorum).
rig_wait_healthy() {
	local limit=$1 end eps i v
	shift
	[ $# -gt 0 ] || set -- 1 2 3
	eps=
	for i in "$@"; do eps+="${eps:+,}https://127.0.0.1:$(rig_client_port "$i")"; done
	end=$((SECONDS + limit))
	while [ $SECONDS -lt $end ]; do
		# 1 s, not 5: an attempt made before there is a leader waits out its whole timeout
		rig_etcdctl --endpoints "$eps" --command-timeout=1s endpoint health >/dev/null 2>&1 && return 0
		for i in "$@"; do
			v=RIG_PID$i
			[ -n "${!v:-}" ] && kill -0 "${!v}" 2>/dev/null || return 1 # exited: its log says why
		done
		sleep 0.2
	done
	return 1
}

rig_log_tails() { # each member's last log lines, to show why something failed
	local i
	for i in 1 2 3; do
		echo "--- m$i.log (last 10 lines)"
		tail -n 10 "$RIG_DIR/m$i.log" 2>/dev/null
	done
}

# rig_etcdctl_as CERT [args]: etcdctl with DIR/pki/CERT.{crt,key} as its client certificate
# (CERT "none": no client certificate) against all three members, or the args' own
# --endpoints (etcdctl appends a second --endpoints to the first, so it is given once). Bounded:
# 2 s to connect, 5 s a command, unless the args say otherwise (a later timeout wins).
rig_etcdctl_as() {
	local cert=$1 a eps=--endpoints=$RIG_ENDPOINTS
	shift
	for a in "$@"; do
		case $a in --endpoints | --endpoints=*) eps= ;; esac
	done
	if [ "$cert" != none ]; then
		set -- --cert "$RIG_PKI/$cert.crt" --key "$RIG_PKI/$cert.key" "$@"
	fi
	# an env of its own: ETCDCTL_* variables of the caller's would add to these flags
	env -i PATH="$PATH" ETCDCTL_API=3 etcdctl ${eps:+"$eps"} --cacert "$RIG_PKI/ca.crt" \
		--dial-timeout "$RIG_DIAL_TIMEOUT" --command-timeout "$RIG_COMMAND_TIMEOUT" "$@"
}

rig_etcdctl() { rig_etcdctl_as root "$@"; } # root, by its certificate's CN

# rig_metric PATTERN: the sum, over the three members, of etcd's /metrics lines that begin
# with PATTERN (grep -E), read with root's certificate; -1 (and failure) when a member did not
# answer, so that a count read from fewer members never passes for the whole cluster's.
rig_metric() {
	local i ep out sum=0
	for i in 1 2 3; do
		ep=RIG_EP$i
		out=$(curl -sf --max-time 5 --cacert "$RIG_PKI/ca.crt" --cert "$RIG_PKI/root.crt" \
			--key "$RIG_PKI/root.key" "${!ep}/metrics") || { echo -1; return 1; }
		sum=$((sum + $(grep -E "^$1" <<<"$out" | awk '{ s += $NF } END { printf "%d", s }')))
	done
	echo "$sum"
}

# rig_absent [--prefix] KEY: etcd answered, and has no such key. A read that failed (a member
# slow under load, a timeout) is not absence: waiting for a key to go must not end on one.
rig_absent() { local out; out=$(rig_etcdctl get --keys-only "$@" 2>/dev/null) && [ -z "$out" ]; }

# rig_rbac: users root and node-a..node-c, a role per node, then auth enable. With
# --client-cert-auth etcd takes the user from the client certificate's CN on the gRPC API, so
# the passwords are never used: each is random, given on stdin (not argv) and thrown away.
#   role node-X: readwrite  agentic/nodes/node-X and agentic/alive/node-X (those keys alone:
#                           node-a cannot write agentic/nodes/node-ab)
#                readwrite  agentic/sandboxes/node-X/, agentic/names/, agentic/placements/
#                           (prefixes; names and placements are every node's to claim)
#                read       agentic/ (prefix)
# Each step is a raft round and an etcdctl start (0.1-1 s on a busy machine), 27 of them one
# after another took 5-10 s: so in three waves, each step of a wave at once.
rig_rbac() {
	local u p pids=()
	for u in root $RIG_NODES; do
		od -An -N24 -tx1 /dev/urandom | tr -d ' \n' |
			rig_etcdctl user add "$u" --interactive=false >/dev/null &
		pids+=($!)
		[ "$u" = root ] || { rig_etcdctl role add "$u" >/dev/null & pids+=($!); }
	done
	rig_wait_all "${pids[@]}" || return 1
	rig_etcdctl user grant-role root root >/dev/null &
	pids=($!)
	for u in $RIG_NODES; do
		rig_rbac_grant "$u" readwrite "agentic/nodes/$u" &
		pids+=($!)
		rig_rbac_grant "$u" readwrite "agentic/alive/$u" &
		pids+=($!)
		for p in "agentic/sandboxes/$u/" agentic/names/ agentic/placements/; do
			rig_rbac_grant "$u" readwrite --prefix=true "$p" &
			pids+=($!)
		done
		rig_rbac_grant "$u" read --prefix=true agentic/ &
		pids+=($!)
		rig_etcdctl user grant-role "$u" "$u" >/dev/null &
		pids+=($!)
	done
	rig_wait_all "${pids[@]}" && rig_etcdctl auth enable >/dev/null
}

rig_rbac_grant() { rig_etcdctl role grant-permission "$@" >/dev/null; } # ROLE PERM [--prefix=true] KEY

# rig_leader: the number (1..3) of the member that is leader now, by the members still up.
rig_leader() {
	local i v
	for i in 1 2 3; do
		v=RIG_EP$i
		rig_etcdctl --endpoints "${!v}" endpoint status 2>/dev/null |
			awk -F', ' '$5 == "true" { found = 1 } END { exit !found }' && { echo "$i"; return 0; }
	done
	return 1
}

# rig_log_mark: each member log's length now; rig_log_since MARK: what they logged after it.
rig_log_mark() {
	local i
	for i in 1 2 3; do printf '%s ' "$(wc -l <"$RIG_DIR/m$i.log")"; done
}

rig_log_since() {
	local i=0 n
	for n in $1; do
		i=$((i + 1))
		tail -n +"$((n + 1))" "$RIG_DIR/m$i.log"
	done
}
