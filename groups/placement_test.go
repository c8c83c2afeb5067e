package groups

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// placedHost starts one host of a placed cluster (Replicas 3; deadAfter
// 0 for the default), closed at the end of the test unless closed and
// cleared (th.h = nil) before.
func placedHost(t *testing.T, th *thost, peers []cluster.Peer, groups int, deadAfter time.Duration) {
	t.Helper()
	cfg := hostConfig(th, peers, groups)
	cfg.Replicas = 3
	cfg.NodeDeadAfter = deadAfter
	if os.Getenv("RL_TEST_LOG") != "" {
		cfg.Node.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil)).With("node", th.id)
	}
	h, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	th.h = h
	t.Cleanup(func() {
		if th.h != nil {
			th.h.Close()
		}
	})
}

// placedCluster makes n hosts (client ports from port up), starts the
// first boot of them as a placed cluster of groups groups, and once it
// has settled starts the others and joins each through the first.
func placedCluster(t *testing.T, n, boot, groups, port int, deadAfter time.Duration) []*thost {
	t.Helper()
	var hosts []*thost
	var peers []cluster.Peer
	for i := range n {
		th := &thost{id: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), raft: freeAddr(t), resp: fmt.Sprintf("127.0.0.1:%d", port+i)}
		hosts = append(hosts, th)
		if i < boot {
			peers = append(peers, cluster.Peer{ID: th.id, Addr: th.raft})
		}
	}
	for _, th := range hosts[:boot] {
		placedHost(t, th, peers, groups, deadAfter)
	}
	waitSettled(t, hosts[:boot], 60*time.Second)
	for _, th := range hosts[boot:] {
		placedHost(t, th, nil, 0, deadAfter)
		if err := hosts[0].h.Join(context.Background(), th.id, th.h.RaftAddr()); err != nil {
			t.Fatalf("join %s: %v", th.id, err)
		}
	}
	if boot < n {
		waitSettled(t, hosts, 60*time.Second)
	}
	return hosts
}

// placementSettled: every group has three voters and no learner in the
// directory, its Raft configuration on its leader is those three voters,
// every host holds exactly the groups placed on it, and every group's
// recorded leader is its leader.
func placementSettled(hosts []*thost) (bool, string) {
	var d = hosts[0].h.meta.Directory()
	if d.Epoch == 0 || len(d.Groups) == 0 {
		return false, "no directory yet"
	}
	for _, th := range hosts {
		if th.h.meta.Directory().Epoch != d.Epoch {
			return false, "directories differ"
		}
	}
	load := map[string]int{}
	for _, th := range hosts {
		load[th.id] = 0
	}
	for _, g := range d.Groups {
		for _, n := range g.Replicas {
			load[n]++
		}
	}
	if lo, hi := slices.Min(slices.Collect(maps.Values(load))), slices.Max(slices.Collect(maps.Values(load))); hi-lo > 1 {
		var gs []string
		for _, g := range d.Groups {
			gs = append(gs, fmt.Sprintf("g%d=%v+%q-%q", g.ID, g.Replicas, g.Learner, g.Leaving))
		}
		return false, fmt.Sprintf("replicas by node %v: %v", load, gs)
	}
	for _, g := range d.Groups {
		if len(g.Replicas) != 3 || g.Learner != "" {
			why := fmt.Sprintf("group %d: replicas %v learner %q leaving %q", g.ID, g.Replicas, g.Learner, g.Leaving)
			for _, th := range hosts {
				if m := th.h.set.Load().byID[g.ID]; m != nil {
					st := m.node.ClusterStatus()
					why += fmt.Sprintf("; %s: %s leader=%s voter=%v caughtup=%v commit=%d applied=%d members=%d", th.id, st.Role, st.LeaderID, m.node.Voter(), m.node.CaughtUp(learnerLag), st.CommitIndex, st.AppliedIndex, len(st.Nodes))
				}
			}
			return false, why
		}
		var leader *member
		for _, th := range hosts {
			m := th.h.set.Load().byID[g.ID]
			if placed := slices.Contains(g.Replicas, th.id); placed != (m != nil) {
				return false, fmt.Sprintf("group %d open on %s: %v, placed: %v", g.ID, th.id, m != nil, placed)
			}
			if m != nil && m.node.IsLeader() {
				leader = m
				if g.Leader != th.id {
					return false, fmt.Sprintf("group %d led by %s, recorded %q", g.ID, th.id, g.Leader)
				}
			}
		}
		if leader == nil {
			return false, fmt.Sprintf("group %d has no leader", g.ID)
		}
		var voters []string
		for _, n := range leader.node.ClusterStatus().Nodes {
			if !n.Voter {
				return false, fmt.Sprintf("group %d has a non-voter %s", g.ID, n.ID)
			}
			voters = append(voters, n.ID)
		}
		slices.Sort(voters)
		if !slices.Equal(voters, g.Replicas) {
			return false, fmt.Sprintf("group %d: configuration %v, placement %v", g.ID, voters, g.Replicas)
		}
	}
	return true, ""
}

func waitSettled(t *testing.T, hosts []*thost, timeout time.Duration) {
	t.Helper()
	var why string
	deadline := time.Now().Add(timeout)
	for {
		var ok bool
		if ok, why = placementSettled(hosts); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("placement not settled after %v: %s", timeout, why)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPlacedClusterGrows: a three-node cluster with replication factor 3
// and six groups grows to five nodes through Join. The new nodes join
// the meta group as non-voters, replicas move onto them (learner, then
// voter, then the old replica removed) until every node holds its share
// (18 replicas: 3 or 4 a node), no group ever has more than one change in
// flight, the keys decided before the moves are still decided after, and
// a node asked for a key of a group it does not hold answers -MOVED to
// that group's leader.
func TestPlacedClusterGrows(t *testing.T) {
	const ngroups = 6
	hosts := placedCluster(t, 3, 3, ngroups, 17000, 0)
	ctx := context.Background()
	// Drain one key per group's slots: 64 keys, capacity 1.
	var reqs []engine.Request
	for i := range 64 {
		reqs = append(reqs, engine.Request{Op: engine.OpGCRA, Key: []byte(fmt.Sprintf("k%d", i)), Limit: 1, Interval: int64(time.Hour), Cost: 1})
	}
	decide := func(via *thost) []engine.Result {
		t.Helper()
		res := make([]engine.Result, len(reqs))
		if err := via.h.Do(ctx, reqs, res); err != nil {
			t.Fatalf("via %s: %v", via.id, err)
		}
		return res
	}
	for i, r := range decide(hosts[0]) {
		if !r.Allowed {
			t.Fatalf("first decision on %s refused: %+v", reqs[i].Key, r)
		}
	}
	for i := 3; i < 5; i++ {
		th := &thost{id: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), raft: freeAddr(t), resp: fmt.Sprintf("127.0.0.1:%d", 17000+i)}
		placedHost(t, th, nil, 0, 0)
		hosts = append(hosts, th)
		if err := hosts[i%3].h.Join(ctx, th.id, th.h.RaftAddr()); err != nil {
			t.Fatalf("join %s: %v", th.id, err)
		}
	}
	waitSettled(t, hosts, 60*time.Second)
	load := map[string]int{}
	for _, g := range hosts[0].h.meta.Directory().Groups {
		for _, n := range g.Replicas {
			load[n]++
		}
	}
	for _, th := range hosts {
		if load[th.id] < 3 || load[th.id] > 4 {
			t.Fatalf("unbalanced after the joins: %v", load)
		}
	}
	// Each replica moved once: the new nodes' share (18 replicas over
	// five nodes: 7 for the two), not a change reversed by the next.
	var adds int64
	for _, th := range hosts {
		adds += th.h.replicaAdds.Load()
	}
	if adds > 8 {
		t.Fatalf("%d replica additions for two new nodes' share of 7", adds)
	}
	st := hosts[0].h.meta.ClusterStatus()
	voters := 0
	for _, n := range st.Nodes {
		if n.Voter {
			voters++
		}
	}
	if len(st.Nodes) != 5 || voters != 3 {
		t.Fatalf("meta group: %d members, %d voters; want 5 and 3", len(st.Nodes), voters)
	}
	// Every key stays decided (capacity 1, drained): through each node
	// that holds the key's group.
	d := hosts[0].h.meta.Directory()
	for i, req := range reqs {
		g := d.Group(d.Slots[slots.Of(req.Key)])
		var via *thost
		for _, th := range hosts {
			if th.id == g.Leader {
				via = th
			}
		}
		res := make([]engine.Result, 1)
		if err := via.h.Do(ctx, reqs[i:i+1], res); err != nil {
			t.Fatal(err)
		}
		if res[0].Allowed {
			t.Fatalf("key %s (group %d, now on %v) admitted again after the moves", req.Key, g.ID, g.Replicas)
		}
		// A node without the group redirects to its leader.
		for _, th := range hosts {
			if slices.Contains(g.Replicas, th.id) {
				continue
			}
			// The leader's record reaches each node's replica of the meta
			// group in its own time, and leadership may move meanwhile
			// (the preferred-leader hand-off): the redirect must reach
			// the group's leader of the moment.
			waitFor(t, 10*time.Second, fmt.Sprintf("%s to redirect key %s of group %d to its leader", th.id, req.Key, g.ID), func() bool {
				serve, addr := th.h.Route(slots.Of(req.Key))
				for _, o := range hosts {
					if m := o.h.set.Load().byID[g.ID]; m != nil && m.node.IsLeader() {
						return !serve && addr == o.resp
					}
				}
				return false
			})
		}
	}
	// Dropped replicas' folders are gone.
	for _, th := range hosts {
		for _, g := range d.Groups {
			if !slices.Contains(g.Replicas, th.id) {
				if _, err := os.Stat(th.h.groupDir(g.ID)); err == nil {
					t.Fatalf("%s keeps the folder of group %d, placed on %v", th.id, g.ID, g.Replicas)
				}
			}
		}
	}
}

// TestPlacedClusterHeals: in a five-node placed cluster, a node that
// stops for good is taken for dead after NodeDeadAfter, and every group
// it held is back to three voters on the live nodes (a new replica added
// before the dead one is dropped), with the keys decided before still
// decided.
func TestPlacedClusterHeals(t *testing.T) {
	const ngroups = 4
	hosts := placedCluster(t, 5, 3, ngroups, 17100, 2*time.Second)
	var reqs []engine.Request
	for i := range 32 {
		reqs = append(reqs, engine.Request{Op: engine.OpGCRA, Key: []byte(fmt.Sprintf("h%d", i)), Limit: 1, Interval: int64(time.Hour), Cost: 1})
	}
	do := func(req engine.Request, live []*thost) engine.Result { return decideOnLeader(t, req, live) }
	for _, req := range reqs {
		if r := do(req, hosts); !r.Allowed {
			t.Fatalf("first decision on %s refused", req.Key)
		}
	}
	// Stop a node that is not the meta leader, for good.
	var dead *thost
	for _, th := range hosts {
		if !th.h.meta.IsLeader() {
			dead = th
		}
	}
	dead.h.Close()
	dead.h = nil
	var live []*thost
	for _, th := range hosts {
		if th != dead {
			live = append(live, th)
		}
	}
	began := time.Now()
	waitFor(t, 60*time.Second, "the dead node's groups to have three live voters", func() bool {
		for _, g := range live[0].h.meta.Directory().Groups {
			if slices.Contains(g.Replicas, dead.id) || g.Learner == dead.id {
				return false
			}
		}
		ok, _ := placementSettled(live)
		return ok
	})
	t.Logf("healed %v after the node stopped (dead-after 2s)", time.Since(began).Round(time.Millisecond))
	if st := live[0].h.meta.Directory().States[dead.id]; st&ownership.NodeDead == 0 {
		t.Fatalf("the directory records the dead node's state as %d", st)
	}
	for _, req := range reqs {
		if r := do(req, live); r.Allowed {
			t.Fatalf("key %s admitted again after the heal", req.Key)
		}
	}
}

// TestPlacedClusterDrains: RL.CLUSTER REMOVE of a live node in a placed
// cluster, here the meta group's leader itself, asked through another
// node: the node's replicas move to the others first (each group keeps
// three voters throughout), then it leaves the meta group and the
// directory, and the keys decided before are still decided.
func TestPlacedClusterDrains(t *testing.T) {
	const ngroups = 4
	hosts := placedCluster(t, 4, 3, ngroups, 17200, 0)
	ctx := context.Background()
	var reqs []engine.Request
	for i := range 32 {
		reqs = append(reqs, engine.Request{Op: engine.OpGCRA, Key: []byte(fmt.Sprintf("d%d", i)), Limit: 1, Interval: int64(time.Hour), Cost: 1})
	}
	do := func(req engine.Request, live []*thost) engine.Result { return decideOnLeader(t, req, live) }
	for _, req := range reqs {
		if r := do(req, hosts); !r.Allowed {
			t.Fatalf("first decision on %s refused", req.Key)
		}
	}
	var gone, via *thost
	for _, th := range hosts {
		if th.h.meta.IsLeader() {
			gone = th
		} else {
			via = th
		}
	}
	// Every group keeps at least three recorded voters throughout.
	stop := make(chan struct{})
	watched := make(chan string, 1)
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			for _, g := range via.h.meta.Directory().Groups {
				if len(g.Replicas) < 3 {
					watched <- fmt.Sprintf("group %d down to %v", g.ID, g.Replicas)
					return
				}
			}
		}
	}()
	var err error
	for range 3 { // the drain goes on after a reply that it is still draining
		if err = via.h.Remove(ctx, gone.id); err == nil {
			break
		}
		t.Logf("remove %s: %v", gone.id, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	close(stop)
	if why := <-watched; why != "" {
		t.Fatal(why)
	}
	var live []*thost
	for _, th := range hosts {
		if th != gone {
			live = append(live, th)
		}
	}
	waitSettled(t, live, 60*time.Second)
	d := via.h.meta.Directory()
	if _, ok := d.Nodes[gone.id]; ok || d.States[gone.id] != 0 {
		t.Fatalf("the drained node is still in the directory: %v, state %d", d.Nodes, d.States[gone.id])
	}
	if slices.ContainsFunc(via.h.meta.Peers(), func(p cluster.Peer) bool { return p.ID == gone.id }) {
		t.Fatal("the drained node is still a member of the meta group")
	}
	for _, req := range reqs {
		if r := do(req, live); r.Allowed {
			t.Fatalf("key %s admitted again after the drain", req.Key)
		}
	}
}

// TestPlacedMoveWithoutMetaLeader: in a five-node placed cluster, a slot
// move between two groups the meta group's leader does not both hold is
// driven by a node that holds both, and the keys it carries stay decided.
func TestPlacedMoveWithoutMetaLeader(t *testing.T) {
	const ngroups = 4
	hosts := placedCluster(t, 5, 5, ngroups, 17300, 0)
	var metaLeader string
	waitFor(t, 10*time.Second, "a meta leader", func() bool {
		for _, th := range hosts {
			if th.h.meta.IsLeader() {
				metaLeader = th.id
				return true
			}
		}
		return false
	})
	d := hosts[0].h.meta.Directory()
	var src, dst *ownership.Group
	for i := range d.Groups {
		for j := range d.Groups {
			a, b := &d.Groups[i], &d.Groups[j]
			if a.ID != b.ID && !(slices.Contains(a.Replicas, metaLeader) && slices.Contains(b.Replicas, metaLeader)) && src == nil {
				src, dst = a, b
			}
		}
	}
	if src == nil {
		t.Fatalf("the meta leader %s holds every group: %+v", metaLeader, d.Groups)
	}
	var lo, hi int = -1, -1
	for s := range slots.Count {
		if d.Slots[s] == src.ID {
			if lo < 0 {
				lo = s
			}
			hi = s
		}
	}
	hi = min(hi, lo+200)
	ctx := context.Background()
	var reqs []engine.Request
	for i := 0; len(reqs) < 8; i++ {
		k := fmt.Sprintf("mv%d", i)
		if s := slots.OfString(k); s >= lo && s <= hi {
			reqs = append(reqs, engine.Request{Op: engine.OpGCRA, Key: []byte(k), Limit: 1, Interval: int64(time.Hour), Cost: 1})
		}
	}
	leaderOf := func(g uint32) *thost {
		for _, th := range hosts {
			if m := th.h.set.Load().byID[g]; m != nil && m.node.IsLeader() {
				return th
			}
		}
		return nil
	}
	res := make([]engine.Result, len(reqs))
	if err := leaderOf(src.ID).h.Do(ctx, reqs, res); err != nil {
		t.Fatal(err)
	}
	id, err := hosts[0].h.MoveSlots(ctx, lo, hi, dst.ID)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := hosts[0].h.WaitMove(wctx, id); err != nil {
		t.Fatalf("move %d of slots %d-%d from group %d %v to group %d %v (meta leader %s): %v", id, lo, hi, src.ID, src.Replicas, dst.ID, dst.Replicas, metaLeader, err)
	}
	waitFor(t, 10*time.Second, "the target's leader to decide the moved keys", func() bool {
		l := leaderOf(dst.ID)
		return l != nil && l.h.Do(ctx, reqs, res) == nil && res[0].Err == nil
	})
	for i, r := range res {
		if r.Err != nil || r.Allowed {
			t.Fatalf("key %s after the move: %+v (want refused: its token was taken before)", reqs[i].Key, r)
		}
	}
}

// decideOnLeader applies req through the leader of its key's group among
// live, waiting up to 20 s for one that decides it.
func decideOnLeader(t *testing.T, req engine.Request, live []*thost) engine.Result {
	t.Helper()
	var res [1]engine.Result
	waitFor(t, 20*time.Second, "a leader to decide "+string(req.Key), func() bool {
		d := live[0].h.meta.Directory()
		g := d.Group(d.Slots[slots.Of(req.Key)])
		for _, th := range live {
			if m := th.h.set.Load().byID[g.ID]; m != nil && m.node.IsLeader() {
				return th.h.Do(context.Background(), []engine.Request{req}, res[:]) == nil && res[0].Err == nil
			}
		}
		return false
	})
	return res[0]
}
