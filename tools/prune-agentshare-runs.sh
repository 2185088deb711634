#!/bin/sh
# prune-agentshare-runs.sh: the agentshare run-retention policy, as the reference describes it.
#
#   AGENTSHARE_ROOT=/srv/agentshare prune-agentshare-runs.sh            preview
#   AGENTSHARE_ROOT=/srv/agentshare prune-agentshare-runs.sh --apply    delete
#   AGENTIC_RUN_RETENTION_DAYS (default 7) or --retention-days N; -h/--help
#
# A thin wrapper: everything is done by `agentic agentic-prune`, found as $AGENTIC_BIN, else
# next to this script (or one level up, as in a source tree), else on PATH.
set -eu
here=$(dirname "$0")
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
		echo "prune-agentshare-runs.sh: cannot find the agentic binary (set AGENTIC_BIN)" >&2
		exit 2
	}
fi
exec "$bin" agentic-prune "$@"
