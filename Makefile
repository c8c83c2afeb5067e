# rlserver: build, run, test, benchmark.
GO      ?= go
BIN     := bin/rlserver
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -s -w -X main.version=$(VERSION)
SUDO    := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

.PHONY: build run cluster sharded test test-deps bench lint clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/rlserver

# Starts a standalone server on its defaults: 127.0.0.1:6379, data in ./data.
run: build
	./$(BIN) $(ARGS)

# Starts a local three-node Raft cluster: clients on 127.0.0.1:7381-7383,
# data in ./data/cluster (see docs/cluster.md).
cluster: build
	./scripts/cluster.sh

# Starts a local sharded cluster: three processes, GROUPS Raft groups
# (default 3, each led by a different process) behind the Redis Cluster
# protocol: redis-cli -c -p 7381, any cluster client. Data in
# ./data/sharded; grow it by one group with redis-cli -p 7381 RL.CLUSTER
# ADDGROUP (see docs/cluster-mode.md).
GROUPS ?= 3
sharded: build
	RL_CLUSTER_DIR=./data/sharded ./scripts/cluster.sh --groups $(GROUPS)

# The end-to-end tests drive redis-cli, redis-py (Debian's python3-redis,
# under /usr/bin/python3) and headless Chromium, the
# benchmark driver's test redis-benchmark, the deployment tests run
# systemd-analyze and the network-fault tests ip and nft: install what is
# missing. (The benchmark driver's test also needs redis-server, which CI
# installs; it is not installed here because Debian's package starts a
# Redis on port 6379, where make run listens.)
# Recommended packages are left out: on a bookworm base they would add some
# 150 packages (avahi, cups helpers, upower...) that headless Chromium does
# not use (330 packages with them, 178 without).
test-deps:
	@missing=""; \
	command -v redis-cli >/dev/null 2>&1 && command -v redis-benchmark >/dev/null 2>&1 || missing="$$missing redis-tools"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v systemd-analyze >/dev/null 2>&1 || missing="$$missing systemd"; \
	command -v ip >/dev/null 2>&1 || missing="$$missing iproute2"; \
	command -v nft >/dev/null 2>&1 || missing="$$missing nftables"; \
	/usr/bin/python3 -c 'import redis.cluster' >/dev/null 2>&1 || missing="$$missing python3-redis"; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		$(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $$missing; \
	fi

# The whole suite with the race detector, then the allocation tests, which
# need a build without it (the race detector makes sync.Pool drop items),
# then envoy's ratelimit service against rlserver: clienttest/envoy is a
# module of its own, so that envoy's dependencies stay out of go.mod (the
# first run downloads and builds them; later runs take seconds).
test: test-deps
	$(GO) vet ./...
	$(GO) test -race -count=1 -timeout 20m ./...
	$(GO) test -count=1 -run 'Allocs' ./engine/ ./server/ ./command/
	cd clienttest/envoy && $(GO) vet ./... && $(GO) test -race -count=1 -timeout 10m ./...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./engine/ ./resp/ ./server/

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd clienttest/envoy && $(GO) vet ./...

clean:
	rm -rf bin

# Side-by-side benchmark against redis-server running the token-bucket Lua
# script (needs redis-server and redis-benchmark; Linux): builds rlserver
# into a temporary folder, prints one table with the ratios. A few minutes.
.PHONY: bench-compare
bench-compare:
	GO="$(GO)" bash bench/compare.sh

# rlserver's Redis data commands side by side with redis-server 7, both on
# their defaults (bench/kvcompare): envoy's pipelined INCRBY + EXPIRE and
# the MULTI INCR EXPIRE EXEC limiters at -P 1 and -P 32, 50 connections,
# random keys out of 1M, alternating rounds; then bytes per key of 1M
# counters with a TTL. Builds rlserver from this checkout; needs
# redis-server. About three minutes; ARGS='-duration 5s -rounds 5',
# ARGS=-smoke (seconds) etc.
.PHONY: bench-kv
bench-kv:
	GO="$(GO)" $(GO) run ./bench/kvcompare $(ARGS)

# The Lua token-bucket limiter teams run on Redis today
# (bench/kvcompare/token_bucket.lua: HMGET, HSET, PEXPIRE, the caller's
# clock), loaded by SCRIPT LOAD and called by EVALSHA on rlserver and on
# redis-server 7, and RL.ALLOW on rlserver with the same capacity and
# rate, at -P 1 and -P 32, 50 connections, random keys out of 100k,
# rotating rounds; then the keys read back and the same calls with the
# clock given compared between the servers (kvcompare -scripts). Builds
# rlserver from this checkout; needs redis-server. About two minutes;
# ARGS='-rounds 3', ARGS=-smoke (seconds) etc.
.PHONY: bench-lua
bench-lua:
	GO="$(GO)" $(GO) run ./bench/kvcompare -scripts $(ARGS)

# The disk-fault tests repeated: 20 follower disk faults, 5 of the
# window after one, 5 leader disk faults (clienttest/diskfault_test.go;
# needs root for tmpfs). About two minutes.
.PHONY: soak
soak:
	RLSERVER_SOAK=1 $(GO) test -race -count=1 -timeout 20m -run 'TestClusterDiskFull' -v ./clienttest/

# Slot moves under load: a range moves back and forth 40 times while the
# leaders of the source, the target and the meta group are killed and
# paused; porcupine checks every key's history. About two minutes.
.PHONY: soak-moves
soak-moves:
	RL_MOVE_ROUNDS=40 $(GO) test -race -count=1 -timeout 20m -run 'TestShardedMovesLinearizable' -v ./clienttest/

# Every fault test, the long version (CI's make test runs each once, short):
# - the network faults (clienttest/netfault_test.go; RLSERVER_FAULTS=1):
#   three rounds of each (leader isolated, majority/minority split, bridge,
#   changing partitions, 20% packet loss) held 8 s instead of 3, and the
#   planted acknowledge-before-commit build, which porcupine must reject
#   under a bridge partition; RLSERVER_FAULT_SEED=n repeats a run of
#   changing partitions;
# - the full disks (clienttest/diskfault_test.go; RLSERVER_SOAK=1, as in
#   make soak): 20 follower faults, 5 of the window after one, 5 leader
#   faults;
# - the stalled disks (clienttest/diskstall_test.go; RLSERVER_SOAK=1): 5
#   runs, each freezing a follower's disk, then the leader's;
# - a leader's unsynced log tail lost after replication
#   (clienttest/logcrash_test.go; RLSERVER_SOAK=1): 5 runs.
# Needs root (network namespaces, tmpfs, loop devices, fsfreeze). Several
# minutes: about three for the network faults, two for the full disks.
.PHONY: faults
faults:
	RLSERVER_FAULTS=1 RLSERVER_SOAK=1 $(GO) test -race -count=1 -timeout 30m -run '^(TestClusterNetFaults|TestClusterNetFaultPlantedBug|TestClusterDiskFull|TestClusterDiskStall|TestClusterLeaderLosesUnsyncedTail|TestShardedFailover)$$' -v ./clienttest/

# The replicated throughput (three local Raft nodes, fsync on) side by side
# with standalone rlserver and Redis + Lua (bench/cluster-compare.sh): req/s,
# p99 and each process's CPU per decision at -P 32 and -P 1, through the
# leader and through a follower, with the ratios to standalone and the
# replication goals marked met or missed. About three minutes; ROUNDS,
# REQUESTS, PIPELINES...
# in the environment (see the script).
.PHONY: bench-cluster
bench-cluster:
	bash bench/cluster-compare.sh

# What a Raft snapshot of a large group costs, the old way (copied and
# sorted under the FSM's lock, restored from one decoded slice) and the
# streamed way, side by side (cluster/snapcost_test.go): snapshot time,
# the longest Apply during it, transfer over loopback TCP, restore time and
# the receiver's peak memory. KEYS=10000000 (the default) needs about
# 6 GiB and a few minutes.
KEYS ?= 10000000
.PHONY: snapshot-cost
snapshot-cost:
	RLSERVER_SNAPSHOT_KEYS=$(KEYS) $(GO) test -count=1 -timeout 30m -run 'TestSnapshotCost' -v ./cluster/

# Online slot moves and rebalancing in a sharded deployment (bench/moves):
# the time to move ranges of 100,000 and 1,000,000 keys, the waits of
# requests on a moving range, the throughput of the other keys during a
# move, and throughput and CPU per decision before and after ADDGROUP +
# REBALANCE, without and with a per-process CPU quota (root). Needs
# redis-benchmark. About ten minutes; ARGS='-parts moves -runs 4' etc.
.PHONY: bench-moves
bench-moves:
	$(GO) run ./bench/moves $(ARGS)

# What more machines add to a placed cluster (bench/scaleout): 3, 6 and 9
# nodes with --groups N --replicas 3, each held to the same CPU quota
# (0.1 core by default; root, cgroup v1), RL.ALLOW pipelines of 32 on
# random keys through go-redis's ClusterClient: decisions/s, the ratio to
# three nodes and CPU per decision over all nodes; then the time a group
# takes to get three live replicas back after a kill -9, and a replica
# move of a 1-million-key group under RL.CLUSTER REMOVE. About fifteen
# minutes; ARGS='-parts scale -runs 3' etc.
.PHONY: bench-scaleout
bench-scaleout:
	$(GO) run ./bench/scaleout $(ARGS)

# Redis's own test units (unit/type/list, set, zset, string, hash and
# unit/keyspace of redis/redis 7.0.15, exported from a clone) in external
# mode against redis-server and against rlserver, each started on a free
# loopback port: per unit, the tests that pass on Redis and how many of
# those pass on rlserver, and the names of the others (see "Redis's own
# test units" in docs/redis-commands.md). Needs tclsh, redis-server and
# git; REDIS_REPO=<clone or bare mirror> skips the download. About eight
# minutes; UNITS='unit/type/list' for one.
.PHONY: redis-suite
redis-suite:
	GO="$(GO)" bash scripts/redis-suite.sh
