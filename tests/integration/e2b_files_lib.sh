# e2b_files_lib.sh: a private agenticd with its E2B listener, an API key and one sandbox made
# through the E2B API, for the /files and filesystem.Filesystem tests (sourced after lib.sh and
# agenticd_lib.sh). Traffic goes to 127.0.0.1 only. Exports E2B_PORT, E2B_KEY, E2B_SANDBOX,
# E2B_TOKEN and CID (the sandbox's container). A part that is not there yet (the listener,
# the key command) is a SKIP that says which, never a pass.
e2b_up() { # [config lines...]
	local out
	ad_require
	E2B_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	ad_setup "e2b_listen = 127.0.0.1:$E2B_PORT" "$@"
	if ! ad_start; then
		if grep -q 'e2b_listen' "$LOG"; then
			skip "agenticd with an E2B listener" "this agenticd refuses e2b_listen: $(grep -m1 e2b_listen "$LOG")"
			finish
		fi
		not_ok "agenticd starts" "$(tail -5 "$LOG")"
		finish
	fi
	out=$(cli e2b-key create --name files-test 2>&1)
	E2B_KEY=$(grep -o 'e2b_[0-9a-f]\{40\}' <<<"$out" | head -n1)
	if [ -z "$E2B_KEY" ]; then
		skip "an E2B API key" "agentic e2b-key create gave none: $(head -c 200 <<<"$out")"
		finish
	fi
	export E2B_PORT E2B_KEY
	out=$(python3 "$AGENTIC_TOP/tests/integration/e2b_files_client.py" create) ||
		{ not_ok "a sandbox made through the E2B API" "$out"; finish; }
	read -r E2B_SANDBOX E2B_TOKEN <<<"$out"
	export E2B_SANDBOX E2B_TOKEN
	CID=$(docker ps -q --filter "label=$(sed -n 's/.*msg=owner label=\(agentic-daemon=[0-9a-f]\{16\}\).*/\1/p' "$LOG" | head -n1)")
	[ "$(wc -w <<<"$CID")" = 1 ] || { not_ok "one container for the sandbox" "got: $CID"; finish; }
}
