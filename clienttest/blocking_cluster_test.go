package clienttest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestClusterBlockingWokenByApply parks BLPOP and BZPOPMIN clients on a
// follower of a three-process cluster and pushes through the leader: the
// follower applies the write from the log, and that wakes its parked
// clients. The processes' own retry (RLSERVER_TEST_BLOCK_POLL) is an
// hour, so only the applied write can wake them before their 20 s
// timeouts. A BLPOP on a key nobody writes times out with a null, and
// the element went to exactly one client.
func TestClusterBlockingWokenByApply(t *testing.T) {
	nodes := threeNodes(t)
	for _, n := range nodes {
		n.env = append(n.env, "RLSERVER_TEST_BLOCK_POLL=1h")
	}
	c := startClusterOf(t, serverBin, nodes)
	leader := c.waitLeader(10 * time.Second)
	c.converge(10 * time.Second)
	var follower *cnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	ctx := context.Background()
	lc := clusterClient(t, leader.respAddr)
	blocked := func(args ...any) chan []string {
		out := make(chan []string, 1)
		fc := redis.NewClient(&redis.Options{Addr: follower.respAddr, Protocol: 2, MaxRetries: -1, ReadTimeout: 30 * time.Second})
		t.Cleanup(func() { fc.Close() })
		go func() {
			v, err := fc.Do(ctx, args...).StringSlice()
			if err != nil && err != redis.Nil {
				v = []string{"error: " + err.Error()}
			}
			out <- v
		}()
		return out
	}
	list, zset := blocked("BLPOP", "bq:list", 20), blocked("BZPOPMIN", "bq:zset", 20)
	// Both parked on the follower before the writes.
	pollUntil(t, 10*time.Second, "two clients blocked on "+follower.id, func() bool {
		return infoField(t, clusterClient(t, follower.respAddr), "clients", "blocked_clients") == "2"
	})
	wrote := time.Now()
	if err := lc.RPush(ctx, "bq:list", "job1").Err(); err != nil {
		t.Fatalf("RPUSH through the leader: %v", err)
	}
	if err := lc.ZAdd(ctx, "bq:zset", redis.Z{Score: 2, Member: "m"}).Err(); err != nil {
		t.Fatalf("ZADD through the leader: %v", err)
	}
	for _, tc := range []struct {
		name string
		ch   chan []string
		want []string
	}{
		{"BLPOP", list, []string{"bq:list", "job1"}},
		{"BZPOPMIN", zset, []string{"bq:zset", "m", "2"}},
	} {
		select {
		case got := <-tc.ch:
			t.Logf("%s on %s answered %q %s after the write", tc.name, follower.id, got, time.Since(wrote).Round(time.Millisecond))
			if len(got) != len(tc.want) || (len(got) > 0 && (got[0] != tc.want[0] || got[1] != tc.want[1])) {
				t.Errorf("%s on %s: %q, want %q", tc.name, follower.id, got, tc.want)
			}
		case <-time.After(15 * time.Second):
			t.Fatalf("%s on %s: still blocked 15 s after the write through %s", tc.name, follower.id, leader.id)
		}
	}
	// The timeout, through the follower: a null.
	select {
	case got := <-blocked("BLPOP", "bq:idle", 0.5):
		if got != nil {
			t.Errorf("BLPOP of an idle key on %s: %q, want a null", follower.id, got)
		}
	case <-time.After(15 * time.Second):
		t.Fatalf("BLPOP bq:idle 0.5 on %s: still blocked after 15 s", follower.id)
	}
	if n, err := lc.LLen(ctx, "bq:list").Result(); err != nil || n != 0 {
		t.Errorf("LLEN bq:list = %d, %v after the pop; want 0", n, err)
	}
}
