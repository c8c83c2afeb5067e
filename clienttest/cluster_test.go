package clienttest

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// Three real rlserver processes: leader kills under load, a paused leader,
// restarted followers, membership commands, and a porcupine
// linearizability check over the recorded RL.ALLOW history, which must also
// catch a planted bug.

// The bucket model: capacity units at a rate of one unit per 10^6 s, so
// during a test a bucket is a counter that RL.ALLOW decrements while it can.
const histCapacity = 1000

// allowIn and allowOut are one RL.ALLOW in a porcupine history.
type allowIn struct {
	key  string
	cost int64
}

type allowOut struct {
	unknown   bool // the outcome is not known: it may or may not have applied
	allowed   bool
	remaining int64
}

// counterModel is a counter per key (porcupine partitions by key). An
// operation with an unknown outcome ends at infinity and matches either
// way, so porcupine may place it anywhere after its call, or never.
var counterModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		var keys []string
		for _, op := range history {
			k := op.Input.(allowIn).key
			if _, ok := byKey[k]; !ok {
				keys = append(keys, k)
			}
			byKey[k] = append(byKey[k], op)
		}
		slices.Sort(keys)
		var out [][]porcupine.Operation
		for _, k := range keys {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return int64(histCapacity) },
	Step: stepCounter,
	DescribeOperation: func(input, output any) string {
		in, out := input.(allowIn), output.(allowOut)
		if out.unknown {
			return fmt.Sprintf("allow(%s, %d) -> ?", in.key, in.cost)
		}
		return fmt.Sprintf("allow(%s, %d) -> %v, %d", in.key, in.cost, out.allowed, out.remaining)
	},
}

// history records RL.ALLOW operations from several clients.
type history struct {
	mu    sync.Mutex
	start time.Time
	ops   []porcupine.Operation
	stats map[string]int
}

func newHistory() *history {
	return &history{start: time.Now(), stats: map[string]int{}}
}

func (h *history) add(client int, in allowIn, call time.Time, out allowOut, ret time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := int64(math.MaxInt64)
	switch {
	case out.unknown:
		h.stats["unknown"]++
	case out.allowed:
		h.stats["allowed"]++
		end = int64(ret.Sub(h.start))
	default:
		h.stats["denied"]++
		end = int64(ret.Sub(h.start))
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: int64(call.Sub(h.start)), Output: out, Return: end})
}

func (h *history) count(what string) {
	h.mu.Lock()
	h.stats[what]++
	h.mu.Unlock()
}

// check runs porcupine with counterModel over the history.
func (h *history) check(t *testing.T, timeout time.Duration) porcupine.CheckResult {
	return h.checkModel(t, counterModel, timeout)
}

// checkModel runs porcupine with model over the history
// (RL_PORCUPINE_HTML=file.html draws an illegal one).
func (h *history) checkModel(t *testing.T, model porcupine.Model, timeout time.Duration) porcupine.CheckResult {
	h.mu.Lock()
	ops := slices.Clone(h.ops)
	stats := fmt.Sprint(h.stats)
	h.mu.Unlock()
	start := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	t.Logf("porcupine: %d operations %s: %s in %v", len(ops), stats, res, time.Since(start).Round(time.Millisecond))
	if res == porcupine.Illegal && os.Getenv("RL_PORCUPINE_HTML") != "" {
		f, err := os.Create(os.Getenv("RL_PORCUPINE_HTML"))
		if err == nil {
			porcupine.Visualize(model, info, f)
			f.Close()
			t.Logf("visualization written to %s", f.Name())
		}
	}
	return res
}

// load runs workers that send RL.ALLOW to the nodes (worker w starts at
// node w%3 and moves on when its node refuses connections) and records
// every operation whose outcome could matter.
type load struct {
	stop chan struct{}
	wg   sync.WaitGroup
	h    *history
}

func startLoad(t *testing.T, c *pcluster, workers, keys int, keyPrefix string) *load {
	return startWorkers(nodeClients(t, c), workers, 7, func(l *load, w int, rng *rand.Rand, cl *redis.Client) bool {
		in := allowIn{key: fmt.Sprintf("%s%d", keyPrefix, rng.IntN(keys)), cost: 1 + rng.Int64N(2)}
		call := time.Now()
		ok, rem, err := allowOnce(context.Background(), cl, in.key, histCapacity, in.cost)
		ret := time.Now()
		switch classify(err) {
		case opApplied:
			l.h.add(w, in, call, allowOut{allowed: ok, remaining: rem}, ret)
		case opUnknown:
			l.h.add(w, in, call, allowOut{unknown: true}, ret)
		case opNotApplied:
			l.h.count("not_applied")
			time.Sleep(10 * time.Millisecond)
			return true
		}
		return false
	})
}

// nodeClients is a client for each node of c, in order.
func nodeClients(t *testing.T, c *pcluster) []*redis.Client {
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = clusterClient(t, n.respAddr)
	}
	return clients
}

// startWorkers runs workers that repeat op until the load ends. Worker w
// has its own random source (w, seed), starts at node w%len(clients) and
// moves on to the next node whenever op returns true.
func startWorkers(clients []*redis.Client, workers int, seed uint64, op func(l *load, w int, rng *rand.Rand, cl *redis.Client) (next bool)) *load {
	l := &load{stop: make(chan struct{}), h: newHistory()}
	for w := range workers {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			node := w % len(clients)
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				if op(l, w, rng, clients[node]) {
					node = (node + 1) % len(clients)
				}
			}
		})
	}
	return l
}

// loadPhase logs a phase of a test and lets the load run through it for d.
func loadPhase(t *testing.T, what string, d time.Duration) {
	t.Logf("%s (%v)", what, d)
	time.Sleep(d)
}

// leaderFaults puts the load through a steady second, then a leader kill
// -9 (a second under the new leader) and the old leader's restart (then
// restarted, for the load to run on), and with pause also a paused leader
// (SIGSTOP for longer than an election, half a second under the new
// leader, then SIGCONT and a second more). It returns the killed leader.
func (c *pcluster) leaderFaults(restarted time.Duration, pause bool) *cnode {
	t := c.t
	loadPhase(t, "steady load", time.Second)

	leader := c.waitLeader(10 * time.Second)
	c.kill9(leader)
	nl := c.waitLeader(10 * time.Second)
	loadPhase(t, "leader "+leader.id+" killed, "+nl.id+" leads", time.Second)
	c.launch(leader)
	loadPhase(t, "old leader restarted", restarted)
	if !pause {
		return leader
	}

	paused := c.waitLeader(10 * time.Second)
	c.pause(paused)
	nl = c.waitLeader(10 * time.Second)
	loadPhase(t, "leader "+paused.id+" paused, "+nl.id+" leads", 500*time.Millisecond)
	c.resume(paused)
	loadPhase(t, "paused leader resumed", time.Second)
	return leader
}

func (l *load) end() {
	close(l.stop)
	l.wg.Wait()
}

// probeServed measures how long after since a command is served: it sends
// RL.ALLOW to the live nodes in turn until one is applied.
func (c *pcluster) probeServed(since time.Time, key string, limit time.Duration) time.Duration {
	c.t.Helper()
	for i := 0; ; i++ {
		live := c.live()
		n := live[i%len(live)]
		cl := redis.NewClient(&redis.Options{Addr: n.respAddr, Protocol: 2, MaxRetries: -1, DisableIdentity: true, DialTimeout: 200 * time.Millisecond, ReadTimeout: 3 * time.Second})
		_, _, err := allowOnce(context.Background(), cl, key, histCapacity, 1)
		cl.Close()
		if err == nil {
			return time.Since(since)
		}
		if time.Since(since) > limit {
			c.t.Fatalf("not served %v after the kill: %v", limit, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestClusterFailover kills the leader with SIGKILL under load from clients
// spread over all nodes: a new leader must serve within 2 s, and a bucket
// drained through the old leader just before stays drained. 3 kills by
// default; RL_CLUSTER_KILLS=20 records a distribution.
func TestClusterFailover(t *testing.T) {
	kills := 3
	if v, err := strconv.Atoi(os.Getenv("RL_CLUSTER_KILLS")); err == nil && v > 0 {
		kills = v
	}
	c := startCluster(t, serverBin)
	ld := startLoad(t, c, 6, 32, "load")
	var times []time.Duration
	for i := range kills {
		time.Sleep(300 * time.Millisecond) // under load
		leader := c.waitLeader(10 * time.Second)
		key := fmt.Sprintf("drained%d", i)
		if ok, rem := c.allowRetryOn(leader, key, 5, 5); !ok || rem != 0 {
			t.Fatalf("draining %s through leader %s: allowed=%v remaining=%d", key, leader.id, ok, rem)
		}
		killed := time.Now()
		c.kill9(leader)
		d := c.probeServed(killed, fmt.Sprintf("probe%d", i), 10*time.Second)
		times = append(times, d)
		nl := c.waitLeader(10 * time.Second)
		t.Logf("kill %d: leader %s killed, %s leads, served after %v", i+1, leader.id, nl.id, d.Round(time.Millisecond))
		if ok, rem := c.allowRetryOn(nl, key, 5, 1); ok || rem != 0 {
			t.Fatalf("%s drained through the old leader: new leader says allowed=%v remaining=%d", key, ok, rem)
		}
		c.launch(leader)
	}
	ld.end()
	c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)
	// No over-admission: the applied decisions of each key never exceed it.
	if res := ld.h.check(t, time.Minute); res != porcupine.Ok {
		t.Errorf("history under failover: %s", res)
	}
	sorted := slices.Clone(times)
	slices.Sort(sorted)
	t.Logf("failover over %d kills: min %v, median %v, max %v; all %v", len(sorted),
		sorted[0].Round(time.Millisecond), sorted[len(sorted)/2].Round(time.Millisecond),
		sorted[len(sorted)-1].Round(time.Millisecond), roundAll(times))
	for i, d := range times {
		if d > 2*time.Second {
			t.Errorf("kill %d: served after %v, want within 2s", i+1, d)
		}
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}

// allowRetryOn runs RL.ALLOW through node n, retrying outcomes that did
// not apply.
func (c *pcluster) allowRetryOn(n *cnode, key string, capacity, cost int64) (bool, int64) {
	c.t.Helper()
	cl := clusterClient(c.t, n.respAddr)
	end := time.Now().Add(10 * time.Second)
	for {
		ok, rem, err := allowOnce(context.Background(), cl, key, capacity, cost)
		switch classify(err) {
		case opApplied:
			return ok, rem
		case opUnknown:
			c.t.Fatalf("RL.ALLOW %s via %s: outcome unknown: %v", key, n.id, err)
		}
		if time.Now().After(end) {
			c.t.Fatalf("RL.ALLOW %s via %s: %v", key, n.id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestClusterLinearizable records RL.ALLOW from six clients over all nodes
// across a leader kill, a paused leader (SIGSTOP for longer than an
// election, then SIGCONT) and a restarted follower, and checks the history
// with porcupine. Afterwards all nodes hold identical state.
func TestClusterLinearizable(t *testing.T) {
	c := startCluster(t, serverBin)
	ld := startLoad(t, c, 6, 24, "lin")
	c.leaderFaults(time.Second, true)

	l := c.waitLeader(10 * time.Second)
	var follower *cnode
	for _, n := range c.nodes {
		if n != l {
			follower = n
		}
	}
	c.stop(follower)
	loadPhase(t, "follower "+follower.id+" stopped", time.Second)
	c.launch(follower)
	loadPhase(t, "follower restarted", time.Second)

	ld.end()
	c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)
	if res := ld.h.check(t, 2*time.Minute); res != porcupine.Ok {
		t.Fatalf("history is not linearizable: %s (set RL_PORCUPINE_HTML=file.html to see it)", res)
	}
}

// TestClusterPlantedBugFails shows the checker bites: a build whose
// followers answer from their own engine without replicating (the
// rlserver_ackbeforecommit tag) must produce a history porcupine rejects.
func TestClusterPlantedBugFails(t *testing.T) {
	bin := plantedBugBinary(t)
	c := startCluster(t, bin)
	ld := startLoad(t, c, 6, 4, "bug")
	time.Sleep(2 * time.Second)
	ld.end()
	if res := ld.h.check(t, time.Minute); res != porcupine.Illegal {
		t.Fatalf("porcupine says %s for the planted bug; want Illegal", res)
	}
}

// TestClusterCommands: any node accepts any command (go-redis and
// redis-cli against a follower), RL.CLUSTER NODES/LEADER/JOIN/REMOVE, ROLE
// and INFO replication; a node started with --join joins and receives the
// state; a removed node is dropped from the configuration.
func TestClusterCommands(t *testing.T) {
	c := startCluster(t, serverBin)
	leader := c.waitLeader(10 * time.Second)
	var follower *cnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	fc := clusterClient(t, follower.respAddr)
	lc := clusterClient(t, leader.respAddr)
	ctx := context.Background()

	// A drained bucket, drained through a follower, seen by the leader.
	for i := range 3 {
		ok, rem, err := allowOnce(ctx, fc, "k", 3, 1)
		if err != nil || !ok || rem != int64(2-i) {
			t.Fatalf("RL.ALLOW via follower: %v %d %v", ok, rem, err)
		}
	}
	if ok, _, err := allowOnce(ctx, lc, "k", 3, 1); err != nil || ok {
		t.Fatalf("leader sees tokens after follower drained: %v %v", ok, err)
	}
	// Reads go through the log too.
	if v, err := fc.Do(ctx, "RL.PEEK", "k", 3, "0.000001").Int64Slice(); err != nil || v[0] != 0 {
		t.Fatalf("RL.PEEK via follower: %v %v", v, err)
	}
	if n, err := fc.Exists(ctx, "k").Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS via follower: %d %v", n, err)
	}
	if n, err := fc.DBSize(ctx).Result(); err != nil || n != 1 {
		t.Fatalf("DBSIZE via follower: %d %v", n, err)
	}
	if path, err := exec.LookPath("redis-cli"); err == nil {
		_, port, _ := strings.Cut(follower.respAddr, ":")
		out, err := exec.Command(path, "-p", port, "RL.ALLOW", "cli", "5", "0.000001").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "1\n4\n0\n") {
			t.Fatalf("redis-cli via follower: %q %v", out, err)
		}
	}

	// RL.CLUSTER LEADER and NODES agree from every node.
	for _, n := range c.nodes {
		v, err := rawDo(n.respAddr, 2*time.Second, "RL.CLUSTER", "LEADER")
		if err != nil || len(v.elems) != 3 || v.elems[0].str != leader.id || v.elems[1].str != leader.raftAddr {
			t.Fatalf("RL.CLUSTER LEADER on %s: %v %v", n.id, v, err)
		}
		v, err = rawDo(n.respAddr, 2*time.Second, "RL.CLUSTER", "NODES")
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(v.str), "\n")
		if len(lines) != 3 {
			t.Fatalf("RL.CLUSTER NODES on %s: %q", n.id, v.str)
		}
		for _, m := range c.nodes {
			want := m.id + " " + m.raftAddr + " "
			found := false
			for _, l := range lines {
				if strings.HasPrefix(l, want) {
					found = true
					if (m == n) != strings.Contains(l, "myself") || (m == leader) != strings.Contains(l, "leader") {
						t.Errorf("RL.CLUSTER NODES on %s: line %q", n.id, l)
					}
				}
			}
			if !found {
				t.Errorf("RL.CLUSTER NODES on %s lacks %s: %q", n.id, m.id, v.str)
			}
		}
	}

	// ROLE and INFO replication.
	if v, err := lc.Do(ctx, "ROLE").Slice(); err != nil || v[0] != "master" {
		t.Fatalf("ROLE on leader: %v %v", v, err)
	}
	if v, err := fc.Do(ctx, "ROLE").Slice(); err != nil || v[0] != "slave" || v[3] != "connected" {
		t.Fatalf("ROLE on follower: %v %v", v, err)
	}
	info, err := fc.Info(ctx, "replication").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"role:slave", "raft_state:follower", "raft_leader_id:" + leader.id, "raft_node_id:" + follower.id, "raft_peers:3", "raft_commit_index:", "raft_applied_index:", "raft_term:"} {
		if !strings.Contains(info, want+"") {
			t.Errorf("INFO replication on follower lacks %q:\n%s", want, info)
		}
	}

	// A fourth node joins through a follower's client address.
	n4 := &cnode{
		id:       "n4",
		respAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		raftAddr: "127.0.0.1:" + strconv.Itoa(freePort(t)),
		dir:      t.TempDir(),
		joinVia:  follower.respAddr,
	}
	c.nodes = append(c.nodes, n4)
	c.launch(n4)
	pollUntil(t, 15*time.Second, "n4 to join", func() bool { return c.leaderOf(n4) == leader.id })
	c.converge(15 * time.Second)
	n4c := clusterClient(t, n4.respAddr)
	if ok, _, err := allowOnce(ctx, n4c, "k", 3, 1); err != nil || ok {
		t.Fatalf("joined node sees tokens in a drained bucket: %v %v", ok, err)
	}

	// Remove it again; errors for bad input.
	if err := fc.Do(ctx, "RL.CLUSTER", "REMOVE", "n4").Err(); err != nil {
		t.Fatalf("RL.CLUSTER REMOVE: %v", err)
	}
	if err := fc.Do(ctx, "RL.CLUSTER", "REMOVE", "n9").Err(); err == nil || err.Error() != "ERR no such node in the cluster configuration" {
		t.Fatalf("RL.CLUSTER REMOVE n9: %v", err)
	}
	v, err := rawDo(leader.respAddr, 2*time.Second, "RL.CLUSTER", "NODES")
	if err != nil || strings.Contains(v.str, "n4 ") {
		t.Fatalf("NODES after remove: %q %v", v.str, err)
	}
	c.stop(n4)
	c.nodes = c.nodes[:3]
	if err := fc.Do(ctx, "RL.CLUSTER", "FOO").Err(); err == nil || !strings.HasPrefix(err.Error(), "ERR unknown subcommand") {
		t.Fatalf("RL.CLUSTER FOO: %v", err)
	}
	c.converge(15 * time.Second)
}
