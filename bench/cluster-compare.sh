#!/usr/bin/env bash
# Replicated rlserver against standalone Redis + Lua, side by side: builds
# rlserver, starts a three-node cluster (Raft log in bbolt, fsync on every
# commit) and redis-server with the token-bucket script
# (bench/lua/token_bucket.lua) on free loopback ports in a temporary folder,
# then runs the same redis-benchmark case against the cluster's leader, a
# follower (which forwards to the leader) and Redis, alternating, and prints
# the ratios. The target: the replicated throughput at -P 32 at least that
# of standalone Redis + Lua.
#
#   ./bench/cluster-compare.sh               # 3 rounds of 2,000,000 requests
#   ROUNDS=5 REQUESTS=4000000 ./bench/cluster-compare.sh
#   RLSERVER_BIN=/tmp/rlserver ./bench/cluster-compare.sh   # a binary built elsewhere
#
# Needs Go, redis-server, redis-cli and redis-benchmark. Linux.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-2000000}
PIPELINE=${PIPELINE:-32}
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-100000}

for bin in redis-server redis-cli redis-benchmark; do
	command -v "$bin" >/dev/null || { echo "$0: $bin not found (apt-get install redis-server redis-tools)" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-cluster-compare.XXXXXX")
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# freeport prints a loopback port nothing listens on (bash's /dev/tcp: a
# refused connection means free).
used=" "
freeport() {
	local p
	while :; do
		p=$((20000 + RANDOM % 30000))
		case "$used" in *" $p "*) continue ;; esac
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			used="$used$p "
			echo "$p"
			return
		fi
	done
}

echo "building rlserver" >&2
if [ -n "${RLSERVER_BIN:-}" ]; then
	cp "$RLSERVER_BIN" "$tmp/rlserver"
else
	go build -o "$tmp/rlserver" ./cmd/rlserver
fi

rport=$(freeport)
redis-server --bind 127.0.0.1 --port "$rport" --dir "$tmp" --save "" --appendonly no \
	--daemonize no --logfile "$tmp/redis.log" &
pids+=($!)

declare -a cport raftport
for i in 1 2 3; do
	cport[$i]=$(freeport)
	raftport[$i]=$(freeport)
done
peers="n1=127.0.0.1:${raftport[1]},n2=127.0.0.1:${raftport[2]},n3=127.0.0.1:${raftport[3]}"
for i in 1 2 3; do
	mkdir -p "$tmp/n$i"
	"$tmp/rlserver" --node-id "n$i" --addr "127.0.0.1:${cport[$i]}" --raft-addr "127.0.0.1:${raftport[$i]}" \
		--peers "$peers" --dir "$tmp/n$i" --log-level warn >"$tmp/n$i.log" 2>&1 &
	pids+=($!)
done

# Wait for Redis and for a leader (at most 20 s).
leader=""
for _ in $(seq 200); do
	if redis-cli -p "$rport" PING >/dev/null 2>&1; then
		l=$(redis-cli -p "${cport[1]}" RL.CLUSTER LEADER 2>/dev/null | tr -d '\r' | grep -o '127.0.0.1:[0-9]*' | head -1 || true)
		if [ -n "$l" ]; then
			leader=$l
			break
		fi
	fi
	sleep 0.1
done
[ -n "$leader" ] || { echo "$0: no leader after 20 s; logs in $tmp" >&2; cat "$tmp"/n*.log >&2; exit 1; }
lport=${leader##*:}
fport=""
for i in 1 2 3; do
	case "$leader" in *":${cport[$i]}") ;; *) [ -z "$fport" ] && fport=${cport[$i]} ;; esac
done
# The leader reports its client address or its Raft address depending on the
# version; map a Raft port to its client port.
for i in 1 2 3; do
	[ "$lport" = "${raftport[$i]}" ] && lport=${cport[$i]}
done
fport=""
for i in 1 2 3; do
	[ "${cport[$i]}" != "$lport" ] && [ -z "$fport" ] && fport=${cport[$i]}
done

sha=$(redis-cli -p "$rport" SCRIPT LOAD "$(cat bench/lua/token_bucket.lua)" | tr -d '\r')

run() { # port args... -> requests per second
	local port=$1
	shift
	redis-benchmark -p "$port" -c "$CLIENTS" -P "$PIPELINE" -n "$REQUESTS" -r "$KEYS" --csv "$@" 2>/dev/null |
		tail -1 | cut -d, -f2 | tr -d '"'
}

echo "cluster: leader 127.0.0.1:$lport, follower 127.0.0.1:$fport; Redis 127.0.0.1:$rport" >&2
echo "redis-benchmark -c $CLIENTS -P $PIPELINE -r $KEYS -n $REQUESTS, $ROUNDS rounds, alternating" >&2
# Warm-up: create the keys on both.
run "$lport" RL.ALLOW key:__rand_int__ 100 0.01 1 >/dev/null
run "$rport" EVALSHA "$sha" 1 key:__rand_int__ 100 0.01 1 >/dev/null

printf '%-6s %14s %14s %14s %12s %12s\n' round "leader req/s" "follower req/s" "Redis+Lua" leader/Redis follower/Redis
for r in $(seq "$ROUNDS"); do
	l=$(run "$lport" RL.ALLOW key:__rand_int__ 100 0.01 1)
	x=$(run "$rport" EVALSHA "$sha" 1 key:__rand_int__ 100 0.01 1)
	f=$(run "$fport" RL.ALLOW key:__rand_int__ 100 0.01 1)
	printf '%-6s %14.0f %14.0f %14.0f %11.2fx %11.2fx\n' "$r" "$l" "$f" "$x" \
		"$(echo "$l / $x" | bc -l)" "$(echo "$f / $x" | bc -l)"
done
# Replicas agree (once the followers have applied everything).
sleep 1
digests=$(for i in 1 2 3; do redis-cli -p "${cport[$i]}" RL.CLUSTER DIGEST 2>/dev/null | tr -d '\r' | tr '\n' ' '; echo; done | sort -u | wc -l)
echo "replica digests: $([ "$digests" = 1 ] && echo identical || echo "DIFFER ($digests)")"
