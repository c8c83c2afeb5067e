package clienttest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestPlacedForward: four nodes, four groups, three replicas each, so
// every node lacks a group. Three nodes run --cluster-redirect forward:
// a plain go-redis client (not cluster-aware) on one of them is served
// every key, those of the group the node does not hold included, through
// that group's leader, with exact buckets charged across nodes; DBSIZE
// counts every group, FLUSHALL and RL.POLICY SET reach every group, and
// data commands, a transaction and a script on a key of the missing
// group are served.
// The fourth node runs --cluster-redirect moved and answers -MOVED to the
// group's leader for a group it does not hold.
func TestPlacedForward(t *testing.T) {
	const groups = 4
	var nodes []*cnode
	for i := range 4 {
		n := &cnode{
			id:       fmt.Sprintf("n%d", i+1),
			respAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
			raftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
			dir:      t.TempDir(),
		}
		if i < 3 {
			n.args = []string{"--cluster-redirect", "forward"}
		}
		nodes = append(nodes, n)
	}
	c := startClusterOf(t, serverBin, nodes, "--groups", strconv.Itoa(groups), "--replicas", "3")
	c.waitPlaced(groups, 60*time.Second)

	gs := groupsOf(nodes[0])
	missing := map[string][]int{} // node id -> the groups it does not hold
	leaderOf := map[int]string{}
	for _, g := range gs {
		leaderOf[g.id] = g.leader
		for _, n := range nodes {
			if !slices.Contains(g.replicas, n.id) {
				missing[n.id] = append(missing[n.id], g.id)
			}
		}
	}
	if len(missing["n1"]) == 0 || len(missing["n4"]) == 0 {
		t.Fatalf("n1 lacks groups %v, n4 %v: the test needs each to lack one (%+v)", missing["n1"], missing["n4"], gs)
	}

	ctx := context.Background()
	type namedClient struct {
		id string
		c  *redis.Client
	}
	var clients []namedClient
	for _, n := range nodes[:3] {
		clients = append(clients, namedClient{n.id, clusterClient(t, n.respAddr)})
	}
	// Three keys per group; each is charged capacity+2 times, first
	// through n1, then through each forwarding node in turn: exactly the
	// capacity is admitted, the remainders counting down across nodes.
	const capacity, perGroup = 3, 3
	var keys []string
	for g := 1; g <= groups; g++ {
		for j := range perGroup {
			keys = append(keys, keyInGroup(c, g, fmt.Sprintf("pfwd%d_%d_", g, j)))
		}
	}
	for _, k := range keys {
		for r := range capacity + 2 {
			cl := clients[r%len(clients)]
			ok, rem, err := allowOnce(ctx, cl.c, k, capacity, 1)
			if err != nil {
				t.Fatalf("RL.ALLOW %s #%d through %s: %v", k, r+1, cl.id, err)
			}
			if wantOK := r < capacity; ok != wantOK || (wantOK && rem != int64(capacity-1-r)) {
				t.Fatalf("RL.ALLOW %s #%d through %s: allowed %v remaining %d; want allowed %v, %d left", k, r+1, cl.id, ok, rem, wantOK, max(capacity-1-r, 0))
			}
		}
	}
	n1 := clients[0].c
	if n, err := n1.DBSize(ctx).Result(); err != nil || n != int64(len(keys)) {
		t.Fatalf("DBSIZE through n1: %d, %v; want %d (every group, forwarding)", n, err, len(keys))
	}

	// Data commands, a script and a policy check on keys of a group n1
	// does not hold.
	far := missing["n1"][0]
	dk := keyInGroup(c, far, "pfwd-data")
	if err := n1.Set(ctx, dk, "7", 0).Err(); err != nil {
		t.Fatalf("SET %s (group %d) through n1: %v", dk, far, err)
	}
	if v, err := n1.Incr(ctx, dk).Result(); err != nil || v != 8 {
		t.Fatalf("INCR %s through n1: %d, %v; want 8", dk, v, err)
	}
	if v, err := n1.Eval(ctx, "return redis.call('INCRBY', KEYS[1], ARGV[1])", []string{dk}, 2).Int64(); err != nil || v != 10 {
		t.Fatalf("EVAL INCRBY %s through n1: %d, %v; want 10", dk, v, err)
	}
	cmds, err := n1.TxPipelined(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, dk)
		p.Get(ctx, dk)
		return nil
	})
	if err != nil || len(cmds) != 2 || cmds[1].(*redis.StringCmd).Val() != "11" {
		t.Fatalf("MULTI INCR GET EXEC %s through n1: %v, %v; want 11", dk, cmds, err)
	}
	if err := n1.Do(ctx, "RL.POLICY", "SET", "pf", "ALLOW", "2", "0.000001").Err(); err != nil {
		t.Fatalf("RL.POLICY SET through n1: %v", err)
	}
	pk := keyInGroup(c, far, "pfwd-pol")
	for r, want := range []int64{1, 1, 0} {
		v, err := n1.Do(ctx, "RL.CHECK", "pf", pk).Slice()
		if err != nil || len(v) == 0 || v[0] != want {
			t.Fatalf("RL.CHECK pf %s (group %d) #%d through n1: %v, %v; want allowed %d", pk, far, r+1, v, err, want)
		}
	}

	// The node without forwarding redirects a key of a group it does not
	// hold to that group's leader.
	moved := missing["n4"][0]
	mk := keyInGroup(c, moved, "pfwd-moved")
	err = clusterClient(t, nodes[3].respAddr).Do(ctx, allowArgs(mk, capacity, 1)...).Err()
	leader := c.node(leaderOf[moved])
	if err == nil || leader == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !strings.HasSuffix(err.Error(), " "+leader.respAddr) {
		t.Fatalf("RL.ALLOW %s (group %d) on n4 without forwarding: %v; want MOVED to the leader %s", mk, moved, err, leaderOf[moved])
	}

	// FLUSHALL through n1 empties every group.
	if err := n1.FlushAll(ctx).Err(); err != nil {
		t.Fatalf("FLUSHALL through n1: %v", err)
	}
	if n, err := clients[1].c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE through n2 after FLUSHALL through n1: %d, %v; want 0", n, err)
	}
}
