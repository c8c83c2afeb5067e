package clienttest

import (
	"context"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
)

// Redis's data commands on a three-process cluster: counters kept with
// INCRBY and MULTI/INCRBY/EXPIRE/EXEC (the limiters' pattern), and the
// lengths of lists (RPUSH) and sets (MULTI/SADD/SCARD/EXEC), are
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

// Counters of the increment load by key index: a string (INCRBY), a list
// (RPUSH of one element: its length counts) or a set (SADD of a member
// never added before, then SCARD, in MULTI: its size counts).
const (
	counterString = iota
	counterList
	counterSet
)

func counterKind(idx int) int {
	switch idx % 4 {
	case 2:
		return counterList
	case 3:
		return counterSet
	}
	return counterString
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

// pushOnce adds member to the list or set key as one increment by 1 and
// returns the length after it: RPUSH (in MULTI with EXPIRE key 600 when
// txn), or MULTI; SADD; SCARD; EXPIRE key 600; EXEC (always a
// transaction: SADD alone does not answer the size).
func pushOnce(ctx context.Context, c *redis.Client, kind int, key, member string, txn bool) (int64, error) {
	if kind == counterList && !txn {
		return c.RPush(ctx, key, member).Result()
	}
	var n *redis.IntCmd
	var expire *redis.BoolCmd
	_, err := c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		if kind == counterList {
			n = p.RPush(ctx, key, member)
		} else {
			p.SAdd(ctx, key, member)
			n = p.SCard(ctx, key)
		}
		expire = p.Expire(ctx, key, 600*time.Second)
		return nil
	})
	if err != nil {
		return 0, err
	}
	if ok, err := expire.Result(); err != nil || !ok {
		return 0, fmt.Errorf("EXPIRE in the transaction: %v, %v", ok, err)
	}
	return n.Result()
}

// startIncrLoad runs workers that send increments to the nodes (worker w
// starts at node w%3 and moves on when its node refuses connections), half
// of them in transactions, and records every one whose outcome could
// matter.
func startIncrLoad(t *testing.T, c *pcluster, workers, keys int, keyPrefix string) *load {
	var seq atomic.Int64
	return startWorkers(nodeClients(t, c), workers, 11, func(l *load, w int, rng *rand.Rand, cl *redis.Client) bool {
		idx := rng.IntN(keys)
		in := incrIn{key: keyPrefix + strconv.Itoa(idx), n: 1 + rng.Int64N(5), txn: rng.IntN(2) == 0}
		call := time.Now()
		var v int64
		var err error
		switch kind := counterKind(idx); kind {
		case counterString:
			v, err = incrOnce(context.Background(), cl, in.key, in.n, in.txn)
		default:
			in.n = 1
			in.txn = in.txn || kind == counterSet
			v, err = pushOnce(context.Background(), cl, kind, in.key, "m"+strconv.FormatInt(seq.Add(1), 10), in.txn)
		}
		return !l.recordIncr(w, in, call, v, err, "unknown")
	})
}

// recordIncr records an increment called at call that returned v, err in
// l's history, and counts one of unknown outcome under unknownKind and the
// error's first words. One that did not apply is counted, and recordIncr
// waits 10 ms and returns false.
func (l *load) recordIncr(w int, in incrIn, call time.Time, v int64, err error, unknownKind string) bool {
	ret := time.Now()
	switch classify(err) {
	case opApplied:
		l.h.addIncr(w, in, call, incrOut{value: v}, ret)
	case opUnknown:
		l.h.addIncr(w, in, call, incrOut{unknown: true}, ret)
		l.h.count(unknownKind + ": " + firstWords(err.Error()))
	case opNotApplied:
		l.h.count("not_applied")
		time.Sleep(10 * time.Millisecond)
		return false
	}
	return true
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

// readCounters reads the counters prefix0..prefix<keys-1> from the leader
// l after the load, records each read in h as an increment by 0, and
// checks each one's TTL: a key that was in an acknowledged transaction
// (expiry says what set its TTL) has one of up to 600 s, and a non-zero
// key that was in none (none says so) has none.
func readCounters(t *testing.T, h *history, l *cnode, prefix string, keys int, expiry, none string) map[string]int64 {
	t.Helper()
	_, _, txns := incrTotals(h)
	lc := clusterClient(t, l.respAddr)
	ctx := context.Background()
	final := map[string]int64{}
	for i := range keys {
		k := prefix + strconv.Itoa(i)
		typ, err := lc.Type(ctx, k).Result()
		if err != nil {
			t.Fatalf("TYPE %s from the leader %s: %v", k, l.id, err)
		}
		call := time.Now()
		var v int64
		switch typ {
		case "list":
			v, err = lc.LLen(ctx, k).Result()
		case "set":
			v, err = lc.SCard(ctx, k).Result()
		default:
			v, err = lc.Get(ctx, k).Int64()
			if err == redis.Nil {
				v, err = 0, nil
			}
		}
		if err != nil {
			t.Fatalf("GET %s from the leader %s: %v", k, l.id, err)
		}
		// A read is an increment by 0.
		h.addIncr(100, incrIn{key: k, n: 0}, call, incrOut{value: v}, time.Now())
		final[k] = v
		pttl, err := lc.Do(ctx, "PTTL", k).Int64()
		switch {
		case err != nil:
			t.Fatalf("PTTL %s: %v", k, err)
		case txns[k] == 2 && (pttl <= 0 || pttl > 600_000):
			t.Errorf("PTTL %s = %d after %s", k, pttl, expiry)
		case txns[k] == 0 && v != 0 && pttl != -1:
			t.Errorf("PTTL %s = %d, and %s", k, pttl, none)
		}
	}
	return final
}

// checkCounters checks the counter history h with porcupine, and that each
// counter's final value is its acknowledged increments plus some of those
// whose outcome is unknown: none lost, none twice. It returns the sum of
// the acknowledged increments.
func checkCounters(t *testing.T, h *history, prefix string, keys int, final map[string]int64) int64 {
	t.Helper()
	if res := h.checkModel(t, incrModel, 2*time.Minute); res != porcupine.Ok {
		t.Fatalf("history is not linearizable: %s (set RL_PORCUPINE_HTML=file.html to see it)", res)
	}
	acked, unknown, _ := incrTotals(h)
	var sumAcked, sumFinal int64
	for i := range keys {
		k := prefix + strconv.Itoa(i)
		sumAcked += acked[k]
		sumFinal += final[k]
		if !subsetSum(unknown[k], final[k]-acked[k]) {
			t.Errorf("%s is %d: acknowledged increments sum to %d, and no subset of the unknown ones %v makes up the difference",
				k, final[k], acked[k], unknown[k])
		}
	}
	t.Logf("counters sum to %d: %d acknowledged, %d of unknown outcome applied", sumFinal, sumAcked, sumFinal-sumAcked)
	return sumAcked
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
	c.leaderFaults(time.Second, true)
	endIncrLoad(t, c, ld, "ctr", keys)
}

// endIncrLoad stops a load startIncrLoad started, waits for a leader and
// for the replicas to converge, and checks the counters as the leader has
// them: the history is linearizable, each counter holds its acknowledged
// increments plus some of unknown outcome, and each key's TTL is there if
// and only if it was in an acknowledged transaction. Some increment must
// have been acknowledged.
func endIncrLoad(t *testing.T, c *pcluster, ld *load, prefix string, keys int) {
	t.Helper()
	ld.end()
	l := c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)
	final := readCounters(t, ld.h, l, prefix, keys, "an acknowledged EXPIRE 600", "no EXPIRE was sent")
	if checkCounters(t, ld.h, prefix, keys, final) == 0 {
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
	// A string of 2 MiB (past the old bounds of 64 KiB and 1 MiB) goes
	// through the log, the snapshot and its transfer. (8 MiB, the bound,
	// passes too, but under -race takes longer than an append's 2 s.)
	big := strings.Repeat("b", 2<<20-1) + "!"
	if err := lc.Set(ctx, "snap:big", big, 0).Err(); err != nil {
		t.Fatalf("SET of 2 MiB: %v", err)
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
	want := len(keys) + 3 // the limiter key, the big string and the filler
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
	if got, err := fc.Get(ctx, "snap:big").Result(); err != nil || got != big {
		t.Errorf("the 2 MiB string through the restarted follower: %d bytes, %v", len(got), err)
	}

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
