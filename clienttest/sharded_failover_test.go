package clienttest

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/slots"
)

// TestShardedFailover kills the leader of each data group in turn
// (SIGKILL) under load from go-redis ClusterClients: each group is served
// again within the single group's failover bound, and the history of every
// key is linearizable (no acknowledged decision lost, none applied twice).
//
// go-redis's ClusterClient retries a command on another node after a
// connection error (at least once: a decision the dead leader committed
// would be taken twice), so the load's clients run with MaxRedirects -1:
// they route by the cluster's slot map and reload it after MOVED, and the
// test itself sends again after MOVED, TRYAGAIN and CLUSTERDOWN (never
// applied), and records a connection error as an unknown outcome.
func TestShardedFailover(t *testing.T) {
	c := startSharded(t, 3)
	c.waitPreferred(3, 20*time.Second)
	// redis-cli's own cluster checker finds a healthy Redis Cluster.
	out, err := exec.Command("redis-cli", "--cluster", "check", c.nodes[1].respAddr).CombinedOutput()
	for _, want := range []string{"[OK] All nodes agree about slots configuration.", "[OK] All 16384 slots covered.", "3 masters"} {
		if !strings.Contains(string(out), want) {
			t.Fatalf("redis-cli --cluster check (%v): no %q in\n%s", err, want, out)
		}
	}
	var keys []string
	for i := range 48 {
		keys = append(keys, fmt.Sprintf("sk%d", i))
	}
	ld := startMoveLoad(t, c, 6, keys) // capacity histCapacity: counterModel

	time.Sleep(500 * time.Millisecond)
	var times []time.Duration
	for g := 1; g <= 3; g++ {
		leader := c.node(groupLeaders(c.live()[0])[g])
		if leader == nil {
			t.Fatalf("group %d has no leader", g)
		}
		probe := keyInGroup(c, g, fmt.Sprintf("probe%d-", g))
		killed := time.Now()
		c.kill9(leader)
		d := c.probeServedCluster(killed, probe, 10*time.Second)
		times = append(times, d)
		t.Logf("group %d: leader %s killed, the group served again after %v", g, leader.id, d.Round(time.Millisecond))
		time.Sleep(300 * time.Millisecond) // load while the node is down
		c.launch(leader)
		c.waitGroups(3, 20*time.Second)
	}
	time.Sleep(300 * time.Millisecond)
	ld.end()
	c.converge(20 * time.Second)
	if res := ld.h.check(t, time.Minute); res != porcupine.Ok {
		t.Fatalf("history under group leader kills: %s", res)
	}
	moved := 0
	for _, n := range c.live() {
		moved += nodeInfoInt(n, "cluster_moved_replies")
	}
	t.Logf("failover per group %v; MOVED replies sent %d; %s", roundAll(times), moved, ld.h.summary())
	// The goal is 2 s; a shared 2-core CI machine gets 4 s (a loaded run
	// measured 2.28 s), and make faults holds the goal.
	bound := 4 * time.Second
	if faultLong() {
		bound = 2 * time.Second
	}
	for i, d := range times {
		if d > bound {
			t.Errorf("group %d: served after %v, want within %v", i+1, d, bound)
		}
	}
}

// keyInGroup returns a key with prefix whose slot group g owns.
func keyInGroup(c *pcluster, g int, prefix string) string {
	c.t.Helper()
	gs := groupsOf(c.live()[0])
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		s := slots.OfString(k)
		for _, gl := range gs {
			for _, r := range strings.Split(gl.slots, ",") {
				var lo, hi int
				if n, _ := fmt.Sscanf(r, "%d-%d", &lo, &hi); n == 2 && s >= lo && s <= hi && gl.id == g {
					return k
				}
			}
		}
		if i > 100000 {
			c.t.Fatalf("no key for group %d in %+v", g, gs)
		}
	}
}

// exactClusterClient is a go-redis ClusterClient over the live nodes that
// never retries or follows a redirection by itself.
func exactClusterClient(t *testing.T, c *pcluster) *redis.ClusterClient {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.respAddr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                      addrs,
		Protocol:                   2,
		MaxRedirects:               -1,
		MaxRetries:                 -1,
		DialTimeout:                300 * time.Millisecond,
		ReadTimeout:                4 * time.Second, // above the commit timeout
		WriteTimeout:               2 * time.Second,
		PoolSize:                   4,
		DisableIdentity:            true,
		ClusterStateReloadInterval: time.Second,
	})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// allowCluster runs one RL.ALLOW through cc, sending it again while the
// reply says it was not applied (MOVED: after cc reloaded its slot map;
// TRYAGAIN, CLUSTERDOWN, a refused dial), for up to limit.
func allowCluster(ctx context.Context, cc *redis.ClusterClient, key string, capacity, cost int64, limit time.Duration) (bool, int64, error) {
	deadline := time.Now().Add(limit)
	for {
		v, err := cc.Do(ctx, allowArgs(key, capacity, cost)...).Int64Slice()
		if err == nil {
			if len(v) != 4 {
				return false, 0, fmt.Errorf("reply %v", v)
			}
			return v[0] == 1, v[1], nil
		}
		if !notApplied(err) || time.Now().After(deadline) {
			return false, 0, err
		}
		if !strings.HasPrefix(err.Error(), "MOVED") {
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// notApplied reports an error after which the command certainly did not
// take effect.
func notApplied(err error) bool {
	var rerr redis.Error
	if errors.As(err, &rerr) && strings.HasPrefix(rerr.Error(), "MOVED") {
		return true
	}
	return classify(err) == opNotApplied
}

// probeServedCluster measures how long after since key is served: it asks
// the live nodes in turn, following a MOVED reply once, so the figure is
// the cluster's failover, not a client's slot-map reload interval.
func (c *pcluster) probeServedCluster(since time.Time, key string, limit time.Duration) time.Duration {
	c.t.Helper()
	for i := 0; ; i++ {
		live := c.live()
		addr := live[i%len(live)].respAddr
		for hop := 0; hop < 2; hop++ {
			v, err := rawDo(addr, 3*time.Second, "RL.ALLOW", key, strconv.Itoa(histCapacity), "0.000001", "1")
			if err == nil && v.kind == '*' {
				return time.Since(since)
			}
			if err != nil || v.kind != '-' || !strings.HasPrefix(v.str, "MOVED ") {
				break
			}
			f := strings.Fields(v.str)
			addr = f[len(f)-1]
		}
		if time.Since(since) > limit {
			c.t.Fatalf("%s not served %v after the kill", key, limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (h *history) summary() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	keys := make([]string, 0, len(h.stats))
	for k := range h.stats {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%d ", k, h.stats[k])
	}
	return strings.TrimSpace(b.String())
}
