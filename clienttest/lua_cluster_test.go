package clienttest

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// A script-based limiter on a three-process cluster: a counter kept by a
// Lua script (INCRBY then PEXPIRE, the fixed-window limiter's script) is
// linearizable across a leader kill -9 and restart, loses no acknowledged
// increment and doubles none, and the replicas converge. The Raft log
// carries the script's effects, so a replica that never ran it holds what
// the leader holds.

// luaCounterLua is the limiter: the count after this request, the window
// (10 min) renewed.
const luaCounterLua = "local v = redis.call('incrby', KEYS[1], ARGV[1]); redis.call('pexpire', KEYS[1], 600000); return v"

// luaIncrOnce runs the script as clients do: EVALSHA, and EVAL when the
// node answers NOSCRIPT (each node has its own script cache, and a
// restarted node starts with an empty one). A NOSCRIPT reply ran nothing.
func luaIncrOnce(ctx context.Context, c *redis.Client, h *history, key string, n int64) (int64, error) {
	v, err := c.EvalSha(ctx, scriptSHA(luaCounterLua), []string{key}, n).Int64()
	if err != nil && strings.HasPrefix(err.Error(), "NOSCRIPT ") {
		h.count("noscript")
		v, err = c.Eval(ctx, luaCounterLua, []string{key}, n).Int64()
	}
	return v, err
}

// startLuaCounterLoad runs workers that send increments to the nodes in
// turn (worker w starts at node w%3), so a restarted node is back in use
// at once: three in four by the script (incrIn.txn set), the others
// by a plain INCRBY on the same keys, so scripts meet concurrent writes
// to their keys and must run again.
func startLuaCounterLoad(t *testing.T, c *pcluster, workers, keys int, keyPrefix string) *load {
	clients := nodeClients(t, c)
	for i, n := range c.nodes {
		if err := clients[i].ScriptLoad(context.Background(), luaCounterLua).Err(); err != nil {
			t.Fatalf("SCRIPT LOAD on %s: %v", n.id, err)
		}
	}
	return startWorkers(clients, workers, 21, func(l *load, w int, rng *rand.Rand, cl *redis.Client) bool {
		in := incrIn{key: keyPrefix + strconv.Itoa(rng.IntN(keys)), n: 1 + rng.Int64N(5), txn: rng.IntN(4) != 0}
		ctx := context.Background()
		call := time.Now()
		var v int64
		var err error
		kind := "incrby"
		if in.txn {
			v, err = luaIncrOnce(ctx, cl, l.h, in.key, in.n)
			kind = "script"
		} else {
			v, err = cl.IncrBy(ctx, in.key, in.n).Result()
		}
		l.recordIncr(w, in, call, v, err, "unknown "+kind)
		return true
	})
}

// TestLuaClusterCounterLinearizable records the script limiter's
// increments (and plain INCRBYs on the same keys) from six clients over
// all nodes (followers forward) across a leader kill -9 and restart, and
// checks each counter's history with porcupine. Afterwards the replicas'
// digests agree, each counter is its acknowledged increments plus some of
// those whose outcome is unknown, and a key an acknowledged script
// touched has the script's PEXPIRE.
func TestLuaClusterCounterLinearizable(t *testing.T) {
	const keys = 8
	c := startCluster(t, serverBin)
	ld := startLuaCounterLoad(t, c, 6, keys, "lctr")
	leader := c.leaderFaults(1500*time.Millisecond, false)

	ld.end()
	l := c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)

	final := readCounters(t, ld.h, l, "lctr", keys, "an acknowledged script's PEXPIRE 600000", "no script ran on it")
	ctx := context.Background()
	// Every node answers the same through its own engine or by
	// forwarding.
	for _, n := range c.live() {
		nc := clusterClient(t, n.respAddr)
		for i := range keys {
			k := "lctr" + strconv.Itoa(i)
			v, err := nc.Get(ctx, k).Int64()
			if err == redis.Nil {
				v, err = 0, nil
			}
			if err != nil || v != final[k] {
				t.Errorf("GET %s through %s: %d, %v; the leader has %d", k, n.id, v, err, final[k])
			}
		}
	}
	checkCounters(t, ld.h, "lctr", keys, final)
	ld.h.mu.Lock()
	scriptsAcked := 0
	for _, op := range ld.h.ops {
		if op.Input.(incrIn).txn && !op.Output.(incrOut).unknown {
			scriptsAcked++
		}
	}
	ld.h.mu.Unlock()
	if scriptsAcked == 0 {
		t.Fatal("no script increment was acknowledged")
	}
	t.Logf("%d script increments acknowledged", scriptsAcked)
	// The restarted node's script cache was empty: EVALSHA there answered
	// NOSCRIPT, and the client's EVAL ran the script.
	ld.h.mu.Lock()
	noscript := ld.h.stats["noscript"]
	ld.h.mu.Unlock()
	if noscript == 0 {
		t.Errorf("no NOSCRIPT from the restarted node %s", leader.id)
	}
}

// TestLuaClusterNoQuorum: on a node that has lost its quorum, a script
// answers what the commands it runs answer (CLUSTERDOWN, TRYAGAIN), so a
// client knows it did not run and may retry.
func TestLuaClusterNoQuorum(t *testing.T) {
	c := startCluster(t, serverBin)
	leader := c.waitLeader(10 * time.Second)
	// Kill the leader and one follower: the last node has no quorum.
	var rest *cnode
	for _, n := range c.nodes {
		if n != leader && rest == nil {
			rest = n
			continue
		}
		c.kill9(n)
	}
	ctx := context.Background()
	cl := clusterClient(t, rest.respAddr)
	code := func(err error) string {
		if err == nil {
			return "(no error)"
		}
		return luaErrCode(err.Error())
	}
	getErr := cl.Get(ctx, "k").Err()
	if c := code(getErr); c != "CLUSTERDOWN" && c != "TRYAGAIN" {
		t.Fatalf("GET without a quorum: %v, want CLUSTERDOWN or TRYAGAIN", getErr)
	}
	for _, sc := range []struct{ name, src string }{
		{"a read", "return redis.call('get', KEYS[1])"},
		{"the counter", luaCounterLua},
	} {
		err := cl.Eval(ctx, sc.src, []string{"k"}, 1).Err()
		if code(err) != code(getErr) {
			t.Errorf("EVAL of %s without a quorum: %v; GET answers %v", sc.name, err, getErr)
		}
	}
}

// luaErrCode is the first word of an error reply.
func luaErrCode(text string) string {
	code, _, _ := strings.Cut(text, " ")
	return code
}
