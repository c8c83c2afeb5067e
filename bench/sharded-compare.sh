#!/usr/bin/env bash
# Sharded rlserver with 1, 2 and 3 Raft groups (GROUPS_LIST), side by
# side: starts three-process deployments (--groups 1, 2, 3; fsync on) on free loopback
# ports in a temporary folder, then runs the same redis-benchmark --cluster
# case (a Redis Cluster client: it reads CLUSTER NODES and sends each key to
# its slot's leader) against each in turn, round after round, and reads the
# CPU time every process spent from /proc. It prints the throughput, the
# CPU per decision summed over the three processes, each process's CPU per
# decision (for one group: the leader's and the followers', the model's
# C_L and C_F), the fdatasyncs per second of each process (perf's count on
# the syscall's tracepoint when perf can, so any version's binary is
# measured alike, then the log's own count, INFO raft_log_fsyncs, "-" for
# a binary without it), and what an idle deployment costs.
#
#   ./bench/sharded-compare.sh                 # 3 rounds of 1,000,000 requests
#   GROUPS_LIST="1 3 9" ./bench/sharded-compare.sh
#   BIN_B=/tmp/rlserver-old ./bench/sharded-compare.sh  # each group count with that binary too ("3b"), interleaved
#   ROUNDS=5 REQUESTS=2000000 ./bench/sharded-compare.sh
#   RLSERVER_BIN=/tmp/rlserver ./bench/sharded-compare.sh
#   CPU_QUOTA=0.3 ./bench/sharded-compare.sh   # each process limited to 0.3 of a core
#
# Two cores measure the box, not the design: every group's leader shares
# the same two cores. CPU_QUOTA (root, cgroup v1 cpu controller) puts each
# process in a cgroup of its own with that share of a core, emulating small
# machines with the load generator outside them: then one group is capped
# by its leader's quota and each added group adds a leader on another
# "machine".
#
# Needs Go, redis-cli and redis-benchmark. Linux.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-1000000}
PIPELINE=${PIPELINE:-32}
CLIENTS=${CLIENTS:-50}
KEYS=${KEYS:-100000}
GROUPS_LIST=${GROUPS_LIST:-1 2 3}
# The deployments: one per group count, and with BIN_B one more per group
# count running that binary, named with a b ("3b").
DEPLOYS=$GROUPS_LIST
if [ -n "${BIN_B:-}" ]; then
	DEPLOYS=""
	for g in $GROUPS_LIST; do DEPLOYS="$DEPLOYS $g ${g}b"; done
fi
TICK=$(getconf CLK_TCK)

for bin in redis-cli redis-benchmark; do
	command -v "$bin" >/dev/null || { echo "$0: $bin not found (apt-get install redis-tools)" >&2; exit 1; }
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-sharded-compare.XXXXXX")
pids=()
cleanup() {
	for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
	wait 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

used=" "
freeport() {
	local p
	while :; do
		p=$((20000 + RANDOM % 12000))
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
[ -z "${BIN_B:-}" ] || cp "$BIN_B" "$tmp/rlserver-b"

CGROOT=/sys/fs/cgroup/cpu
cgroups=()
if [ -n "${CPU_QUOTA:-}" ]; then
	[ -w "$CGROOT" ] || { echo "$0: CPU_QUOTA needs a writable $CGROOT (root, cgroup v1)" >&2; exit 1; }
	quota=$(printf '%.0f' "$(echo "$CPU_QUOTA * 100000" | bc -l)")
fi
cleanup_cgroups() {
	for cg in "${cgroups[@]}"; do rmdir "$cg" 2>/dev/null || true; done
}
trap 'cleanup; cleanup_cgroups' EXIT

# start deployment node-index args...: starts rlserver (rlserver-b for a
# "b" deployment), in its own cgroup with CPU_QUOTA.
start() {
	local g=$1 i=$2 bin=$tmp/rlserver
	shift 2
	[ "${g%b}" = "$g" ] || bin=$tmp/rlserver-b
	if [ -n "${CPU_QUOTA:-}" ]; then
		local cg="$CGROOT/rl-sharded-$$-$g-$i"
		mkdir -p "$cg"
		echo 100000 >"$cg/cpu.cfs_period_us"
		echo "$quota" >"$cg/cpu.cfs_quota_us"
		cgroups+=("$cg")
		sh -c 'echo $$ >"$0/tasks" && exec "$@"' "$cg" "$bin" "$@" &
	else
		"$bin" "$@" &
	fi
}

declare -A port pid
for g in $DEPLOYS; do
	peers=""
	declare -a raft=()
	for i in 1 2 3; do
		port[$g,$i]=$(freeport)
		raft[$i]=$(freeport)
		peers="$peers${peers:+,}n$i=127.0.0.1:${raft[$i]}"
	done
	for i in 1 2 3; do
		mkdir -p "$tmp/g$g/n$i"
		start "$g" "$i" --node-id "n$i" --addr "127.0.0.1:${port[$g,$i]}" --raft-addr "127.0.0.1:${raft[$i]}" \
			--peers "$peers" --groups "${g%b}" --dir "$tmp/g$g/n$i" --log-level warn >"$tmp/g$g-n$i.log" 2>&1
		pid[$g,$i]=$!
		pids+=($!)
	done
done

# Every slot served, and the leaders spread (the balancer hands a group to
# its preferred node within a few seconds).
for g in $DEPLOYS; do
	ok=""
	for _ in $(seq 300); do
		if redis-cli -p "${port[$g,1]}" CLUSTER INFO 2>/dev/null | grep -q 'cluster_state:ok'; then
			ok=1
			break
		fi
		sleep 0.1
	done
	[ -n "$ok" ] || { echo "$0: the $g-group deployment did not serve every slot; logs in $tmp" >&2; exit 1; }
done
sleep "${SETTLE:-4}" # 9 groups: the balancer hands a group over at most every 10 s

cpu() { # pid -> utime+stime in clock ticks
	awk '{print $14 + $15}' "/proc/$1/stat"
}

run() { # groups -> requests per second
	local mode=(--cluster -p "${port[$1,1]}")
	if [ "${1%b}" = 1 ]; then
		# redis-benchmark --cluster refuses a cluster of one master: send
		# everything to the one group's leader, which owns every slot.
		mode=(-p "$(redis-cli -p "${port[$1,1]}" CLUSTER SLOTS | tr -d '\r' | sed -n 4p)")
	fi
	redis-benchmark "${mode[@]}" -c "$CLIENTS" -P "$PIPELINE" -n "$REQUESTS" -r "$KEYS" --csv \
		RL.ALLOW 'key:{tag}:__rand_int__' 100 0.01 1 2>/dev/null | tail -1 | cut -d, -f2 | tr -d '"'
}

leaders() { # groups -> "nX nY ..." leaders of each group
	redis-cli -p "${port[$1,1]}" RL.CLUSTER GROUPS | tr -d '\r' | sed -n 's/.*leader=\([^ ]*\).*/\1/p' | tr '\n' ' '
}

echo "redis-benchmark --cluster -c $CLIENTS -P $PIPELINE -r $KEYS -n $REQUESTS RL.ALLOW, $ROUNDS rounds, alternating" >&2
for g in $DEPLOYS; do
	echo "groups=$g: leaders $(leaders "$g")" >&2
	run "$g" >/dev/null # warm-up: creates the keys
done

# Idle cost: CPU of each deployment's three processes over 5 s of no load.
declare -A idle0
for g in $DEPLOYS; do for i in 1 2 3; do idle0[$g,$i]=$(cpu "${pid[$g,$i]}"); done; done
sleep 5
for g in $DEPLOYS; do
	t=0
	for i in 1 2 3; do t=$((t + $(cpu "${pid[$g,$i]}") - ${idle0[$g,$i]})); done
	printf 'idle: %s groups, three processes: %.1f%% of a core\n' "$g" "$(echo "$t / $TICK / 5 * 100" | bc -l)"
done

fsyncs() { # groups node-index -> the process's Raft log fdatasyncs so far, or "-"
	local v
	v=$(redis-cli -p "${port[$1,$2]}" INFO replication 2>/dev/null | tr -d '\r' | sed -n 's/^raft_log_fsyncs://p')
	echo "${v:--}"
}

# perf counts a process's fdatasync calls on their tracepoint.
PERF=""
if command -v perf >/dev/null && perf stat -e syscalls:sys_enter_fdatasync -x, -o /dev/null true 2>/dev/null; then
	PERF=1
fi
declare -A perfpid
perf_start() { # groups node-index
	perf stat -x, -e syscalls:sys_enter_fdatasync -p "${pid[$1,$2]}" -o "$tmp/perf-$1-$2" 2>/dev/null &
	perfpid[$1,$2]=$!
}
perf_stop() { # groups: ends its processes' perf (in this shell: wait needs it)
	for i in 1 2 3; do kill -INT "${perfpid[$1,$i]}" 2>/dev/null || true; done
	for i in 1 2 3; do wait "${perfpid[$1,$i]}" 2>/dev/null || true; done
}
perf_count() { # groups node-index -> fdatasyncs perf counted
	awk -F, '/fdatasync/ {print $1}' "$tmp/perf-$1-$2"
}

now() { date +%s.%N; }

printf '%-6s %-7s %12s %16s %-40s %s\n' round groups "req/s" "CPU us/decision" "per process (us/decision)" "fdatasyncs/s per process"
for r in $(seq "$ROUNDS"); do
	for g in $DEPLOYS; do
		declare -a c0=() s0=()
		for i in 1 2 3; do
			c0[$i]=$(cpu "${pid[$g,$i]}")
			s0[$i]=$(fsyncs "$g" "$i")
			[ -z "$PERF" ] || perf_start "$g" "$i"
		done
		[ -z "$PERF" ] || sleep 0.2 # perf attached
		t0=$(now)
		rps=$(run "$g")
		t1=$(now)
		[ -z "$PERF" ] || perf_stop "$g"
		total=0
		per=""
		syncs=""
		for i in 1 2 3; do
			d=$(($(cpu "${pid[$g,$i]}") - ${c0[$i]}))
			total=$((total + d))
			per="$per n$i=$(printf '%.2f' "$(echo "$d / $TICK * 1000000 / $REQUESTS" | bc -l)")"
			s1=$(fsyncs "$g" "$i")
			info=-
			if [ "$s1" != - ] && [ "${s0[$i]}" != - ]; then
				info=$(printf '%.0f' "$(echo "($s1 - ${s0[$i]}) / ($t1 - $t0)" | bc -l)")
			fi
			if [ -n "$PERF" ]; then
				# perf's count, then the log's own (INFO) when the binary has it
				syncs="$syncs n$i=$(printf '%.0f' "$(echo "$(perf_count "$g" "$i") / ($t1 - $t0)" | bc -l)")/$info"
			else
				syncs="$syncs n$i=$info"
			fi
		done
		printf '%-6s %-7s %12.0f %16.2f %-40s %s\n' "$r" "$g" "$rps" "$(echo "$total / $TICK * 1000000 / $REQUESTS" | bc -l)" "$per" "$syncs"
	done
done
for g in $DEPLOYS; do echo "leaders with $g groups: $(leaders "$g")"; done
