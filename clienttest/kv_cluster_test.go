package clienttest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// Redis's data commands on a three-process cluster: counters kept with
// INCRBY and MULTI/INCRBY/EXPIRE/EXEC (the limiters' pattern) are
// linearizable across a leader kill and a paused leader, and lose or
// double no increment; every data kind survives a Raft snapshot.

// incrIn and incrOut are one INCRBY (or a transaction holding one) in a
// porcupine history.
type incrIn struct {
	key string
	n   int64
	txn bool // in MULTI with EXPIRE key 600
}

type incrOut struct {
	unknown bool  // the outcome is not known: it may or may not have applied
	value   int64 // the counter after the increment
}

// incrModel is a counter per key, starting at 0: an increment is legal
// iff it returns the counter plus n. An increment whose outcome is unknown
// ends at infinity and matches either way, so porcupine may place it
// anywhere after its call, or never.
var incrModel = porcupine.Model{
	Partition: func(history []porcupine.Operation) [][]porcupine.Operation {
		byKey := map[string][]porcupine.Operation{}
		for _, op := range history {
			k := op.Input.(incrIn).key
			byKey[k] = append(byKey[k], op)
		}
		var out [][]porcupine.Operation
		for _, k := range slices.Sorted(maps.Keys(byKey)) {
			out = append(out, byKey[k])
		}
		return out
	},
	Init: func() any { return int64(0) },
	Step: func(state, input, output any) (bool, any) {
		cur, in, out := state.(int64), input.(incrIn), output.(incrOut)
		next := cur + in.n
		return out.unknown || out.value == next, next
	},
	DescribeOperation: func(input, output any) string {
		in, out := input.(incrIn), output.(incrOut)
		op := "incrby"
		if in.txn {
			op = "multi-incrby"
		}
		if out.unknown {
			return fmt.Sprintf("%s(%s, %d) -> ?", op, in.key, in.n)
		}
		return fmt.Sprintf("%s(%s, %d) -> %d", op, in.key, in.n, out.value)
	},
}

// addIncr records one increment in h.
func (h *history) addIncr(client int, in incrIn, call time.Time, out incrOut, ret time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := int64(math.MaxInt64)
	if out.unknown {
		h.stats["unknown"]++
	} else {
		h.stats["acked"]++
		end = int64(ret.Sub(h.start))
	}
	h.ops = append(h.ops, porcupine.Operation{ClientId: client, Input: in, Call: int64(call.Sub(h.start)), Output: out, Return: end})
}

// incrOnce runs INCRBY key n, or MULTI; INCRBY key n; EXPIRE key 600;
// EXEC, and returns the counter after it.
func incrOnce(ctx context.Context, c *redis.Client, key string, n int64, txn bool) (int64, error) {
	if !txn {
		return c.IncrBy(ctx, key, n).Result()
	}
	var incr *redis.IntCmd
	var expire *redis.BoolCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		incr = p.IncrBy(ctx, key, n)
		expire = p.Expire(ctx, key, 600*time.Second)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if ok, err := expire.Result(); err != nil || !ok {
		return 0, fmt.Errorf("EXPIRE in the transaction: %v, %v", ok, err)
	}
	return incr.Result()
}

// startIncrLoad runs workers that send increments to the nodes (worker w
// starts at node w%3 and moves on when its node refuses connections), half
// of them in transactions, and records every one whose outcome could
// matter.
func startIncrLoad(t *testing.T, c *pcluster, workers, keys int, keyPrefix string) *load {
	l := &load{stop: make(chan struct{}), h: newHistory()}
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = clusterClient(t, n.respAddr)
	}
	for w := range workers {
		l.wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 11))
			node := w % len(clients)
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				in := incrIn{key: keyPrefix + strconv.Itoa(rng.IntN(keys)), n: 1 + rng.Int64N(5), txn: rng.IntN(2) == 0}
				call := time.Now()
				v, err := incrOnce(context.Background(), clients[node], in.key, in.n, in.txn)
				ret := time.Now()
				switch classify(err) {
				case opApplied:
					l.h.addIncr(w, in, call, incrOut{value: v}, ret)
				case opUnknown:
					l.h.addIncr(w, in, call, incrOut{unknown: true}, ret)
					l.h.count("unknown: " + firstWords(err.Error()))
				case opNotApplied:
					l.h.count("not_applied")
					node = (node + 1) % len(clients)
					time.Sleep(10 * time.Millisecond)
				}
			}
		})
	}
	return l
}

// firstWords is the start of an error message, to count errors by kind.
func firstWords(s string) string {
	if len(s) > 40 {
		return s[:40]
	}
	return s
}

// incrTotals sums each key's acknowledged increments, lists its unknown
// ones, and says which keys had a transaction (EXPIRE) sent:
// 2 acknowledged, 1 of unknown outcome only.
func incrTotals(h *history) (acked map[string]int64, unknown map[string][]int64, txns map[string]int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	acked, unknown, txns = map[string]int64{}, map[string][]int64{}, map[string]int{}
	for _, op := range h.ops {
		in, out := op.Input.(incrIn), op.Output.(incrOut)
		if out.unknown {
			unknown[in.key] = append(unknown[in.key], in.n)
		} else {
			acked[in.key] += in.n
		}
		if in.txn {
			if out.unknown {
				txns[in.key] = max(txns[in.key], 1)
			} else {
				txns[in.key] = 2
			}
		}
	}
	return acked, unknown, txns
}

// subsetSum reports whether some subset of ns sums to target.
func subsetSum(ns []int64, target int64) bool {
	if target < 0 {
		return false
	}
	reach := map[int64]bool{0: true}
	for _, n := range ns {
		for s := range reach {
			if s+n <= target {
				reach[s+n] = true
			}
		}
	}
	return reach[target]
}

// TestClusterCountersLinearizable records INCRBY and MULTI/INCRBY/EXPIRE/
// EXEC from six clients over all nodes (followers forward to the leader)
// across a leader kill -9 and restart and a paused leader (SIGSTOP for
// longer than an election, then SIGCONT), and checks the history of each
// counter with porcupine. Afterwards the replicas hold identical state,
// and each counter read from the leader is its acknowledged increments
// plus some of those whose outcome is unknown: none lost, none twice.
func TestClusterCountersLinearizable(t *testing.T) {
	const keys = 16
	c := startCluster(t, serverBin)
	ld := startIncrLoad(t, c, 6, keys, "ctr")
	phase := func(what string, d time.Duration) {
		t.Logf("%s (%v)", what, d)
		time.Sleep(d) // let the load run through this phase
	}
	phase("steady load", time.Second)

	leader := c.waitLeader(10 * time.Second)
	c.kill9(leader)
	nl := c.waitLeader(10 * time.Second)
	phase("leader "+leader.id+" killed, "+nl.id+" leads", time.Second)
	c.launch(leader)
	phase("old leader restarted", time.Second)

	paused := c.waitLeader(10 * time.Second)
	c.pause(paused)
	nl = c.waitLeader(10 * time.Second)
	phase("leader "+paused.id+" paused, "+nl.id+" leads", 500*time.Millisecond)
	c.resume(paused)
	phase("paused leader resumed", time.Second)

	ld.end()
	l := c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)

	// The counters as the leader has them, and each one's TTL: a key
	// that was in an acknowledged transaction has one, a key that was in
	// none has none.
	acked, unknown, txns := incrTotals(ld.h)
	lc := clusterClient(t, l.respAddr)
	ctx := context.Background()
	final := map[string]int64{}
	for i := range keys {
		k := "ctr" + strconv.Itoa(i)
		call := time.Now()
		v, err := lc.Get(ctx, k).Int64()
		if err == redis.Nil {
			v, err = 0, nil
		}
		if err != nil {
			t.Fatalf("GET %s from the leader %s: %v", k, l.id, err)
		}
		// A read is an increment by 0.
		ld.h.addIncr(100, incrIn{key: k, n: 0}, call, incrOut{value: v}, time.Now())
		final[k] = v
		pttl, err := lc.Do(ctx, "PTTL", k).Int64()
		switch {
		case err != nil:
			t.Fatalf("PTTL %s: %v", k, err)
		case txns[k] == 2 && (pttl <= 0 || pttl > 600_000):
			t.Errorf("PTTL %s = %d after an acknowledged EXPIRE 600", k, pttl)
		case txns[k] == 0 && v != 0 && pttl != -1:
			t.Errorf("PTTL %s = %d, and no EXPIRE was sent", k, pttl)
		}
	}
	if res := ld.h.checkModel(t, incrModel, 2*time.Minute); res != porcupine.Ok {
		t.Fatalf("history is not linearizable: %s (set RL_PORCUPINE_HTML=file.html to see it)", res)
	}
	var sumAcked, sumFinal int64
	for i := range keys {
		k := "ctr" + strconv.Itoa(i)
		sumAcked += acked[k]
		sumFinal += final[k]
		if !subsetSum(unknown[k], final[k]-acked[k]) {
			t.Errorf("%s is %d: acknowledged increments sum to %d, and no subset of the unknown ones %v makes up the difference",
				k, final[k], acked[k], unknown[k])
		}
	}
	t.Logf("counters sum to %d: %d acknowledged, %d of unknown outcome applied", sumFinal, sumAcked, sumFinal-sumAcked)
	if sumAcked == 0 {
		t.Fatal("no increment was acknowledged")
	}
}

// TestClusterCountersPlantedBug shows the counter check bites: with the
// rlserver_ackbeforecommit build, followers run increments on their own
// engine without replicating them, and porcupine must reject the history.
func TestClusterCountersPlantedBug(t *testing.T) {
	bin := plantedBugBinary(t)
	c := startCluster(t, bin)
	ld := startIncrLoad(t, c, 6, 4, "bugctr")
	time.Sleep(2 * time.Second)
	ld.end()
	if res := ld.h.checkModel(t, incrModel, time.Minute); res != porcupine.Illegal {
		t.Fatalf("porcupine says %s for the planted bug; want Illegal", res)
	}
}

// TestKVClusterSnapshot writes every data kind, with and without a TTL,
// through all three nodes, lets every node take a Raft snapshot that
// holds it (a low --snapshot-threshold), restarts a follower, which
// restores its snapshot, and then the whole cluster: the replica digests
// agree each time, and every value and TTL reads back through every node.
func TestKVClusterSnapshot(t *testing.T) {
	c := startCluster(t, serverBin, "--snapshot-threshold", "40", "--snapshot-interval", "100ms")
	leader := c.waitLeader(10 * time.Second)
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = clusterClient(t, n.respAddr)
	}
	keys := kvKeys("snap:")
	written := time.Now()
	writeKV(t, clients, keys)
	// A limiter key next to them.
	lc := clusterClient(t, leader.respAddr)
	ctx := context.Background()
	if ok, _, err := allowOnce(ctx, lc, "snap:bucket", 10, 3); err != nil || !ok {
		t.Fatalf("RL.ALLOW: %v %v", ok, err)
	}
	checkKV(t, "before the snapshot", lc, keys, written)
	idx, _ := c.converge(10 * time.Second)

	// Past the threshold: each command is a log entry.
	for i := range 60 {
		if err := lc.Incr(ctx, "snap:filler").Err(); err != nil {
			t.Fatalf("INCR %d: %v", i, err)
		}
	}
	for _, n := range c.nodes {
		cl := clusterClient(t, n.respAddr)
		pollUntil(t, 15*time.Second, n.id+" to snapshot past index "+strconv.FormatInt(idx, 10), func() bool {
			v, err := strconv.ParseInt(infoField(t, cl, "persistence", "rl_raft_last_snapshot_index"), 10, 64)
			return err == nil && v >= idx
		})
	}
	c.converge(10 * time.Second)
	want := len(keys) + 2 // the limiter key and the filler
	wantInt(t, lc, int64(want), "DBSIZE")

	// A follower restores its snapshot at start-up.
	var follower *cnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	c.stop(follower)
	c.launch(follower)
	fc := clusterClient(t, follower.respAddr)
	if v := infoField(t, fc, "persistence", "rl_raft_snapshots_restored"); v != "1" {
		t.Errorf("%s restored %s snapshots at start-up, want 1", follower.id, v)
	}
	c.converge(20 * time.Second)
	waitServes(t, fc, 10*time.Second)
	checkKV(t, "through the restarted follower "+follower.id, fc, keys, written)

	// The whole cluster restarts: every node restores its snapshot, and
	// whichever leads serves the values from it.
	for _, n := range c.nodes {
		c.stop(n)
	}
	for _, n := range c.nodes {
		c.launch(n)
	}
	leader = c.waitLeader(20 * time.Second)
	c.converge(20 * time.Second)
	for _, n := range c.nodes {
		cl := clusterClient(t, n.respAddr)
		if v := infoField(t, cl, "persistence", "rl_raft_snapshots_restored"); v != "1" {
			t.Errorf("%s restored %s snapshots at start-up, want 1", n.id, v)
		}
		waitServes(t, cl, 10*time.Second) // a forward may time out while the restarted cluster settles
		checkKV(t, fmt.Sprintf("after a full restart, through %s (%s leads)", n.id, leader.id), cl, keys, written)
	}
	lc = clusterClient(t, leader.respAddr)
	wantInt(t, lc, int64(want), "DBSIZE")
	if v, _, err := allowOnce(ctx, lc, "snap:bucket", 10, 8); err != nil || v {
		t.Errorf("RL.ALLOW on the restored bucket with 7 tokens left, cost 8: allowed=%v, %v", v, err)
	}
	c.converge(20 * time.Second)
}

// waitServes waits until a read through cl answers (a value or nil), not an
// error: a node that just restarted may answer UNKNOWN or CLUSTERDOWN while
// its cluster settles; a read is safe to repeat.
func waitServes(t *testing.T, cl *redis.Client, limit time.Duration) {
	t.Helper()
	pollUntil(t, limit, "a read through "+cl.Options().Addr, func() bool {
		err := cl.Get(context.Background(), "serves?").Err()
		return err == nil || err == redis.Nil
	})
}
