#!/usr/bin/env bash
# Redis's own test units (redis/redis at tag $REDIS_TAG) in external mode,
# against a redis-server and against rlserver, each started here on a free
# loopback port with an empty data folder; prints per unit the tests that
# pass on Redis and how many of those pass on rlserver. Needs git (and
# network, or REDIS_REPO pointing at a clone or bare mirror), tclsh and
# redis-server. make redis-suite runs it; UNITS='unit/type/list' narrows it.
set -euo pipefail
GO=${GO:-go}
REDIS_TAG=${REDIS_TAG:-7.0.15}
REDIS_REPO=${REDIS_REPO:-https://github.com/redis/redis.git}
UNITS=${UNITS:-unit/type/list unit/type/set unit/type/zset unit/type/string unit/type/hash unit/keyspace}
# Tags external mode and rlserver cannot serve: DEBUG, replication; the
# suite itself skips external:skip, singledb:skip and large-memory tests.
TAGS=(--tags -needs:debug --tags -needs:repl)

work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	rm -rf "$work"
}
trap cleanup EXIT

freeport() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
waitping() { for _ in $(seq 100); do redis-cli -p "$1" ping >/dev/null 2>&1 && return 0; sleep 0.1; done; echo "no server on $1" >&2; exit 1; }

echo "exporting redis $REDIS_TAG"
if [ -d "$REDIS_REPO" ]; then
	git -C "$REDIS_REPO" archive "$REDIS_TAG" | tar -x -C "$work"
else
	git clone -q --depth 1 --branch "$REDIS_TAG" "$REDIS_REPO" "$work/clone"
	git -C "$work/clone" archive "$REDIS_TAG" | tar -x -C "$work"
fi
# unit/scripting runs every test twice, through FUNCTION and through EVAL;
# rlserver has no FUNCTION, and that half's failures leave the connection
# in raw mode and time the unit out, so only the EVAL half runs (on both
# servers alike).
if [ -f "$work/tests/unit/scripting.tcl" ]; then
	sed -i '1s/^foreach is_eval {0 1}/foreach is_eval {1}/' "$work/tests/unit/scripting.tcl"
fi
$GO build -o "$work/rlserver" ./cmd/rlserver

rport=$(freeport)
mkdir -p "$work/redis-data" "$work/rl-data"
(cd "$work/redis-data" && exec redis-server --save '' --port "$rport" --daemonize no >"$work/redis.log" 2>&1) &
pids+=($!)
lport=$(freeport)
"$work/rlserver" --addr "127.0.0.1:$lport" --dir "$work/rl-data" >"$work/rl.log" 2>&1 &
pids+=($!)
waitping "$rport"
waitping "$lport"

# run server port unit: the names of the tests that pass, one a line.
run() {
	local log="$work/$1.$(echo "$3" | tr / _).log"
	(cd "$work" && ./runtest --host 127.0.0.1 --port "$2" --single "$3" "${TAGS[@]}" \
		--singledb --durable --clients 1 --timeout 120 >"$log" 2>&1) || true
	sed 's/\x1b\[[0-9;]*m//g' "$log" | sed -n 's/^\[ok\]: \(.*\) ([0-9]* ms)$/\1/p' | sort
}

printf '%-16s %8s %9s\n' unit redis rlserver
total_r=0 total_l=0
for u in $UNITS; do
	run redis "$rport" "$u" >"$work/r.txt"
	run rlserver "$lport" "$u" >"$work/l.txt"
	nr=$(wc -l <"$work/r.txt")
	nl=$(comm -12 "$work/r.txt" "$work/l.txt" | wc -l)
	printf '%-16s %8d %9d\n' "$u" "$nr" "$nl"
	comm -23 "$work/r.txt" "$work/l.txt" | sed 's/^/    fails on rlserver: /'
	total_r=$((total_r + nr)) total_l=$((total_l + nl))
done
printf '%-16s %8d %9d (%d%%)\n' total "$total_r" "$total_l" $((100 * total_l / total_r))
