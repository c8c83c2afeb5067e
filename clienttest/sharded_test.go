package clienttest

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestShardedForward: three processes, three data groups, with
// --cluster-redirect forward, driven by clients that are not cluster-aware:
// every node serves every key (forwarding to the key's group leader), the
// group leaders spread one per process, a killed leader's group is taken
// over and handed back when it returns, and RL.CLUSTER ADDGROUP grows the
// cluster by a group.
func TestShardedForward(t *testing.T) {
	c := startSharded(t, 3, "--cluster-redirect", "forward", "--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	c.waitPreferred(3, 20*time.Second)

	ctx := context.Background()
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = clusterClient(t, n.respAddr)
	}
	const keys = 300
	// Each key is charged once through each of two different nodes: the
	// second sees the first's charge, whichever groups they lead.
	for round := range 2 {
		for k := range keys {
			ok, rem, err := allowOnce(ctx, clients[(k+round)%3], fmt.Sprintf("fwd%d", k), 5, 1)
			if err != nil || !ok || rem != int64(4-round) {
				t.Fatalf("key fwd%d round %d: allowed %v remaining %d err %v; want allowed, %d left", k, round, ok, rem, err, 4-round)
			}
		}
	}
	for i, cl := range clients {
		if n, err := cl.DBSize(ctx).Result(); err != nil || n != keys {
			t.Fatalf("DBSIZE on %s: %d, %v; want %d (forwarding counts every group)", c.nodes[i].id, n, err, keys)
		}
	}
	// Each group holds its slots' share of the keys, on every replica.
	c.converge(20 * time.Second)
	total := 0
	for _, g := range groupsOf(c.nodes[0]) {
		if g.keys == 0 || g.keys == keys {
			t.Errorf("group %d holds %d of %d keys: the keys should spread over the groups", g.id, g.keys, keys)
		}
		total += g.keys
	}
	if total != keys {
		t.Fatalf("the groups hold %d keys, want %d", total, keys)
	}

	// Kill the leader of group 1: a survivor takes it over, every key is
	// still served through the others, and the restarted node gets its
	// group back.
	victim := c.node(groupLeaders(c.nodes[1])[1])
	c.kill9(victim)
	c.waitGroups(3, 10*time.Second)
	var other *redis.Client
	for i, n := range c.nodes {
		if n != victim {
			other = clients[i]
		}
	}
	for k := range keys {
		ok, rem, err := allowOnce(ctx, other, fmt.Sprintf("fwd%d", k), 5, 1)
		if err != nil || !ok || rem != 2 {
			t.Fatalf("after killing %s, key fwd%d: allowed %v remaining %d err %v; want allowed, 2 left", victim.id, k, ok, rem, err)
		}
	}
	c.launch(victim)
	c.waitGroups(3, 20*time.Second)
	c.waitPreferred(3, 30*time.Second)
	c.converge(20 * time.Second)

	// Grow by one group: it gets a leader on every node's view, no slots.
	v, err := rawDo(c.nodes[2].respAddr, 10*time.Second, "RL.CLUSTER", "ADDGROUP")
	if err != nil || v.kind != ':' || v.num != 4 {
		t.Fatalf("RL.CLUSTER ADDGROUP: %v, %v; want :4", v, err)
	}
	c.waitGroups(4, 20*time.Second)
	for _, g := range groupsOf(c.nodes[0]) {
		if g.id == 4 && g.slots != "-" {
			t.Fatalf("the new group owns slots %q; want none until slots move", g.slots)
		}
	}
	// Policies reach every group, the new one included.
	if err := clients[0].Do(ctx, "RL.POLICY", "SET", "p", "ALLOW", "3", "0.000001").Err(); err != nil {
		t.Fatal(err)
	}
	for k := range 30 {
		v, err := clients[1].Do(ctx, "RL.CHECK", "p", fmt.Sprintf("pol%d", k)).Slice()
		if err != nil || len(v) == 0 || v[0] != int64(1) {
			t.Fatalf("RL.CHECK p pol%d: %v, %v", k, v, err)
		}
	}

	// Metrics and the status page show every group: one leader each, the
	// same keys on every replica, the node's keys summed over its groups.
	// (The new group may first be led by any node, then handed to its
	// preferred leader, n1.)
	c.waitPreferred(4, 20*time.Second)
	c.converge(20 * time.Second)
	// INFO says which groups each node's counts cover: n1 leads 1 and 4.
	for i, n := range c.nodes {
		led := map[int]string{0: "1,4", 1: "2", 2: "3"}[i]
		if g, l, r := nodeInfo(n, "cluster_groups"), nodeInfo(n, "cluster_led_groups"), nodeInfo(n, "cluster_replica_groups"); g != "4" || l != led || r != "1,2,3,4" {
			t.Errorf("node %s INFO: cluster_groups %q, cluster_led_groups %q, cluster_replica_groups %q; want 4, %q, 1,2,3,4", n.id, g, l, r, led)
		}
	}
	leaders := map[string]float64{}
	groupKeys := map[string]float64{}
	for _, n := range c.nodes {
		base := metricsAddrOf(t, n)
		fams := scrape(t, base)
		for g := 1; g <= 4; g++ {
			id := strconv.Itoa(g)
			v, ok := metricValue(fams, "rlserver_group_leader", "group", id)
			if !ok {
				t.Fatalf("node %s: no rlserver_group_leader for group %d", n.id, g)
			}
			leaders[id] += v
			k, _ := metricValue(fams, "rlserver_group_keys", "group", id)
			if prev, seen := groupKeys[id]; seen && prev != k {
				t.Errorf("group %d: %v keys on node %s, %v on another", g, k, n.id, prev)
			}
			groupKeys[id] = k
		}
		wantMetric(t, fams, groupKeys["1"]+groupKeys["2"]+groupKeys["3"]+groupKeys["4"], "rlserver_keys", "kind", "gcra")
		if code, body := httpGet(t, base+"/readyz"); code != 200 {
			t.Errorf("node %s /readyz = %d %s with every group led", n.id, code, body)
		}
		code, body := httpGet(t, base+"/api/status")
		var st struct {
			Sharded *struct {
				Groups []json.RawMessage `json:"groups"`
			} `json:"sharded"`
		}
		if code != 200 || json.Unmarshal([]byte(body), &st) != nil || st.Sharded == nil || len(st.Sharded.Groups) != 4 {
			t.Errorf("node %s /api/status: %d, sharded %+v", n.id, code, st.Sharded)
		}
	}
	for g, n := range leaders {
		if n != 1 {
			t.Errorf("group %s has %v leaders in the metrics, want 1", g, n)
		}
	}
	if total := groupKeys["1"] + groupKeys["2"] + groupKeys["3"]; total != keys+30 || groupKeys["4"] != 0 {
		t.Errorf("groups hold %v keys, want %d in groups 1-3 and none in 4", groupKeys, keys+30)
	}
}

// waitPreferred waits until every group g of groups is led by its
// preferred leader, the ((g-1) mod 3)-th node by id (n1, n2, n3, n1, ...),
// on every node's view.
func (c *pcluster) waitPreferred(groups int, timeout time.Duration) {
	c.t.Helper()
	var last map[int]string
	ok := pollFor(timeout, func() bool {
		for _, n := range c.nodes {
			last = groupLeaders(n)
			for g := 1; g <= groups; g++ {
				if last[g] != fmt.Sprintf("n%d", (g-1)%3+1) {
					return false
				}
			}
		}
		return true
	})
	if !ok {
		c.t.Fatalf("groups not led by their preferred leaders within %v: %v", timeout, last)
	}
}
