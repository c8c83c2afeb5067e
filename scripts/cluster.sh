#!/usr/bin/env bash
# Starts a local three-node rlserver cluster (a fixed --peers list) and
# waits until it has a leader. Clients can use any node:
#
#   redis-cli -p 7381 RL.ALLOW user:42 10 5
#   redis-cli -p 7382 RL.CLUSTER NODES
#
# Ctrl-C stops the three nodes. Data lives in ${RL_CLUSTER_DIR:-./data/cluster}.
# Extra arguments go to every node (make sharded passes --groups 3).
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

# Wait (at most 10 s) for a leader, asking n1 over RESP; with --groups,
# until every slot is served.
sharded=false
case " $* " in *" --groups "*) sharded=true ;; esac
for _ in $(seq 100); do
	if command -v redis-cli >/dev/null; then
		if $sharded; then
			redis-cli -p 7381 CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok' && break
		elif redis-cli -p 7381 RL.CLUSTER LEADER 2>/dev/null | grep -q .; then
			break
		fi
	fi
	sleep 0.1
done
if command -v redis-cli >/dev/null; then
	redis-cli -p 7382 RL.CLUSTER NODES
	if $sharded; then
		redis-cli -p 7382 RL.CLUSTER GROUPS
		redis-cli -p 7382 CLUSTER NODES
	fi
fi
echo "cluster running; Ctrl-C to stop"
wait
