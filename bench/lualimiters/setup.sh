# Sourced by run.sh and cluster.sh from the repository's root: ROUNDS and
# N with their defaults, a temporary folder TMP removed at exit with every
# process in pids, and BIN, the rlserver binary (RLSERVER, or one built
# from this checkout into TMP).
ROUNDS=${ROUNDS:-3}
N=${N:-100000}
TMP=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$TMP"
}
trap cleanup EXIT INT TERM
BIN=${RLSERVER:-}
if [ -z "$BIN" ]; then
	BIN=$TMP/rlserver
	CGO_ENABLED=0 ${GO:-go} build -o "$BIN" ./cmd/rlserver
fi
