#!/usr/bin/env bash
# Starts a local three-node rlserver cluster (a fixed --peers list) and
# waits until it has a leader. Clients can use any node:
#
#   redis-cli -p 7381 RL.ALLOW user:42 10 5
#   redis-cli -p 7382 RL.CLUSTER NODES
#
# Ctrl-C stops the three nodes. Data lives in ${RL_CLUSTER_DIR:-./data/cluster}.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-bin/rlserver}
DIR=${RL_CLUSTER_DIR:-./data/cluster}
HOST=127.0.0.1
PEERS="n1=$HOST:7001,n2=$HOST:7002,n3=$HOST:7003"

[ -x "$BIN" ] || { echo "build first: make build" >&2; exit 1; }
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
}
trap cleanup EXIT INT TERM

for i in 1 2 3; do
	mkdir -p "$DIR/n$i"
	"$BIN" --node-id "n$i" --addr "$HOST:738$i" --raft-addr "$HOST:700$i" \
		--peers "$PEERS" --dir "$DIR/n$i" "$@" >"$DIR/n$i.log" 2>&1 &
	pids+=($!)
	echo "n$i: clients $HOST:738$i, raft $HOST:700$i, log $DIR/n$i.log (pid $!)"
done

# Wait (at most 10 s) for a leader, asking n1 over RESP.
for _ in $(seq 100); do
	if command -v redis-cli >/dev/null && redis-cli -p 7381 RL.CLUSTER LEADER 2>/dev/null | grep -q .; then
		break
	fi
	sleep 0.1
done
command -v redis-cli >/dev/null && redis-cli -p 7382 RL.CLUSTER NODES
echo "cluster running; Ctrl-C to stop"
wait
