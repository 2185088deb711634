# e2b_files_lib.sh: a private agenticd with its E2B listener, an API key and one sandbox made
# through the E2B API (template base: e2b_base_image, agentic/e2b:local), for the /files and
# filesystem.Filesystem tests (sourced after lib.sh and agenticd_lib.sh). Traffic goes to
# 127.0.0.1 only. Exports E2B_PORT, E2B_KEY, E2B_SANDBOX, E2B_TOKEN and CID (the sandbox's
# container).
E2B_IMAGE=agentic/e2b:local

e2b_up() { # [config lines...]
	local out
	ad_require
	if ! docker image inspect "$E2B_IMAGE" >/dev/null 2>&1; then
		not_ok "image $E2B_IMAGE is present (make images)"
		finish
	fi
	E2B_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	ad_setup "e2b_listen = 127.0.0.1:$E2B_PORT" "e2b_base_image = $E2B_IMAGE" "$@"
	# an API key: `agentic e2b-key create` where this build has it, else its file as the key
	# store reads it (id, name, created, the key's SHA-256)
	E2B_KEY=e2b_$(od -An -N20 -tx1 /dev/urandom | tr -d ' \n')
	mkdir -p "$T/state"
	chmod 0700 "$T/state"
	if ! "$AGENTIC_BIN" e2b-key --help >/dev/null 2>&1; then
		printf 'k1 test 0 %s\n' "$(printf %s "$E2B_KEY" | sha256sum | cut -d' ' -f1)" >"$T/state/e2b-keys"
		chmod 0600 "$T/state/e2b-keys"
	fi
	ad_start || { not_ok "agenticd starts with the E2B listener" "$(tail -20 "$LOG")"; finish; }
	if "$AGENTIC_BIN" e2b-key --help >/dev/null 2>&1; then
		E2B_KEY=$(cli e2b-key create --name files-test | grep -o 'e2b_[0-9a-f]*' | head -1)
	fi
	export E2B_PORT E2B_KEY
	out=$(python3 "$AGENTIC_TOP/tests/integration/e2b_files_client.py" create) ||
		{ not_ok "a sandbox made through the E2B API" "$out"; finish; }
	read -r E2B_SANDBOX E2B_TOKEN <<<"$out"
	export E2B_SANDBOX E2B_TOKEN
	CID=$(docker ps -q --filter "label=$(sed -n 's/.*msg=owner label=\(agentic-daemon=[0-9a-f]\{16\}\).*/\1/p' "$LOG" | head -n1)")
	[ "$(wc -w <<<"$CID")" = 1 ] || { not_ok "one container for the sandbox" "got: $CID"; finish; }
}
