# lib.sh: TAP helpers for integration tests (sourced). Each check prints `ok N - what` or
# `not ok N - what`; `finish` exits non-zero when any failed.
tap_n=0
tap_failed=0

ok() { # what
	tap_n=$((tap_n + 1))
	echo "ok $tap_n - $1"
}

not_ok() { # what [detail]
	tap_n=$((tap_n + 1))
	tap_failed=$((tap_failed + 1))
	echo "not ok $tap_n - $1"
	[ -z "${2:-}" ] || printf '%s\n' "$2" | sed 's/^/# /'
}

check() { # what, command...: passes when the command succeeds
	local what=$1 out
	shift
	if out=$("$@" 2>&1); then ok "$what"; else not_ok "$what" "$out"; fi
}

skip() { # what, why
	tap_n=$((tap_n + 1))
	echo "ok $tap_n # SKIP $1: $2"
}

finish() {
	[ "$tap_failed" -eq 0 ]
	exit $?
}

: "${AGENTIC_BIN:?run through tests/run or set AGENTIC_BIN}"
: "${AGENTIC_TOP:?run through tests/run or set AGENTIC_TOP}"
: "${AGENTIC_GRPCTEST:=$AGENTIC_TOP/build/musl/agentic-grpctest}"
