#!/usr/bin/env bash
# The Lua limiters rlserver runs unchanged, by EVALSHA on rlserver and on
# redis-server side by side (issue 34): bench-lua's token bucket
# (bench/kvcompare/token_bucket.lua), rate-limiter-flexible 11.4.0's
# RateLimiterRedis consume script (rlf_consume.lua, its incrTtlLuaScript
# with the line continuations taken out) and express-rate-limit's
# rate-limit-redis 6.0.1 increment script (erl_increment.lua, as it sends
# it: leading blanks stripped), both as clienttest/compat's node_modules
# hold them. One load generator for both servers (redis-benchmark), 50
# connections, random keys out of 100,000, -P 32 and -P 1, ROUNDS
# alternating rounds of N calls; per round the calls/s and the server's
# CPU (user + system, /proc) per call.
#
#   bash bench/lualimiters/run.sh            # builds rlserver into a temp folder
#   RLSERVER=/path/to/rlserver ROUNDS=5 N=200000 bash bench/lualimiters/run.sh
#
# Needs redis-server, redis-cli, redis-benchmark; Linux.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/lualimiters/setup.sh
RLPORT=${RLPORT:-7490}
REDISPORT=${REDISPORT:-7491}
mkdir -p "$TMP/rl" "$TMP/redis"
"$BIN" --addr 127.0.0.1:$RLPORT --dir "$TMP/rl" >"$TMP/rl.log" 2>&1 &
pids+=($!)
RLPID=$!
redis-server --port $REDISPORT --dir "$TMP/redis" --daemonize no >"$TMP/redis.log" 2>&1 &
pids+=($!)
REDISPID=$!
for _ in $(seq 100); do
	redis-cli -p $RLPORT PING >/dev/null 2>&1 && redis-cli -p $REDISPORT PING >/dev/null 2>&1 && break
	sleep 0.1
done
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # clock ticks
HZ=$(getconf CLK_TCK)
now=$(date +%s%3N)
declare -A ARGS=(
	[token_bucket]="1 tb:__rand_int__ 100 10 $now 1"
	[rlf_consume]="1 rlf:__rand_int__ 1 60 10 60"
	[erl_increment]="1 erl:__rand_int__ 60000"
)
declare -A FILE=(
	[token_bucket]=bench/kvcompare/token_bucket.lua
	[rlf_consume]=bench/lualimiters/rlf_consume.lua
	[erl_increment]=bench/lualimiters/erl_increment.lua
)
echo "| script | -P | rlserver calls/s | Redis calls/s | ratio | server CPU us/call rlserver / Redis | ratio |"
echo "|---|--:|--:|--:|--:|--:|--:|"
for name in token_bucket rlf_consume erl_increment; do
	src=$(cat "${FILE[$name]}")
	sha=$(redis-cli -p $RLPORT SCRIPT LOAD "$src")
	[ "$sha" = "$(redis-cli -p $REDISPORT SCRIPT LOAD "$src")" ] || { echo "SHA mismatch" >&2; exit 1; }
	for P in 32 1; do
		for r in $(seq "$ROUNDS"); do
			declare -A rps=() us=()
			order="rl redis"
			[ $((r % 2)) = 0 ] && order="redis rl"
			for s in $order; do
				port=$RLPORT pid=$RLPID
				[ $s = redis ] && port=$REDISPORT pid=$REDISPID
				c0=$(cpu $pid)
				out=$(redis-benchmark -p $port -n "$N" -c 50 -P $P -r 100000 -q EVALSHA "$sha" ${ARGS[$name]} | tr '\r' '\n' | grep 'requests per second' | tail -1)
				c1=$(cpu $pid)
				rps[$s]=$(echo "$out" | awk '{for (i = 1; i <= NF; i++) if ($i == "requests") print $(i-1)}')
				us[$s]=$(awk -v t=$((c1 - c0)) -v hz="$HZ" -v n="$N" 'BEGIN { printf "%.1f", t / hz * 1e6 / n }')
			done
			awk -v name=$name -v p=$P -v a="${rps[rl]}" -v b="${rps[redis]}" -v ca="${us[rl]}" -v cb="${us[redis]}" \
				'BEGIN { printf "| %s | %d | %.0f | %.0f | %.2fx | %s / %s | %.1fx |\n", name, p, a, b, a / b, ca, cb, ca / cb }'
		done
	done
done
# Errors would show as a low rate; check one reply of each by hand.
for name in token_bucket rlf_consume erl_increment; do
	sha=$(redis-cli -p $RLPORT SCRIPT LOAD "$(cat "${FILE[$name]}")")
	a=$(redis-cli -p $RLPORT EVALSHA "$sha" ${ARGS[$name]//__rand_int__/check} | tr '\n' ' ')
	b=$(redis-cli -p $REDISPORT EVALSHA "$sha" ${ARGS[$name]//__rand_int__/check} | tr '\n' ' ')
	echo "check $name: rlserver [$a] Redis [$b]"
done
