package groups

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

func allowReqs(prefix string, n int) []engine.Request {
	var reqs []engine.Request
	for i := range n {
		reqs = append(reqs, engine.Request{Op: engine.OpGCRA, Key: []byte(fmt.Sprintf("%s%d", prefix, i)), Limit: 10, Interval: int64(time.Hour), Cost: 1})
	}
	return reqs
}

// TestMoveSlots: a range moves from one group to another and back while
// its keys keep their counts; the source drops them; every replica
// agrees; the directory points the range at the target.
func TestMoveSlots(t *testing.T) {
	hosts := startHosts(t, 3, 2, Forward)
	waitFor(t, 20*time.Second, "every group to have a leader", func() bool { return served(hosts, 2) })
	ctx := context.Background()
	reqs := allowReqs("m", 300)
	do := func(h *Host, want int64) {
		t.Helper()
		res := make([]engine.Result, len(reqs))
		if err := h.Do(ctx, reqs, res); err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r.Err != nil || !r.Allowed || r.Remaining != want {
				t.Fatalf("key %s: %+v, want allowed with %d left", reqs[i].Key, r, want)
			}
		}
	}
	do(hosts[0].h, 9)
	inRange := 0
	for _, r := range reqs {
		if slots.Of(r.Key) <= 3000 {
			inRange++
		}
	}
	for round, target := range []uint32{2, 1, 2} {
		id, err := hosts[round].h.MoveSlots(ctx, 0, 3000, target)
		if err != nil {
			t.Fatalf("move %d: %v", round, err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err = hosts[2].h.WaitMove(wctx, id)
		cancel()
		if err != nil {
			t.Fatalf("move %d did not end: %v", id, err)
		}
		d := hosts[2].h.meta.Directory()
		for s := 0; s <= 3000; s++ {
			if d.Slots[s] != target {
				t.Fatalf("after move %d slot %d is group %d's, want %d", id, s, d.Slots[s], target)
			}
		}
		waitFor(t, 10*time.Second, "every host to see the move end", func() bool {
			for _, th := range hosts {
				if th.h.meta.Directory().Current() != nil {
					return false
				}
			}
			return true
		})
		do(hosts[round%3].h, int64(8-round))
		// The target holds the range's keys, the source none of them.
		waitFor(t, 10*time.Second, "replicas to agree", func() bool {
			for _, th := range hosts {
				if n, _ := th.h.CountKeysInSlot(ctx, slots.Of(reqs[0].Key)); n < 0 {
					return false
				}
			}
			return digestsEqual(hosts)
		})
		src := map[uint32]uint32{1: 2, 2: 1}[target]
		srcNode := hosts[0].h.set.Load().byID[src].node
		left := 0
		srcNode.ForEachKey(ctx, func(k string) error {
			if slots.OfString(k) <= 3000 {
				left++
			}
			return nil
		})
		if left != 0 {
			t.Fatalf("after move %d the source still holds %d keys of the range", id, left)
		}
		if p, ok := hosts[0].h.set.Load().byID[target].node.Move(id); !ok || !p.Done || p.Keys != inRange {
			t.Fatalf("move %d at the target: %+v, want done with %d keys", id, p, inRange)
		}
	}
	// One move at a time; a range the target owns already is refused.
	if _, err := hosts[0].h.MoveSlots(ctx, 0, 10, 2); err == nil {
		t.Fatal("moving slots to the group that owns them was accepted")
	}
}

func digestsEqual(hosts []*thost) bool {
	var first string
	for i, th := range hosts {
		_, d, err := th.h.Digest(context.Background())
		if err != nil {
			return false
		}
		if i == 0 {
			first = d
		} else if d != first {
			return false
		}
	}
	return true
}

// TestRebalanceAfterAddGroup: a third group is added and the slots are
// rebalanced onto it: each group ends with a third of the slots and every
// key keeps its count.
func TestRebalanceAfterAddGroup(t *testing.T) {
	hosts := startHosts(t, 3, 2, Forward)
	waitFor(t, 20*time.Second, "every group to have a leader", func() bool { return served(hosts, 2) })
	ctx := context.Background()
	reqs := allowReqs("r", 300)
	res := make([]engine.Result, len(reqs))
	if err := hosts[0].h.Do(ctx, reqs, res); err != nil {
		t.Fatal(err)
	}
	if _, err := hosts[1].h.AddGroup(ctx); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	n, err := hosts[2].h.Rebalance(rctx)
	if err != nil {
		t.Fatalf("rebalance after %d moves: %v", n, err)
	}
	count := map[uint32]int{}
	for _, g := range hosts[2].h.meta.Directory().Slots {
		count[g]++
	}
	for g := uint32(1); g <= 3; g++ {
		if c := count[g]; c < slots.Count/3 || c > slots.Count/3+1 {
			t.Fatalf("after %d moves group %d owns %d slots: %v", n, g, c, count)
		}
	}
	if err := hosts[1].h.Do(ctx, reqs, res); err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Err != nil || r.Remaining != 8 {
			t.Fatalf("key %s after the rebalance: %+v, want 8 left", reqs[i].Key, r)
		}
	}
}

// TestMovedSlotServedBeforeDirectory: once a move has committed at the
// target, the node leading the target serves the range even while its own
// slot directory still gives the range to the source (the meta group's
// change not applied there yet). Before, it answered MOVED to the source's
// leader, which (with the change applied) sent the client back: clients
// bounced between the two until the directory arrived, and go-redis gave
// up after its redirects. A command it takes in that window is applied at
// the target at once.
func TestMovedSlotServedBeforeDirectory(t *testing.T) {
	hosts := startHosts(t, 3, 2, Moved)
	waitFor(t, 20*time.Second, "every group to have a leader", func() bool { return served(hosts, 2) })
	ctx := context.Background()
	const lo, hi = 0, 100
	var key []byte
	for i := 0; key == nil; i++ {
		if k := fmt.Sprintf("b%d", i); slots.OfString(k) <= hi {
			key = []byte(k)
		}
	}
	slot := slots.Of(key)
	src := hosts[0].h.set.Load().bySlot[slot].id
	target := map[uint32]uint32{1: 2, 2: 1}[src]
	leaderOf := func(g uint32) *thost {
		for _, th := range hosts {
			if th.h.set.Load().byID[g].node.IsLeader() {
				return th
			}
		}
		return nil
	}
	// Each group ends up led by its preferred host (membership.go,
	// balance), a different one for each; wait for that, so no hand-off
	// moves a leader during the test.
	settled := func(g uint32) *thost {
		l := leaderOf(g)
		if l == nil {
			return nil
		}
		if p, ok := preferredLeader(g, l.h.set.Load().byID[g].node.Peers(), l.h.set.Load().dir.PreferredLeaders()[g]); !ok || p.ID != l.id {
			return nil
		}
		return l
	}
	var tl *thost
	waitFor(t, 30*time.Second, "each group led by its preferred host", func() bool {
		tl = settled(target)
		sl := settled(src)
		return tl != nil && sl != nil && tl != sl
	})
	stale := tl.h.set.Load() // the directory before the move: the range is the source's
	// (While the source's replica here has not heard from its leader
	// yet, Route serves and waits for one: give it a moment.)
	waitFor(t, 5*time.Second, "the target's leader to answer MOVED to the source's leader before the move", func() bool {
		serve, addr := tl.h.Route(slot)
		return !serve && addr != ""
	})
	id, err := hosts[0].h.MoveSlots(ctx, lo, hi, target)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := hosts[0].h.WaitMove(wctx, id); err != nil {
		t.Fatal(err)
	}
	if !tl.h.set.Load().byID[target].node.OwnsMovedSlot(slot) {
		t.Fatalf("the target's leader does not report slot %d as moved in", slot)
	}
	if tl.h.set.Load().byID[src].node.OwnsMovedSlot(slot) {
		t.Fatalf("the source reports slot %d as moved in", slot)
	}
	// The target's leader with the directory from before the move.
	current := tl.h.set.Load()
	tl.h.set.Store(stale)
	serve, addr := tl.h.Route(slot)
	if !serve {
		tl.h.set.Store(current)
		t.Fatalf("the target's leader, its directory behind, redirects slot %d to %s", slot, addr)
	}
	// A command taken in that window goes to the target, not to the
	// frozen source (which would refuse it until the directory arrives).
	req := engine.Request{Op: engine.OpGCRA, Key: key, Limit: 10, Interval: int64(time.Hour), Cost: 1}
	res := make([]engine.Result, 1)
	err = tl.h.Do(ctx, []engine.Request{req}, res)
	tl.h.set.Store(current)
	if err != nil {
		t.Fatal(err)
	}
	if res[0].Err != nil || !res[0].Allowed || res[0].Remaining != 9 {
		t.Fatalf("the command taken with the directory behind: %+v, want allowed with 9 left", res[0])
	}
	waitFor(t, 10*time.Second, "replicas to agree", func() bool { return digestsEqual(hosts) })
	held := 0
	current.byID[target].node.ForEachKey(ctx, func(k string) error {
		if k == string(key) {
			held++
		}
		return nil
	})
	if held != 1 {
		t.Fatalf("the target holds key %s %d times, want once", key, held)
	}
}

// TestMoveBetweenGroupsOnDisjointNodes: six hosts, two groups of three
// replicas each, placed on disjoint nodes, so no node holds both. A move
// of slots from group 1 to group 2 is driven by the meta leader through
// the leaders of the groups it does not hold (their remotes): it ends,
// group 2 owns the slots in every host's directory, and the keys decided
// before the move (capacity 1, drained) are still drained after it.
func TestMoveBetweenGroupsOnDisjointNodes(t *testing.T) {
	hosts := placedCluster(t, 6, 6, 2, 17400, 0)
	d := hosts[0].h.meta.Directory()
	g1, g2 := d.Group(1), d.Group(2)
	if g1 == nil || g2 == nil {
		t.Fatalf("groups: %+v", d.Groups)
	}
	for _, n := range g1.Replicas {
		if slices.Contains(g2.Replicas, n) {
			t.Fatalf("groups 1 %v and 2 %v share %s: the test needs them apart", g1.Replicas, g2.Replicas, n)
		}
	}
	const first, last = 0, 199
	if d.Slots[first] != 1 || d.Slots[last] != 1 {
		t.Fatalf("slots %d-%d belong to %d and %d, want group 1", first, last, d.Slots[first], d.Slots[last])
	}
	var reqs []engine.Request
	for i := 0; len(reqs) < 40; i++ {
		k := fmt.Sprintf("dj%d", i)
		if s := slots.OfString(k); s >= first && s <= last {
			reqs = append(reqs, engine.Request{Op: engine.OpGCRA, Key: []byte(k), Limit: 1, Interval: int64(time.Hour), Cost: 1})
		}
	}
	ctx := context.Background()
	// Decides the keys through group g's recorded leader (the hosts answer
	// MOVED for a group they do not hold), again while it is not settled.
	decide := func(g uint32) []engine.Result {
		t.Helper()
		var res []engine.Result
		waitFor(t, 10*time.Second, fmt.Sprintf("group %d's leader to decide", g), func() bool {
			leader := hosts[0].h.meta.Directory().Group(g).Leader
			for _, th := range hosts {
				if th.id != leader {
					continue
				}
				res = make([]engine.Result, len(reqs))
				if err := th.h.Do(ctx, reqs, res); err != nil {
					return false
				}
				for _, r := range res {
					if r.Err != nil {
						return false
					}
				}
				return true
			}
			return false
		})
		return res
	}
	for i, r := range decide(1) {
		if !r.Allowed {
			t.Fatalf("first decision on %s: %+v", reqs[i].Key, r)
		}
	}
	id, err := hosts[0].h.MoveSlots(ctx, first, last, 2)
	if err != nil {
		t.Fatalf("MoveSlots: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := hosts[0].h.WaitMove(wctx, id); err != nil {
		t.Fatalf("move %d between groups on disjoint nodes did not end: %v", id, err)
	}
	waitFor(t, 10*time.Second, "every host's directory to give the slots to group 2", func() bool {
		for _, th := range hosts {
			d := th.h.meta.Directory()
			if d.Slots[first] != 2 || d.Slots[last] != 2 {
				return false
			}
		}
		return true
	})
	for i, r := range decide(2) {
		if r.Allowed {
			t.Fatalf("%s after the move, through group 2: %+v (want drained: its state moved)", reqs[i].Key, r)
		}
	}
}
