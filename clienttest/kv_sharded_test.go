package clienttest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestShardedDataCommands: on a sharded cluster (three groups) go-redis's
// cluster client runs Redis's data commands and transactions by hash slot;
// a transaction or a multi-key command across slots is CROSSSLOT, as in
// Redis Cluster, and one on a hash tag runs; every group's replicas agree.
func TestShardedDataCommands(t *testing.T) {
	c := startSharded(t, 3)
	c.waitPreferred(3, 20*time.Second)
	ctx := context.Background()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{c.nodes[0].respAddr, c.nodes[1].respAddr, c.nodes[2].respAddr}, Protocol: 2, MaxRetries: 5})
	t.Cleanup(func() { cc.Close() })

	const keys = 60
	for i := range keys {
		k := fmt.Sprintf("cnt%d", i)
		if err := cc.IncrBy(ctx, k, int64(i)).Err(); err != nil {
			t.Fatalf("INCRBY %s: %v", k, err)
		}
		if err := cc.Expire(ctx, k, time.Hour).Err(); err != nil {
			t.Fatalf("EXPIRE %s: %v", k, err)
		}
		// MULTI/EXEC on one key: go-redis sends it to the slot's node.
		var incr *redis.IntCmd
		if _, err := cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
			incr = p.Incr(ctx, k)
			p.Expire(ctx, k, time.Hour)
			return nil
		}); err != nil || incr.Val() != int64(i+1) {
			t.Fatalf("MULTI INCR %s: %d, %v; want %d", k, incr.Val(), err, i+1)
		}
		if err := cc.HSet(ctx, "h"+k, "tokens", i, "ts", 7).Err(); err != nil {
			t.Fatalf("HSET: %v", err)
		}
		if err := cc.ZAdd(ctx, "z"+k, redis.Z{Score: float64(i), Member: "m"}).Err(); err != nil {
			t.Fatalf("ZADD: %v", err)
		}
	}
	for i := range keys {
		k := fmt.Sprintf("cnt%d", i)
		if v, err := cc.Get(ctx, k).Int64(); err != nil || v != int64(i+1) {
			t.Fatalf("GET %s = %d, %v; want %d", k, v, err, i+1)
		}
		if v, err := cc.HGet(ctx, "h"+k, "tokens").Int64(); err != nil || v != int64(i) {
			t.Fatalf("HGET h%s = %d, %v", k, v, err)
		}
	}

	// Across slots: refused whole, as Redis Cluster refuses it.
	n := c.nodes[0]
	rc := redis.NewClient(&redis.Options{Addr: n.respAddr, Protocol: 2})
	t.Cleanup(func() { rc.Close() })
	if err := rc.Do(ctx, "MSET", "a{x}", 1, "b{y}", 2).Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Errorf("MSET across slots: %v, want CROSSSLOT", err)
	}
	// A transaction over two hash tags on one node: the second command
	// is refused while queuing and EXEC aborts.
	conn := rc.Conn()
	defer conn.Close()
	// Pick two keys whose slots this node serves, in different slots.
	var mine []string
	for i := 0; len(mine) < 2 && i < 10000; i++ {
		k := fmt.Sprintf("tx%d", i)
		err := conn.Do(ctx, "GET", k).Err()
		if err == redis.Nil && (len(mine) == 0 || slotOf(t, conn, k) != slotOf(t, conn, mine[0])) {
			mine = append(mine, k)
		}
	}
	if len(mine) < 2 {
		t.Fatal("found no two keys served by one node in two slots")
	}
	if err := conn.Do(ctx, "MULTI").Err(); err != nil {
		t.Fatal(err)
	}
	if err := conn.Do(ctx, "INCR", mine[0]).Err(); err != nil {
		t.Fatalf("queue INCR %s: %v", mine[0], err)
	}
	if err := conn.Do(ctx, "INCR", mine[1]).Err(); err == nil || !strings.HasPrefix(err.Error(), "CROSSSLOT") {
		t.Errorf("queue INCR %s in another slot: %v, want CROSSSLOT", mine[1], err)
	}
	if err := conn.Do(ctx, "EXEC").Err(); err == nil || !strings.HasPrefix(err.Error(), "EXECABORT") {
		t.Errorf("EXEC after CROSSSLOT: %v, want EXECABORT", err)
	}
	// On one hash tag a multi-key transaction runs.
	if _, err := cc.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.MSet(ctx, "{t}a", 1, "{t}b", 2)
		p.IncrBy(ctx, "{t}a", 10)
		return nil
	}); err != nil {
		t.Fatalf("MULTI on one tag: %v", err)
	}
	if v, err := cc.MGet(ctx, "{t}a", "{t}b").Result(); err != nil || fmt.Sprint(v) != "[11 2]" {
		t.Errorf("MGET {t}a {t}b = %v, %v; want [11 2]", v, err)
	}
	c.converge(20 * time.Second)
}

// slotOf asks the server for key's hash slot.
func slotOf(t *testing.T, conn *redis.Conn, key string) int64 {
	t.Helper()
	s, err := conn.Do(context.Background(), "CLUSTER", "KEYSLOT", key).Int64()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
