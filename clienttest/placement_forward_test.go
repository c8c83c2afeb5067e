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
	replicasOf := map[int][]string{}
	for _, g := range gs {
		replicasOf[g.id] = g.replicas
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
	// Three keys per group; each is charged until denied, first through
	// n1, then through each forwarding node in turn: exactly the capacity
	// is admitted, the remainders counting down across nodes. A command
	// certainly not applied (TRYAGAIN, CLUSTERDOWN: an election on a busy
	// machine) is sent again; an UNKNOWN outcome is not, and widens what
	// the count may be by one (it may or may not have been applied).
	const capacity, perGroup = 3, 3
	var keys []string
	for g := 1; g <= groups; g++ {
		for j := range perGroup {
			keys = append(keys, keyInGroup(c, g, fmt.Sprintf("pfwd%d_%d_", g, j)))
		}
	}
	unknowns := 0
	for _, k := range keys {
		allowed, maybe := 0, 0
		for r := 0; ; r++ {
			if r > 3*capacity {
				t.Fatalf("%s: still admitting after %d calls", k, r)
			}
			cl := clients[r%len(clients)]
			var ok bool
			var rem int64
			err := untilApplied(t, func() error {
				var err error
				ok, rem, err = allowOnce(ctx, cl.c, k, capacity, 1)
				return err
			})
			if err != nil && strings.HasPrefix(err.Error(), "UNKNOWN") {
				t.Logf("RL.ALLOW %s through %s: %v (counted as maybe applied)", k, cl.id, err)
				maybe++
				continue
			}
			if err != nil {
				t.Fatalf("RL.ALLOW %s #%d through %s: %v", k, r+1, cl.id, err)
			}
			if !ok {
				break
			}
			allowed++
			if taken := int64(capacity) - rem; taken < int64(allowed) || taken > int64(allowed+maybe) {
				t.Fatalf("RL.ALLOW %s #%d through %s: %d left after %d admitted (%d unknown); want %d", k, r+1, cl.id, rem, allowed, maybe, capacity-allowed)
			}
		}
		if allowed > capacity || allowed+maybe < capacity {
			t.Fatalf("%s: %d admitted, %d unknown; want exactly %d applied", k, allowed, maybe, capacity)
		}
		unknowns += maybe
	}
	if unknowns > 0 {
		t.Logf("%d unknown outcomes (elections on a busy machine)", unknowns)
	}
	n1 := clients[0].c
	var size int64
	if err := untilApplied(t, func() (err error) { size, err = n1.DBSize(ctx).Result(); return err }); err != nil || size != int64(len(keys)) {
		t.Fatalf("DBSIZE through n1: %d, %v; want %d (every group, forwarding)", size, err, len(keys))
	}
	// SCAN and KEYS through n1 list every group's keys, those of groups
	// it does not hold through their leaders, each once.
	var scanned []string
	if err := untilApplied(t, func() error {
		scanned = scanned[:0]
		var cursor uint64
		for {
			page, next, err := n1.Scan(ctx, cursor, "*", 3).Result()
			if err != nil {
				return err
			}
			scanned = append(scanned, page...)
			if cursor = next; cursor == 0 {
				return nil
			}
		}
	}); err != nil {
		t.Fatalf("SCAN through n1: %v", err)
	}
	slices.Sort(scanned)
	want := slices.Sorted(slices.Values(keys))
	if !slices.Equal(scanned, want) {
		t.Fatalf("SCAN through n1 listed %q, want every key once: %q", scanned, want)
	}
	var listed []string
	if err := untilApplied(t, func() (err error) { listed, err = n1.Keys(ctx, "pfwd*").Result(); return err }); err != nil || len(listed) != len(keys) {
		t.Fatalf("KEYS pfwd* through n1: %d keys, %v; want %d", len(listed), err, len(keys))
	}

	// Data commands, a transaction, a script and a policy check on keys
	// of a group n1 does not hold (each idempotent, so sent again after
	// any failure).
	far := missing["n1"][0]
	dk := keyInGroup(c, far, "pfwd-data")
	if err := untilDone(t, func() error { return n1.Set(ctx, dk, "7", 0).Err() }); err != nil {
		t.Fatalf("SET %s (group %d) through n1: %v", dk, far, err)
	}
	var cmds []redis.Cmder
	err := untilDone(t, func() (err error) {
		cmds, err = n1.TxPipelined(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, dk, "71", 0)
			p.Get(ctx, dk)
			return nil
		})
		return err
	})
	if err != nil || len(cmds) != 2 || cmds[1].(*redis.StringCmd).Val() != "71" {
		t.Fatalf("MULTI SET GET EXEC %s through n1: %v, %v; want 71", dk, cmds, err)
	}
	var got string
	err = untilDone(t, func() (err error) {
		got, err = n1.Eval(ctx, "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('GET', KEYS[1])", []string{dk}, "9").Text()
		return err
	})
	if err != nil || got != "9" {
		t.Fatalf("EVAL SET GET %s through n1: %q, %v; want 9", dk, got, err)
	}
	if err := untilDone(t, func() error { return n1.Do(ctx, "RL.POLICY", "SET", "pf", "ALLOW", "2", "0.000001").Err() }); err != nil {
		t.Fatalf("RL.POLICY SET through n1: %v", err)
	}
	pk := keyInGroup(c, far, "pfwd-pol")
	checked, maybe := 0, 0
	for r := 0; r < 6; r++ {
		var v []any
		err := untilApplied(t, func() (err error) { v, err = n1.Do(ctx, "RL.CHECK", "pf", pk).Slice(); return err })
		if err != nil && strings.HasPrefix(err.Error(), "UNKNOWN") {
			maybe++
			continue
		}
		if err != nil {
			t.Fatalf("RL.CHECK pf %s (group %d) #%d through n1: %v", pk, far, r+1, err)
		}
		if len(v) == 0 || v[0] != int64(1) {
			break
		}
		checked++
	}
	if checked > 2 || checked+maybe < 2 {
		t.Fatalf("RL.CHECK pf %s (group %d) through n1: %d admitted, %d unknown; want the policy's 2", pk, far, checked, maybe)
	}

	// The node without forwarding redirects a key of a group it does not
	// hold to that group's leader.
	moved := missing["n4"][0]
	mk := keyInGroup(c, moved, "pfwd-moved")
	err = untilApplied(t, func() error { return clusterClient(t, nodes[3].respAddr).Do(ctx, allowArgs(mk, capacity, 1)...).Err() })
	// The group's recorded leader: one of its replicas (the record may
	// trail an election on a busy machine).
	var replicaAddrs []string
	for _, id := range replicasOf[moved] {
		replicaAddrs = append(replicaAddrs, c.node(id).respAddr)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "MOVED ") || !slices.Contains(replicaAddrs, err.Error()[strings.LastIndexByte(err.Error(), ' ')+1:]) {
		t.Fatalf("RL.ALLOW %s (group %d) on n4 without forwarding: %v; want MOVED to its leader, one of %v", mk, moved, err, replicaAddrs)
	}

	// FLUSHALL through n1 empties every group.
	if err := untilDone(t, func() error { return n1.FlushAll(ctx).Err() }); err != nil {
		t.Fatalf("FLUSHALL through n1: %v", err)
	}
	if err := untilApplied(t, func() (err error) { size, err = clients[1].c.DBSize(ctx).Result(); return err }); err != nil || size != 0 {
		t.Fatalf("DBSIZE through n2 after FLUSHALL through n1: %d, %v; want 0", size, err)
	}
}

// untilApplied runs f again while its error says the command was
// certainly not applied (classify), for up to 20 s, and returns its last
// error.
func untilApplied(t *testing.T, f func() error) error {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := f()
		if classify(err) != opNotApplied || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// untilDone is untilApplied for an idempotent command: it is sent again
// after an UNKNOWN outcome too.
func untilDone(t *testing.T, f func() error) error {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		err := untilApplied(t, f)
		if err == nil || !strings.HasPrefix(err.Error(), "UNKNOWN") || time.Now().After(deadline) {
			return err
		}
	}
}
