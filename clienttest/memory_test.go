package clienttest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxmemory end to end: a real process with a small --maxmemory, filled
// until it refuses new keys with Redis's exact OOM text; existing keys
// keep working; DEL and expiry make room; CONFIG SET changes the limit and
// the policy at run time; volatile-ttl evicts the buckets closest to full
// and keeps serving; INFO memory and stats report it.

const oomText = "OOM command not allowed when used memory > 'maxmemory'."

// fillUntilOOM creates keys prefix0, prefix1, ... with RL.ALLOW key
// capacity rate cost, 1000 per pipeline, until one is refused with the
// OOM error (which must be exact), and returns how many were created. The
// monitor checks memory every 100 ms, so creation goes on a little past
// the limit before the refusals start.
func fillUntilOOM(t *testing.T, c *redis.Client, prefix string, capacity int64, rate string, cost int64) int {
	t.Helper()
	ctx := context.Background()
	created := 0
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		p := c.Pipeline()
		cmds := make([]*redis.Cmd, 1000)
		for i := range cmds {
			cmds[i] = p.Do(ctx, "RL.ALLOW", fmt.Sprintf("%s%d", prefix, created+i), capacity, rate, cost)
		}
		p.Exec(ctx)
		oom := false
		for i, cmd := range cmds {
			_, err := cmd.Result()
			var rerr redis.Error
			switch {
			case err == nil:
				if oom {
					t.Fatalf("key %d created after key %d was refused in the same pipeline", created+i, created)
				}
			case errors.As(err, &rerr) && err.Error() == oomText:
				oom = true
			default:
				t.Fatalf("RL.ALLOW %s%d: %v, want success or %q", prefix, created+i, err, oomText)
			}
		}
		for _, cmd := range cmds {
			if cmd.Err() == nil {
				created++
			}
		}
		if oom {
			return created
		}
	}
	t.Fatalf("no OOM after %d keys", created)
	return 0
}

func infoInt(t *testing.T, c *redis.Client, section, field string) int64 {
	t.Helper()
	m, err := c.InfoMap(context.Background(), section).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range m {
		if v, ok := sec[field]; ok {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("INFO %s %s = %q: %v", section, field, v, err)
			}
			return n
		}
	}
	t.Fatalf("INFO %s has no %s", section, field)
	return 0
}

// waitCreate retries creating key until it succeeds (the monitor ended
// the no-create mode) or 10 s pass.
func waitCreate(t *testing.T, c *redis.Client, key string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.Do(context.Background(), "RL.ALLOW", key, 10, 1, 1).Err()
		if err == nil {
			return
		}
		if err.Error() != oomText || time.Now().After(deadline) {
			t.Fatalf("creating %s: %v", key, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMaxMemoryNoEviction(t *testing.T) {
	// No periodic snapshots: a save's copy of the keys is on the heap while
	// it runs, and counts.
	s := start(t, opts{args: []string{"--maxmemory", "6mb", "--save-interval", "0"}})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()

	if got := infoInt(t, c, "memory", "maxmemory"); got != 6<<20 {
		t.Fatalf("INFO maxmemory = %d, want %d", got, 6<<20)
	}
	m, err := c.InfoMap(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	if p := m["Memory"]["maxmemory_policy"]; p != "noeviction" {
		t.Errorf("maxmemory_policy %q", p)
	}
	if a := m["Memory"]["mem_allocator"]; a != "go" {
		t.Errorf("mem_allocator %q, want go", a)
	}
	if h := m["Memory"]["maxmemory_human"]; h != "6.00M" {
		t.Errorf("maxmemory_human %q", h)
	}
	if _, err := strconv.ParseInt(m["Memory"]["used_memory"], 10, 64); err != nil || m["Memory"]["used_memory_human"] == "" {
		t.Errorf("used_memory %q / %q", m["Memory"]["used_memory"], m["Memory"]["used_memory_human"])
	}

	// Buckets of 1000 tokens refilling one per 1000 s: one call keeps a
	// key for 1000 s.
	n := fillUntilOOM(t, c, "k:", 1000, "0.001", 1)
	t.Logf("%d keys before OOM", n)
	if used := infoInt(t, c, "memory", "used_memory"); used <= 6<<20 {
		t.Errorf("used_memory %d after OOM, want above maxmemory", used)
	}
	wantErr(t, c, oomText, "RL.ALLOW", "brand-new", 10, 1, 1)
	wantErr(t, c, oomText, "RL.FIXED", "brand-new", 10, 1000)
	// Existing keys keep working, reads need no room.
	wantDecision(t, c, allowedAt(1000, 2), "RL.ALLOW", "k:0", 1000, "0.001", 1)
	if got := int64s(t, do(t, c, "RL.PEEK", "brand-new", 10, 1, 1)); got[0] != 1 || got[1] != 9 {
		t.Errorf("RL.PEEK on a missing key above maxmemory = %v, want allowed with 9 left", got)
	}
	wantInt(t, c, 0, "EXISTS", "brand-new")
	if got := doInt(t, c, "DBSIZE"); got != int64(n) {
		t.Errorf("DBSIZE = %d, want %d", got, n)
	}

	// DEL makes room at once (the monitor notices within 100 ms).
	p := c.Pipeline()
	for i := range n / 2 {
		p.Del(ctx, fmt.Sprintf("k:%d", i))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	waitCreate(t, c, "after-del")

	// CONFIG SET maxmemory takes effect at once, in Redis's units.
	wantReply(t, c, "OK", "CONFIG", "SET", "maxmemory", "1mb")
	wantErr(t, c, oomText, "RL.ALLOW", "after-lower", 10, 1, 1)
	wantReply(t, c, "OK", "CONFIG", "SET", "maxmemory", "0")
	if got := int64s(t, do(t, c, "RL.ALLOW", "after-unlimited", 10, 1, 1)); got[0] != 1 {
		t.Errorf("new key with no limit = %v", got)
	}
	wantErr(t, c, "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - argument must be a memory value",
		"CONFIG", "SET", "maxmemory", "lots")
	wantErr(t, c, "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-ttl, allkeys-lru, noeviction",
		"CONFIG", "SET", "maxmemory-policy", "allkeys-random")
	if got := infoInt(t, c, "stats", "evicted_keys"); got != 0 {
		t.Errorf("evicted_keys = %d under noeviction", got)
	}
}

// TestMaxMemoryExpiryMakesRoom: keys whose buckets are full again are
// dropped by the sweep, which makes room for new keys.
func TestMaxMemoryExpiryMakesRoom(t *testing.T) {
	s := start(t, opts{args: []string{"--maxmemory", "5mb"}})
	c := newGoRedis(t, s, nil)
	// Capacity 10 at 2 tokens/s, cost 4: full again 2 s later.
	n := fillUntilOOM(t, c, "short:", 10, "2", 4)
	t.Logf("%d keys before OOM", n)
	waitCreate(t, c, "after-expiry")
}

// TestMaxMemoryVolatileTTL: above the limit, the buckets closest to full
// are evicted and new keys keep being created.
func TestMaxMemoryVolatileTTL(t *testing.T) {
	s := start(t, opts{args: []string{"--maxmemory", "64mb", "--maxmemory-policy", "volatile-ttl", "--save-interval", "0"}})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()
	// 200 hot keys, 900 of 1000 tokens taken (full again in 900,000 s),
	// then 60,000 cold keys with 1 token taken (full again in 1000 s).
	p := c.Pipeline()
	for i := range 200 {
		p.Do(ctx, "RL.ALLOW", fmt.Sprintf("hot:%d", i), 1000, "0.001", 900)
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for base := 0; base < 60_000; base += 1000 {
		p := c.Pipeline()
		for i := range 1000 {
			p.Do(ctx, "RL.ALLOW", fmt.Sprintf("cold:%d", base+i), 1000, "0.001", 1)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	used := infoInt(t, c, "memory", "used_memory")
	limit := used - 1<<20 // about 20,000 keys over
	wantReply(t, c, "OK", "CONFIG", "SET", "maxmemory", strconv.FormatInt(limit, 10))
	m, err := c.InfoMap(ctx, "memory").Result()
	if err != nil {
		t.Fatal(err)
	}
	if p := m["Memory"]["maxmemory_policy"]; p != "volatile-ttl" {
		t.Errorf("maxmemory_policy %q", p)
	}
	evicted := infoInt(t, c, "stats", "evicted_keys")
	if evicted == 0 {
		t.Fatal("nothing evicted after lowering maxmemory below used memory")
	}
	t.Logf("lowered maxmemory from above %d to %d: %d keys evicted", used, limit, evicted)
	// New keys keep being created: the monitor evicts to make room.
	for i := range 30_000 {
		if err := c.Do(ctx, "RL.ALLOW", fmt.Sprintf("new:%d", i), 1000, "0.001", 1).Err(); err != nil && err.Error() != oomText {
			t.Fatalf("new:%d: %v", i, err)
		}
	}
	waitCreate(t, c, "last-new")
	// The hot buckets, furthest from full, all survive.
	p = c.Pipeline()
	var ex []*redis.IntCmd
	for i := range 200 {
		ex = append(ex, p.Exists(ctx, fmt.Sprintf("hot:%d", i)))
	}
	if _, err := p.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, e := range ex {
		if e.Val() != 1 {
			t.Fatalf("hot:%d was evicted", i)
		}
	}
	after := infoInt(t, c, "stats", "evicted_keys")
	if after <= evicted {
		t.Errorf("evicted_keys %d -> %d while new keys were created above the limit", evicted, after)
	}
	// Within a few monitor rounds, used memory is back under the limit.
	deadline := time.Now().Add(10 * time.Second)
	for used := infoInt(t, c, "memory", "used_memory"); used > limit; used = infoInt(t, c, "memory", "used_memory") {
		if time.Now().After(deadline) {
			t.Fatalf("used_memory %d, limit %d: eviction did not get under the limit", used, limit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestMaxMemoryCluster: in a three-process cluster, the leader's limit
// refuses new keys through every node with the same OOM text, and its
// evictions (log entries) leave every replica with identical state.
func TestMaxMemoryCluster(t *testing.T) {
	c := startCluster(t, serverBin, "--save-interval", "0")
	leader := c.waitLeader(20 * time.Second)
	lc := clusterClient(t, leader.respAddr)
	ctx := context.Background()
	for base := 0; base < 20_000; base += 500 {
		p := lc.Pipeline()
		for i := range 500 {
			// Costs 1..100 of 1000 at one token per 1000 s: distinct
			// distances from full.
			p.Do(ctx, "RL.ALLOW", fmt.Sprintf("ck:%d", base+i), 1000, "0.001", 1+(base+i)%100)
		}
		if _, err := p.Exec(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// noeviction: a tiny limit on the leader refuses new keys on every
	// node; existing keys keep working.
	wantReply(t, lc, "OK", "CONFIG", "SET", "maxmemory", "1")
	for _, n := range c.live() {
		nc := clusterClient(t, n.respAddr)
		pollUntil(t, 10*time.Second, "OOM through "+n.id, func() bool {
			err := nc.Do(ctx, "RL.ALLOW", "fresh-"+n.id, 10, 1, 1).Err()
			return err != nil && err.Error() == oomText
		})
		if err := nc.Do(ctx, "RL.ALLOW", "ck:1", 1000, "0.001", 1).Err(); err != nil {
			t.Fatalf("existing key through %s above maxmemory: %v", n.id, err)
		}
	}
	// volatile-ttl: about 5,000 keys over the limit get evicted.
	wantReply(t, lc, "OK", "CONFIG", "SET", "maxmemory", "0")
	used := infoInt(t, lc, "memory", "used_memory")
	wantReply(t, lc, "OK", "CONFIG", "SET", "maxmemory-policy", "volatile-ttl")
	wantReply(t, lc, "OK", "CONFIG", "SET", "maxmemory", strconv.FormatInt(used-5000*(32+8), 10))
	pollUntil(t, 10*time.Second, "evictions", func() bool { return infoInt(t, lc, "stats", "evicted_keys") > 0 })
	// Stop evicting (the leader's heap, which counts, moves with Raft's
	// own buffers), then compare the replicas.
	wantReply(t, lc, "OK", "CONFIG", "SET", "maxmemory", "0")
	time.Sleep(300 * time.Millisecond) // a round in flight ends
	_, digest := c.converge(20 * time.Second)
	evicted := infoInt(t, lc, "stats", "evicted_keys")
	for _, n := range c.live() {
		if got := infoInt(t, clusterClient(t, n.respAddr), "stats", "evicted_keys"); got != evicted {
			t.Errorf("%s applied %d evictions, the leader %d", n.id, got, evicted)
		}
	}
	t.Logf("%d keys evicted, replicas identical (digest %.16s)", evicted, digest)
	// Sampled eviction takes the keys closest to full first: of the keys
	// with 1 to 10 tokens taken fewer survive than of those with 91 to
	// 100.
	survivors := func(lo, hi int) int {
		n := 0
		for i := range 20_000 {
			if cost := 1 + i%100; cost >= lo && cost <= hi {
				n += int(lc.Exists(ctx, fmt.Sprintf("ck:%d", i)).Val())
			}
		}
		return n
	}
	if near, far := survivors(1, 10), survivors(91, 100); near >= far || far < 1000 {
		t.Errorf("survivors: %d of 2000 closest to full, %d of 2000 furthest", near, far)
	}
}
