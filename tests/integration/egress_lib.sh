# egress_lib.sh: fixtures of the egress tests and benchmarks (docs/EGRESS.md), sourced after
# lib.sh and agenticd_lib.sh (the tests) or on its own (tools/bench, which sets T and
# AGENTIC_TOP). Everything lives under $T: a throwaway CA, a server certificate for localhost
# and 127.0.0.1, the loopback upstream (egress_upstream.py) and its log, the upstream's view.
EG_IMAGE=agentic/curl:local
EG_UPSTREAM=$AGENTIC_TOP/tests/integration/egress_upstream.py
EG_PROXY=http://127.0.0.1:3128

# eg_ca: $T/pki/{ca.pem,ca.key,server.pem,server.key}: a CA of this test only, and a server
# certificate it signed for DNS:localhost and IP:127.0.0.1 (what the upstream presents; the
# worker checks it against egress_ca_file = $EG_CA, curl in the sandbox against a copy).
eg_ca() {
	local d=$T/pki
	mkdir -p "$d"
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=agentic egress test CA $RUN_ID" \
		-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
		-keyout "$d/ca.key" -out "$d/ca.pem" >/dev/null 2>&1 || return 1
	openssl req -newkey rsa:2048 -nodes -subj /CN=localhost -keyout "$d/server.key" \
		-out "$d/server.csr" >/dev/null 2>&1 || return 1
	printf '%s\n' 'subjectAltName=DNS:localhost,IP:127.0.0.1' 'basicConstraints=CA:FALSE' \
		'keyUsage=critical,digitalSignature,keyEncipherment' 'extendedKeyUsage=serverAuth' >"$d/ext"
	openssl x509 -req -in "$d/server.csr" -CA "$d/ca.pem" -CAkey "$d/ca.key" -CAcreateserial \
		-days 2 -sha256 -extfile "$d/ext" -out "$d/server.pem" >/dev/null 2>&1 || return 1
	chmod 0644 "$d/ca.pem"
	EG_CA=$d/ca.pem
}

# eg_upstream_start [--plain]: starts the upstream on an ephemeral loopback port; sets UP_PORT
# (HTTPS) or PLAIN_PORT (--plain), their pids UP_PID / PLAIN_PID, and UP_LOG, the log both
# write (one JSON object per request, with every header: the upstream's view).
eg_upstream_start() {
	local out=$T/upstream.$$.$RANDOM port i pid
	UP_LOG=$T/upstream.jsonl
	: >>"$UP_LOG"
	/usr/bin/python3 "$EG_UPSTREAM" serve --cert "$T/pki/server.pem" --key "$T/pki/server.key" \
		--log "$UP_LOG" "$@" >"$out" 2>>"$T/upstream.err" &
	pid=$!
	for i in $(seq 1 100); do
		port=$(head -n1 "$out" 2>/dev/null)
		[ -n "$port" ] && break
		kill -0 "$pid" 2>/dev/null || return 1
		sleep 0.05
	done
	[ -n "$port" ] || return 1
	if [ "${1:-}" = --plain ]; then PLAIN_PORT=$port PLAIN_PID=$pid; else UP_PORT=$port UP_PID=$pid; fi
	EG_PIDS="${EG_PIDS:-} $pid"
}

eg_stop() { # stops the upstreams (and tinyproxy) this file started
	local p
	for p in ${EG_PIDS:-}; do kill "$p" 2>/dev/null; done
	for p in ${EG_PIDS:-}; do wait "$p" 2>/dev/null; done
	EG_PIDS=
}

# eg_pattern_sha MIB: the sha256 of what /bytes?n=MIB sends
eg_pattern_sha() { /usr/bin/python3 "$EG_UPSTREAM" pattern "$1"; }

# eg_up_lines: the number of requests the upstream has logged (to look at what came after)
eg_up_lines() { wc -l <"$UP_LOG"; }

# eg_up_since FROM PYEXPR: prints the requests the upstream logged after line FROM for which
# the Python expression (on r: method, path, headers (a dict, names lowercase, values a list),
# sni) is true, one JSON object a line.
eg_up_since() {
	tail -n +"$(($1 + 1))" "$UP_LOG" | /usr/bin/python3 -c '
import json, sys
expr = compile(sys.argv[1], "expr", "eval")
for line in sys.stdin:
    r = json.loads(line)
    h = {}
    for k, v in r["headers"]:
        h.setdefault(k.lower(), []).append(v)
    r["headers"] = h
    if eval(expr, {}, {"r": r}):
        print(json.dumps(r))' "$2"
}

# eg_audit_find FILE PYEXPR: the audit lines (JSON, one a line) of FILE for which the Python
# expression on a (the line as a dict) is true; prints them; fails when none is. A line
# lacking a field the expression reads does not match.
eg_audit_find() {
	/usr/bin/python3 -c '
import json, sys
expr = compile(sys.argv[2], "expr", "eval")
n = 0
for line in open(sys.argv[1]):
    line = line.strip()
    if not line:
        continue
    a = json.loads(line)
    try:  # a line without a field the expression names (a policy line has no host) is no match
        hit = eval(expr, {}, {"a": a})
    except (KeyError, TypeError):
        hit = False
    if hit:
        print(line)
        n += 1
sys.exit(0 if n else 1)' "$1" "$2"
}

# eg_jsonl INSTANCE_ID: every egress.jsonl of the instance's runs, concatenated, on stdout
eg_jsonl() { cat "$T"/share/instances/"$1"/runs/*/egress.jsonl 2>/dev/null; }

# eg_secret FILE VALUE: a secret file as agenticd accepts it (root's, 0600, one trailing newline)
eg_secret() {
	mkdir -p "$(dirname "$1")"
	chmod 0755 "$(dirname "$1")"
	(umask 077 && printf '%s\n' "$2" >"$1")
	chown 0:0 "$1"
}

# eg_profile ID IMAGE POLICY_JSON: writes $P/ID.json, a profile whose egress is the policy
eg_profile() {
	printf '{"id": "%s", "image": "%s", "egress": %s}\n' "$1" "$2" "$3" >"$P/$1.json"
	chmod 0644 "$P/$1.json"
}

# eg_ca_into NAME: the test CA into the sandbox at /workspace/ca.pem (through agentic exec's
# stdin: no docker cp, no out-of-band exec)
eg_ca_into() { "$AGENTIC_BIN" exec "$1" -- sh -c 'cat >/workspace/ca.pem' <"$EG_CA"; }

# eg_tinyproxy_start: tinyproxy on an ephemeral loopback port as a CONNECT proxy that allows
# CONNECT to any port (the upstream's is ephemeral); sets TP_PORT, TP_PID.
eg_tinyproxy_start() {
	local i
	TP_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	cat >"$T/tinyproxy.conf" <<-EOF
	Port $TP_PORT
	Listen 127.0.0.1
	Timeout 600
	MaxClients 100
	LogLevel Warning
	Logfile "$T/tinyproxy.log"
	Allow 127.0.0.1
	DisableViaHeader Yes
	EOF
	# run as root, tinyproxy wants a user to drop to (as our worker drops to egress_uid)
	[ "$(id -u)" -ne 0 ] || printf 'User nobody\nGroup nogroup\n' >>"$T/tinyproxy.conf"
	: >"$T/tinyproxy.log"
	chmod 0666 "$T/tinyproxy.log"
	tinyproxy -d -c "$T/tinyproxy.conf" >>"$T/tinyproxy.out" 2>&1 &
	TP_PID=$!
	EG_PIDS="${EG_PIDS:-} $TP_PID"
	for i in $(seq 1 100); do
		curl -s -o /dev/null --max-time 1 "http://127.0.0.1:$TP_PORT/" 2>/dev/null && return 0
		kill -0 "$TP_PID" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}
