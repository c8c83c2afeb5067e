#!/usr/bin/env bash
# Replicated rlserver against standalone rlserver (and Redis + Lua), side by
# side: builds rlserver, starts a standalone rlserver, a three-node cluster
# (Raft log in append-only segment files, fdatasync on every commit) and, when installed,
# redis-server with the token-bucket script (bench/lua/token_bucket.lua), on
# free loopback ports in a temporary folder, then runs the same
# redis-benchmark case (RL.ALLOW on random keys, EVALSHA for Redis) against
# standalone, the cluster's leader, a follower (which forwards to the
# leader) and Redis, alternating, at -P 32 and at -P 1. For each run it
# prints throughput, p99 and the server CPU time per decision (user+system,
# from /proc/<pid>/stat) of every process involved: the leader, follower1
# (the follower the clients of "via follower" talk to), follower2, and their
# sum; then the ratios to standalone and the replication goals (median of
# the rounds): the sum of the three nodes' CPU per decision at most 3.5x
# standalone's, throughput through the leader at least 40% of standalone's
# and through a follower at least 30%. dec/entry is decisions per Raft log
# entry (requests over the leader's growth of raft_last_log_index).
# The cluster keeps one Raft log for the whole run. With the bbolt log of
# earlier versions, log compaction freed pages and every commit then wrote
# a larger freelist, so later rounds (the -P 1 ones above all) cost more
# than earlier ones; the append-only log has no freelist, but compare the
# rounds as well as the medians.
#
#   ./bench/cluster-compare.sh               # 2 rounds; about 3 minutes
#   ROUNDS=3 REQUESTS=2000000 REQUESTS_P1=400000 ./bench/cluster-compare.sh
#   PIPELINES=32 ./bench/cluster-compare.sh  # only -P 32
#   REDIS=0 ./bench/cluster-compare.sh       # without Redis + Lua
#   RLSERVER_BIN=/tmp/rlserver ./bench/cluster-compare.sh   # a binary built elsewhere
#
# Needs Go, redis-cli and redis-benchmark (redis-server for the Redis + Lua
# rows). Linux.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-2}
REQUESTS=${REQUESTS:-1000000}     # per run at -P 32 (and any depth but 1)
REQUESTS_P1=${REQUESTS_P1:-200000} # per run at -P 1
PIPELINES=${PIPELINES:-32 1}
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-100000}
REDIS=${REDIS:-1}

for bin in redis-cli redis-benchmark; do
	command -v "$bin" >/dev/null || { echo "$0: $bin not found (apt-get install redis-tools)" >&2; exit 1; }
done
if [ "$REDIS" = 1 ] && ! command -v redis-server >/dev/null; then
	echo "$0: redis-server not found: no Redis + Lua rows (apt-get install redis-server)" >&2
	REDIS=0
fi

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
		p=$((20000 + RANDOM % 12000)) # below Linux's ephemeral ports (32768-60999), which outgoing connections take
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

rport="" rpid=""
if [ "$REDIS" = 1 ]; then
	rport=$(freeport)
	redis-server --bind 127.0.0.1 --port "$rport" --dir "$tmp" --save "" --appendonly no \
		--daemonize no --logfile "$tmp/redis.log" &
	rpid=$!
	pids+=("$rpid")
fi

# Standalone rlserver on its defaults (snapshot saves every second while
# the state changes).
sport=$(freeport)
mkdir -p "$tmp/standalone"
"$tmp/rlserver" --addr "127.0.0.1:$sport" --dir "$tmp/standalone" --log-level warn >"$tmp/standalone.log" 2>&1 &
spid=$!
pids+=("$spid")

declare -a cport raftport npid
for i in 1 2 3; do
	cport[$i]=$(freeport)
	raftport[$i]=$(freeport)
done
peers="n1=127.0.0.1:${raftport[1]},n2=127.0.0.1:${raftport[2]},n3=127.0.0.1:${raftport[3]}"
for i in 1 2 3; do
	mkdir -p "$tmp/n$i"
	"$tmp/rlserver" --node-id "n$i" --addr "127.0.0.1:${cport[$i]}" --raft-addr "127.0.0.1:${raftport[$i]}" \
		--peers "$peers" --dir "$tmp/n$i" --log-level warn >"$tmp/n$i.log" 2>&1 &
	npid[$i]=$!
	pids+=("${npid[$i]}")
done

# Wait for the servers and for a leader (at most 20 s).
leader=""
for _ in $(seq 200); do
	if { [ -z "$rport" ] || redis-cli -p "$rport" PING >/dev/null 2>&1; } && redis-cli -p "$sport" PING >/dev/null 2>&1; then
		l=$(redis-cli -p "${cport[1]}" RL.CLUSTER LEADER 2>/dev/null | tr -d '\r' | grep -o '127.0.0.1:[0-9]*' | head -1 || true)
		if [ -n "$l" ]; then
			leader=$l
			break
		fi
	fi
	sleep 0.1
done
[ -n "$leader" ] || { echo "$0: no leader after 20 s; logs in $tmp" >&2; cat "$tmp"/n*.log >&2; exit 1; }
for i in 1 2 3; do
	kill -0 "${npid[$i]}" 2>/dev/null || { echo "$0: node n$i exited:" >&2; cat "$tmp/n$i.log" >&2; exit 1; }
done
# The leader reports its client address or its Raft address depending on the
# version: li is its node number, fi the follower driven in the "via
# follower" runs (follower1), oi the other one (follower2).
li="" fi="" oi=""
for i in 1 2 3; do
	case "$leader" in *":${cport[$i]}" | *":${raftport[$i]}") li=$i ;; esac
done
[ -n "$li" ] || { echo "$0: leader $leader is none of the nodes" >&2; exit 1; }
for i in 1 2 3; do
	[ "$i" = "$li" ] && continue
	if [ -z "$fi" ]; then fi=$i; else oi=$i; fi
done
lport=${cport[$li]} fport=${cport[$fi]}
# The nodes' pids in the order of the CPU columns: leader, follower1, follower2.
cluster_pids="${npid[$li]} ${npid[$fi]} ${npid[$oi]}"

sha=""
[ -n "$rport" ] && sha=$(redis-cli -p "$rport" SCRIPT LOAD "$(cat bench/lua/token_bucket.lua)" | tr -d '\r')
ALLOW=(RL.ALLOW key:__rand_int__ 100 0.01 1)
hz=$(getconf CLK_TCK)

cpu_ticks() { # pid -> user+system CPU time in clock ticks, all threads
	local s f
	s=$(cat "/proc/$1/stat")
	s=${s##*) } # the command name may hold spaces
	read -ra f <<<"$s"
	echo $((f[11] + f[12]))
}

last_index() { # the leader's last Raft log index
	redis-cli -p "$lport" INFO replication | tr -d '\r' | sed -n 's/^raft_last_log_index://p'
}

# bench target pipeline requests port "pids" command... appends one line
# to $tmp/results and prints it: target, pipeline, req/s, p99 ms, then per
# process (in pids' order) CPU µs per decision, then decisions per log
# entry (cluster) or "-".
bench() {
	local target=$1 p=$2 n=$3 port=$4 pl=$5
	shift 5
	local before=() after=() pid out e0="" e1
	for pid in $pl; do before+=("$(cpu_ticks "$pid")"); done
	[ "$target" = standalone ] || [ "$target" = redis+lua ] || e0=$(last_index)
	out=$(timeout 600 redis-benchmark -p "$port" -c "$CLIENTS" -P "$p" -n "$n" -r "$KEYS" --csv "$@" 2>/dev/null | tail -1 | tr -d '"')
	for pid in $pl; do after+=("$(cpu_ticks "$pid")"); done
	local line="$target $p $(echo "$out" | cut -d, -f2) $(echo "$out" | cut -d, -f7)"
	local k
	for k in "${!before[@]}"; do
		line="$line $(awk -v d=$((after[k] - before[k])) -v hz="$hz" -v n="$n" 'BEGIN { printf "%.3f", d * 1e6 / hz / n }')"
	done
	if [ -n "$e0" ]; then
		e1=$(last_index)
		line="$line $(awk -v e=$((e1 - e0)) -v n="$n" 'BEGIN { if (e > 0) printf "%.0f", n / e; else print "-" }')"
	else
		line="$line -"
	fi
	echo "$line" >>"$tmp/results"
}

# row prints a results line (target p rps p99 cpu... entries) as a table
# row, with the ratios to the standalone line $2 (same format).
row() {
	awk -v r="$1" -v s="$2" -v label="$3" 'BEGIN {
		n = split(r, f, " "); split(s, sa, " ")
		rps = f[3]; p99 = f[4]; ent = f[n]; sum = 0
		if (f[1] == "standalone" || f[1] == "redis+lua") { l = "-"; a = "-"; b = "-"; sum = f[5] }
		else { l = sprintf("%.2f", f[5]); a = sprintf("%.2f", f[6]); b = sprintf("%.2f", f[7]); sum = f[5] + f[6] + f[7] }
		cr = sa[5] > 0 ? sprintf("%.2fx", sum / sa[5]) : "-"
		tr = sa[3] > 0 ? sprintf("%.0f%%", 100 * rps / sa[3]) : "-"
		printf "%-16s %10.0f %8.2f | %7s %9s %9s %7.2f | %9s %7s | %9s\n", label, rps, p99, l, a, b, sum, cr, tr, ent
	}'
}

header() {
	printf '%-16s %10s %8s | %-35s | %-17s | %9s\n' "-P $1" "" "" "server CPU µs per decision" "vs standalone" ""
	printf '%-16s %10s %8s | %7s %9s %9s %7s | %9s %7s | %9s\n' "target" "req/s" "p99 ms" leader follower1 follower2 sum CPU req/s dec/entry
}

requests() { if [ "$1" = 1 ]; then echo "$REQUESTS_P1"; else echo "$REQUESTS"; fi; }

echo "standalone 127.0.0.1:$sport; cluster: leader n$li 127.0.0.1:$lport, follower1 n$fi 127.0.0.1:$fport, follower2 n$oi${rport:+; Redis 127.0.0.1:$rport}" >&2
echo "redis-benchmark -c $CLIENTS -r $KEYS, -P $PIPELINES, $REQUESTS requests per run at -P 32, $REQUESTS_P1 at -P 1, $ROUNDS rounds, alternating" >&2
# Warm-up: create the keys everywhere.
w=$((KEYS * 5))
redis-benchmark -p "$sport" -c "$CLIENTS" -P 32 -n "$w" -r "$KEYS" -q "${ALLOW[@]}" >/dev/null 2>&1
redis-benchmark -p "$lport" -c "$CLIENTS" -P 32 -n "$w" -r "$KEYS" -q "${ALLOW[@]}" >/dev/null 2>&1
[ -n "$rport" ] && redis-benchmark -p "$rport" -c "$CLIENTS" -P 32 -n "$w" -r "$KEYS" -q EVALSHA "$sha" 1 key:__rand_int__ 100 0.01 1 >/dev/null 2>&1

: >"$tmp/results"
for p in $PIPELINES; do
	n=$(requests "$p")
	echo
	header "$p"
	for r in $(seq "$ROUNDS"); do
		bench standalone "$p" "$n" "$sport" "$spid" "${ALLOW[@]}"
		s=$(tail -1 "$tmp/results")
		row "$s" "$s" "standalone #$r"
		bench leader "$p" "$n" "$lport" "$cluster_pids" "${ALLOW[@]}"
		row "$(tail -1 "$tmp/results")" "$s" "via leader #$r"
		bench follower "$p" "$n" "$fport" "$cluster_pids" "${ALLOW[@]}"
		row "$(tail -1 "$tmp/results")" "$s" "via follower #$r"
		if [ -n "$rport" ]; then
			bench redis+lua "$p" "$n" "$rport" "$rpid" EVALSHA "$sha" 1 key:__rand_int__ 100 0.01 1
			row "$(tail -1 "$tmp/results")" "$s" "redis+lua #$r"
		fi
	done
done

# median target pipeline: the results line whose fields are each the
# median over the rounds.
median() {
	awk -v t="$1" -v p="$2" '$1 == t && $2 == p { n++; for (i = 3; i <= NF; i++) v[i, n] = $i; nf = NF }
	END {
		if (!n) exit
		line = t " " p
		for (i = 3; i <= nf; i++) {
			if (v[i, 1] == "-") { line = line " -"; continue }
			for (j = 1; j <= n; j++) a[j] = v[i, j] + 0
			for (j = 2; j <= n; j++) { x = a[j]; for (k = j - 1; k >= 1 && a[k] > x; k--) a[k + 1] = a[k]; a[k + 1] = x }
			m = n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
			line = line " " m
		}
		print line
	}' "$tmp/results"
}

if [ "$ROUNDS" -gt 1 ]; then
	for p in $PIPELINES; do
		echo
		echo "median of $ROUNDS rounds"
		header "$p"
		s=$(median standalone "$p")
		row "$s" "$s" standalone
		row "$(median leader "$p")" "$s" "via leader"
		row "$(median follower "$p")" "$s" "via follower"
		[ -n "$rport" ] && row "$(median redis+lua "$p")" "$s" "redis+lua"
	done
fi

echo
echo "replication goals$([ "$ROUNDS" -gt 1 ] && echo ", medians"):"
for p in $PIPELINES; do
	s=$(median standalone "$p") l=$(median leader "$p") f=$(median follower "$p")
	awk -v p="$p" -v s="$s" -v l="$l" -v f="$f" 'function ok(c) { return c ? "met" : "MISSED" }
	BEGIN {
		split(s, S, " "); split(l, L, " "); split(f, F, " ")
		cl = (L[5] + L[6] + L[7]) / S[5]; cf = (F[5] + F[6] + F[7]) / S[5]
		tl = L[3] / S[3]; tf = F[3] / S[3]
		printf "  -P %-2s CPU per decision, 3 nodes / standalone: via leader %.2fx (%s), via follower %.2fx (%s); goal <= 3.5x\n", p, cl, ok(cl <= 3.5), cf, ok(cf <= 3.5)
		printf "  -P %-2s throughput: via leader %.0f%% of standalone (goal >= 40%%: %s), via follower %.0f%% (goal >= 30%%: %s)\n", p, 100 * tl, ok(tl >= 0.4), 100 * tf, ok(tf >= 0.3)
		printf "  -P %-2s p99: standalone %.2f ms, via leader %.2f ms, via follower %.2f ms\n", p, S[4], L[4], F[4]
	}'
done

# Replicas agree (once the followers have applied everything).
sleep 1
digests=$(for i in 1 2 3; do redis-cli -p "${cport[$i]}" RL.CLUSTER DIGEST 2>/dev/null | tr -d '\r' | tr '\n' ' '; echo; done | sort -u | wc -l)
echo "replica digests: $([ "$digests" = 1 ] && echo identical || echo "DIFFER ($digests)")"
