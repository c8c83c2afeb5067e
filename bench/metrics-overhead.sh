#!/usr/bin/env bash
# RL.ALLOW throughput with the metrics address on (scraped every second) and
# off, measured side by side: the two servers run at once on their own
# ports and redis-benchmark alternates between them, ROUNDS times each, so
# drift of the machine hits both alike. Each run also reports the server's
# CPU time per request (user+system, from /proc), which other load on the
# machine disturbs far less than throughput.
#
#   bench/metrics-overhead.sh [rlserver-binary] [baseline-binary]
#
# With a baseline binary (for example one built from an older commit), it
# is run a third time in each round, with no metrics address.
# Env: ROUNDS (default 5), REQUESTS per run (default 2000000).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS="${ROUNDS:-5}"
REQUESTS="${REQUESTS:-2000000}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/rl-metrics-bench.XXXXXX")"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
bin="${1:-}"
if [ -z "$bin" ]; then
	go build -o "$tmp/rlserver" ./cmd/rlserver
	bin="$tmp/rlserver"
fi
base="${2:-}"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
p_off=$(port); p_on=$(port); p_metrics=$(port); p_base=$(port)
"$bin" --addr 127.0.0.1:$p_off --dir "$tmp/off" --save-interval 0 --log-level warn & pids+=($!); pid_off=$!
"$bin" --addr 127.0.0.1:$p_on --dir "$tmp/on" --save-interval 0 --log-level warn --metrics-addr 127.0.0.1:$p_metrics & pids+=($!); pid_on=$!
pid_base=""
if [ -n "$base" ]; then
	"$base" --addr 127.0.0.1:$p_base --dir "$tmp/base" --save-interval 0 --log-level warn & pids+=($!); pid_base=$!
fi
sleep 1
# A Prometheus-like scraper: one scrape a second.
( while true; do curl -s -o /dev/null "http://127.0.0.1:$p_metrics/metrics"; sleep 1; done ) & pids+=($!)

# cpu prints a process's user+system CPU time in clock ticks.
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
# run benchmarks port $1 (server pid $2) and prints "requests/s cpu-ns/request".
run() {
	local before after rps
	before=$(cpu "$2")
	rps=$(redis-benchmark -p "$1" -c 50 -P 32 -r 100000 -n "$REQUESTS" -q RL.ALLOW key:__rand_int__ 100 10 |
		tr '\r' '\n' | grep -o '[0-9.]* requests per second' | tail -1 | cut -d' ' -f1)
	after=$(cpu "$2")
	echo "$rps $(( (after - before) * 1000000000 / $(getconf CLK_TCK) / REQUESTS ))"
}
# One warm-up run each: the first run creates the 100000 keys.
run "$p_off" "$pid_off" >/dev/null; run "$p_on" "$pid_on" >/dev/null
if [ -n "$base" ]; then run "$p_base" "$pid_base" >/dev/null; fi
printf "%-6s %24s %24s %24s\n" round "off: req/s cpu-ns/req" "on: req/s cpu-ns/req" "baseline: req/s cpu-ns/req"
for r in $(seq "$ROUNDS"); do
	off=$(run "$p_off" "$pid_off"); on=$(run "$p_on" "$pid_on"); b="-"
	if [ -n "$base" ]; then b=$(run "$p_base" "$pid_base"); fi
	printf "%-6s %24s %24s %24s\n" "$r" "$off" "$on" "$b"
done
