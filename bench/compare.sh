#!/usr/bin/env bash
# Side-by-side benchmark of rlserver against redis-server running the
# token-bucket Lua script (bench/lua/token_bucket.lua): builds rlserver, the
# driver (bench/compare) and the no-work server (bench/noopserver) into a
# temporary folder and runs the driver, which starts both servers on free
# loopback ports, runs redis-benchmark against both, measures the load
# generator's own RL.ALLOW / PING ceiling on the no-work server, measures
# memory per key and prints one table.
#
#   ./bench/compare.sh                 # what `make bench-compare` runs
#   ./bench/compare.sh -seconds 8      # longer runs; flags go to the driver
#   ./bench/compare.sh -mem-keys 0     # skip the memory measurement
#
# Needs Go, redis-server and redis-benchmark (Debian/Ubuntu: apt-get install
# redis-server redis-tools). Linux only. Takes about two to four minutes.
set -euo pipefail
cd "$(dirname "$0")/.."

for bin in redis-server redis-benchmark; do
	if ! command -v "$bin" >/dev/null 2>&1; then
		echo "bench/compare.sh: $bin not found (Debian/Ubuntu: apt-get install redis-server redis-tools)" >&2
		exit 1
	fi
done

GO="${GO:-go}"
tmp="$(mktemp -d "${TMPDIR:-/tmp}/rl-bench-compare-build.XXXXXX")"
driver_pid=""
cleanup() {
	# The driver stops the servers it started on every exit path (and the
	# kernel kills them if the driver dies); this covers an interrupted
	# driver and removes the build folder.
	if [ -n "$driver_pid" ] && kill -0 "$driver_pid" 2>/dev/null; then
		kill -TERM "$driver_pid" 2>/dev/null || true
		wait "$driver_pid" 2>/dev/null || true
	fi
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

echo "bench/compare.sh: building rlserver and the driver" >&2
"$GO" build -o "$tmp/rlserver" ./cmd/rlserver
"$GO" build -o "$tmp/compare" ./bench/compare
"$GO" build -o "$tmp/noopserver" ./bench/noopserver

# In the background with wait, so the traps run as soon as a signal arrives.
# The driver's temporary folders go under $tmp too, so the trap removes them
# even if the driver is killed before it can.
TMPDIR="$tmp" "$tmp/compare" -rlserver "$tmp/rlserver" -noopserver "$tmp/noopserver" -script bench/lua/token_bucket.lua "$@" &
driver_pid=$!
wait "$driver_pid"
