# e2b_lib.sh: a private agenticd with its E2B listener for a test (sourced after lib.sh and
# agenticd_lib.sh), and the way a python client's checks become TAP lines.
IMAGE=agentic/e2b:local

# e2b_start [config lines...]: agenticd up with e2b_listen on a free loopback port (E2B_PORT)
# and an API key (E2B_KEY): `agentic e2b-key create` where this build has it, else written to
# the key store's file (id, name, created, the key's SHA-256) before the start.
e2b_start() {
	ad_require
	E2B_PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
	ad_setup "e2b_listen = 127.0.0.1:$E2B_PORT" "e2b_base_image = $IMAGE" "$@"
	E2B_KEY=
	if ! "$AGENTIC_BIN" e2b-key --help >/dev/null 2>&1; then
		E2B_KEY=e2b_$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
		mkdir -p "$T/state"
		printf 'k1 test 0 %s\n' "$(printf %s "$E2B_KEY" | sha256sum | cut -d' ' -f1)" >"$T/state/e2b-keys"
		chmod 0600 "$T/state/e2b-keys"
	fi
	if ad_start; then ok "agenticd starts with its E2B listener"
	else not_ok "agenticd starts with its E2B listener" "$(tail -5 "$LOG")"; finish; fi
	[ -n "$E2B_KEY" ] || E2B_KEY=$("$AGENTIC_BIN" e2b-key create --name test | grep -o 'e2b_[0-9a-f]*' | head -1)
	case $E2B_KEY in e2b_*) ;; *) not_ok "an E2B key is made" "$E2B_KEY"; finish ;; esac
	export E2B_PORT E2B_KEY
}

# e2b_client: runs the python on stdin (e2b_client.py and e2b_connect.py importable); its lines
# "PASS what" and "FAIL what" (e2b_client.say) become TAP checks, anything else a comment.
e2b_client() {
	local out line
	out=$(PYTHONPATH=$AGENTIC_TOP/tests/integration /usr/bin/python3 - 2>&1)
	while IFS= read -r line; do
		case $line in
		PASS\ *) ok "${line#PASS }" ;;
		FAIL\ *) not_ok "${line#FAIL }" ;;
		\#*) echo "$line" ;;
		*) echo "# $line" ;;
		esac
	done <<<"$out"
}
