#!/usr/bin/env bash
# bench-lua's token bucket (bench/kvcompare/token_bucket.lua) by EVALSHA
# through a three-node cluster's leader against a standalone rlserver, side
# by side (issue 34's cluster goal: the leader at least 0.3 of standalone's
# script rate). One load generator (redis-benchmark), 50 connections,
# random keys out of 100,000, ROUNDS alternating rounds of N calls at -P 32
# and -P 1; per round the calls/s of each and the ratio, and the server CPU
# per call (the standalone process; the three nodes summed).
#
#   bash bench/lualimiters/cluster.sh
#   RLSERVER=/path/to/rlserver ROUNDS=5 N=200000 bash bench/lualimiters/cluster.sh
#
# Needs redis-cli and redis-benchmark; Linux.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lualimiters/setup.sh
freeport() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
SPORT=$(freeport)
mkdir -p "$TMP/standalone"
"$BIN" --addr 127.0.0.1:$SPORT --dir "$TMP/standalone" --log-level warn >"$TMP/standalone.log" 2>&1 &
pids+=($!)
SPID=$!
declare -a cport raftport npid
for i in 1 2 3; do
	cport[$i]=$(freeport)
	raftport[$i]=$(freeport)
done
peers="n1=127.0.0.1:${raftport[1]},n2=127.0.0.1:${raftport[2]},n3=127.0.0.1:${raftport[3]}"
for i in 1 2 3; do
	mkdir -p "$TMP/n$i"
	"$BIN" --node-id "n$i" --addr "127.0.0.1:${cport[$i]}" --raft-addr "127.0.0.1:${raftport[$i]}" \
		--peers "$peers" --dir "$TMP/n$i" --log-level warn >"$TMP/n$i.log" 2>&1 &
	npid[$i]=$!
	pids+=("${npid[$i]}")
done
LPORT=""
for _ in $(seq 200); do
	if redis-cli -p "$SPORT" PING >/dev/null 2>&1; then
		l=$(redis-cli -p "${cport[1]}" RL.CLUSTER LEADER 2>/dev/null | tr -d '\r' | grep -o '127.0.0.1:[0-9]*' | head -1 || true)
		for i in 1 2 3; do
			case "$l" in *":${cport[$i]}" | *":${raftport[$i]}") LPORT=${cport[$i]} ;; esac
		done
		[ -n "$LPORT" ] && break
	fi
	sleep 0.1
done
[ -n "$LPORT" ] || { echo "$0: no leader after 20 s" >&2; cat "$TMP"/n*.log >&2; exit 1; }
cpu() { local t=0; for p in "$@"; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
HZ=$(getconf CLK_TCK)
src=$(cat bench/kvcompare/token_bucket.lua)
sha=$(redis-cli -p "$SPORT" SCRIPT LOAD "$src")
[ "$sha" = "$(redis-cli -p "$LPORT" SCRIPT LOAD "$src")" ] || { echo "SHA mismatch" >&2; exit 1; }
now=$(date +%s%3N)
echo "| -P | standalone calls/s | cluster leader calls/s | leader / standalone | server CPU us/call: standalone / 3 nodes |"
echo "|--:|--:|--:|--:|--:|"
for P in 32 1; do
	for r in $(seq "$ROUNDS"); do
		declare -A rps=() us=()
		order="alone leader"
		[ $((r % 2)) = 0 ] && order="leader alone"
		for s in $order; do
			port=$SPORT procs=$SPID
			[ $s = leader ] && port=$LPORT procs="${npid[*]}"
			c0=$(cpu $procs)
			out=$(redis-benchmark -p "$port" -n "$N" -c 50 -P $P -r 100000 -q EVALSHA "$sha" 1 tb:__rand_int__ 100 10 "$now" 1 | tr '\r' '\n' | grep 'requests per second' | tail -1)
			c1=$(cpu $procs)
			rps[$s]=$(echo "$out" | awk '{for (i = 1; i <= NF; i++) if ($i == "requests") print $(i-1)}')
			us[$s]=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v n="$N" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
		done
		awk -v p=$P -v a="${rps[alone]}" -v b="${rps[leader]}" -v ca="${us[alone]}" -v cb="${us[leader]}" \
			'BEGIN { printf "| %d | %.0f | %.0f | %.2fx | %s / %s |\n", p, a, b, b / a, ca, cb }'
	done
done
a=$(redis-cli -p "$SPORT" EVALSHA "$sha" 1 tb:check 100 10 "$now" 1 | tr '\n' ' ')
b=$(redis-cli -p "$LPORT" EVALSHA "$sha" 1 tb:check 100 10 "$now" 1 | tr '\n' ' ')
echo "check: standalone [$a] leader [$b]"
