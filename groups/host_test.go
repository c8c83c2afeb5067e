package groups

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// Three hosts in one process, each with the meta group and a replica of
// every data group, over real loopback Transports and real Raft logs.

type thost struct {
	id, dir, raft, resp string
	h                   *Host
}

func hostConfig(th *thost, peers []cluster.Peer, groups int) Config {
	return Config{
		Node: cluster.Config{
			NodeID:           th.id,
			RaftAddr:         th.raft,
			RESPAddr:         th.resp,
			Dir:              th.dir,
			Peers:            peers,
			HeartbeatTimeout: 500 * time.Millisecond,
			ElectionTimeout:  500 * time.Millisecond,
			CommitTimeout:    3 * time.Second,
			NoSync:           true,
		},
		Groups: groups,
		Shards: 2,
	}
}

// freeAddr is a loopback address free now and never handed out before
// in this test process: the kernel may give a port just closed to the
// next listener, and two hosts of one cluster on one address fail
// their bootstrap ("found duplicate address in configuration").
func freeAddr(t *testing.T) string {
	t.Helper()
	for {
		tr, err := cluster.Listen("127.0.0.1:0", "", nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		addr := tr.ListenAddr().String()
		tr.Close()
		freeAddrs.Lock()
		seen := freeAddrs.given[addr]
		freeAddrs.given[addr] = true
		freeAddrs.Unlock()
		if !seen {
			return addr
		}
	}
}

var freeAddrs = struct {
	sync.Mutex
	given map[string]bool
}{given: map[string]bool{}}

// startHosts starts n hosts with groups data groups; redirect is what a
// host does with a key whose group it does not lead.
func startHosts(t *testing.T, n, groups int, redirect Redirect) []*thost {
	t.Helper()
	var hosts []*thost
	var peers []cluster.Peer
	for i := range n {
		th := &thost{id: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), raft: freeAddr(t), resp: fmt.Sprintf("127.0.0.1:%d", 16000+i)}
		hosts = append(hosts, th)
		peers = append(peers, cluster.Peer{ID: th.id, Addr: th.raft})
	}
	for _, th := range hosts {
		cfg := hostConfig(th, peers, groups)
		cfg.Redirect = redirect
		h, err := Open(cfg)
		if err != nil {
			t.Fatal(err)
		}
		th.h = h
	}
	t.Cleanup(func() {
		for _, th := range hosts {
			if th.h != nil {
				th.h.Close()
			}
		}
	})
	return hosts
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// served: every host has every group open with a known leader, and knows
// every node's client address.
func served(hosts []*thost, groups int) bool {
	for _, th := range hosts {
		if th.h == nil {
			continue
		}
		t := th.h.Topology()
		if len(t.Groups) != groups {
			return false
		}
		for _, g := range t.Groups {
			if g.Leader == "" || g.Role == "" {
				return false
			}
		}
		for _, r := range t.Ranges {
			if r.Leader == "" {
				return false
			}
		}
	}
	return true
}

func TestHostRoutesBySlot(t *testing.T) {
	hosts := startHosts(t, 3, 3, Moved)
	waitFor(t, 20*time.Second, "every group to have a leader", func() bool { return served(hosts, 3) })

	top := hosts[0].h.Topology()
	if top.Epoch == 0 || len(top.Ranges) != 3 || top.Ranges[0].Start != 0 || top.Ranges[2].End != slots.Count-1 {
		t.Fatalf("topology %+v", top)
	}
	if len(top.Nodes) != 3 || !top.Nodes[0].Myself || top.Nodes[1].Addr != hosts[1].resp || top.Nodes[0].ID != NodeID40("n1") {
		t.Fatalf("nodes %+v", top.Nodes)
	}
	// Route: every slot is served by exactly one host (its group's
	// leader); the others name that host's client address.
	for _, s := range []int{0, 5461, 5462, 10922, 10923, slots.Count - 1} {
		servers := 0
		var addrs []string
		for _, th := range hosts {
			serve, addr := th.h.Route(s)
			if serve {
				servers++
				addrs = append(addrs, th.resp)
			} else {
				addrs = append(addrs, addr)
			}
		}
		if servers != 1 || addrs[0] != addrs[1] || addrs[1] != addrs[2] {
			t.Fatalf("slot %d: %d hosts serve it; addresses %v", s, servers, addrs)
		}
	}

	// A batch spanning every group, through one host: each key lands in
	// its slot's group and is counted exactly.
	ctx := context.Background()
	var reqs []engine.Request
	for i := range 200 {
		reqs = append(reqs, engine.Request{Op: engine.OpGCRA, Key: []byte(fmt.Sprintf("k%d", i)), Limit: 5, Interval: int64(time.Hour), Cost: 1})
	}
	for round := range 2 {
		res := make([]engine.Result, len(reqs))
		if err := hosts[round].h.Do(ctx, reqs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || !r.Allowed || r.Remaining != int64(4-round) {
				t.Fatalf("round %d key %s: %+v", round, reqs[i].Key, r)
			}
		}
	}
	// Each group holds its share, on every replica (followers apply
	// after the leader answered: wait for n3's).
	waitFor(t, 10*time.Second, "n3's replicas to hold the 200 keys", func() bool {
		total := 0
		for _, g := range hosts[2].h.Topology().Groups {
			if g.Keys == 0 {
				return false
			}
			total += g.Keys
		}
		return total == 200
	})
	// n1 answers from its own replica of k7's group, which may be a
	// follower that has not applied the batch yet.
	var n int
	var keys []string
	var err, err2 error
	waitFor(t, 10*time.Second, "n1's replica of k7's group to hold it", func() bool {
		n, err = hosts[0].h.CountKeysInSlot(ctx, slots.OfString("k7"))
		keys, err2 = hosts[0].h.KeysInSlot(ctx, slots.OfString("k7"), 10)
		return err == nil && err2 == nil && n >= 1 && slices.Contains(keys, "k7")
	})

	// A restarted host reopens its groups from its folder and catches up.
	th := hosts[1]
	th.h.Close()
	th.h = nil
	h, err := Open(hostConfig(th, nil, 3))
	if err != nil {
		t.Fatal(err)
	}
	th.h = h
	waitFor(t, 20*time.Second, "the restarted host to serve", func() bool { return served(hosts, 3) })
	res := make([]engine.Result, len(reqs))
	if err := th.h.Do(ctx, reqs, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || !r.Allowed || r.Remaining != 2 {
			t.Fatalf("after restart, key %s: %+v", reqs[i].Key, r)
		}
	}
}

// TestHostJoinAndAddGroup: a fourth host joins through RL.CLUSTER JOIN's
// path and gets a replica of every group; ADDGROUP makes a group on all
// four.
func TestHostJoinAndAddGroup(t *testing.T) {
	hosts := startHosts(t, 3, 2, Forward)
	waitFor(t, 20*time.Second, "every group to have a leader", func() bool { return served(hosts, 2) })
	th := &thost{id: "n4", dir: t.TempDir(), raft: freeAddr(t), resp: "127.0.0.1:16009"}
	h, err := Open(hostConfig(th, nil, 0))
	if err != nil {
		t.Fatal(err)
	}
	th.h = h
	hosts = append(hosts, th)
	ctx := context.Background()
	if err := hosts[0].h.Join(ctx, "n4", h.RaftAddr()); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "n4 to replicate every group", func() bool {
		top := h.Topology()
		if len(top.Groups) != 2 || top.Nodes == nil {
			return false
		}
		for _, g := range top.Groups {
			if len(g.Members) != 4 || g.Role != "follower" && g.Role != "leader" {
				return false
			}
		}
		return served(hosts, 2)
	})
	g, err := hosts[2].h.AddGroup(ctx)
	if err != nil || g != 3 {
		t.Fatalf("AddGroup: %d, %v", g, err)
	}
	waitFor(t, 20*time.Second, "group 3 on every host", func() bool {
		for _, th := range hosts {
			top := th.h.Topology()
			if len(top.Groups) != 3 || top.Groups[2].Leader == "" || len(top.Groups[2].Members) != 4 {
				return false
			}
		}
		return true
	})
}

func TestPreferredLeader(t *testing.T) {
	peers := []cluster.Peer{{ID: "c"}, {ID: "a"}, {ID: "b"}}
	for g, want := range map[uint32]string{1: "a", 2: "b", 3: "c", 4: "a"} {
		if p, ok := preferredLeader(g, peers, ""); !ok || p.ID != want {
			t.Errorf("group %d: %v, want %s", g, p, want)
		}
	}
	if _, ok := preferredLeader(0, peers, ""); ok {
		t.Error("the meta group has a preferred leader")
	}
}
