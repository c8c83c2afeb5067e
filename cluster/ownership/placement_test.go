package ownership

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func nodeNames(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("n%02d", i+1))
	}
	return out
}

func groupIDs(n int) []uint32 {
	var out []uint32
	for i := range n {
		out = append(out, uint32(i+1))
	}
	return out
}

// checkPlacement fails unless every group has min(r, len(live))
// distinct live nodes and no node holds more than one replica more than
// another.
func checkPlacement(t *testing.T, place map[uint32][]string, groups []uint32, live []string, r int) {
	t.Helper()
	load := map[string]int{}
	for _, n := range live {
		load[n] = 0
	}
	for _, g := range groups {
		set := place[g]
		if len(set) != min(r, len(live)) {
			t.Fatalf("group %d has %d replicas %v, want %d", g, len(set), set, min(r, len(live)))
		}
		seen := map[string]bool{}
		for _, n := range set {
			if seen[n] {
				t.Fatalf("group %d has two replicas on %s: %v", g, n, set)
			}
			seen[n] = true
			if _, ok := load[n]; !ok {
				t.Fatalf("group %d placed on %s, not a live node", g, n)
			}
			load[n]++
		}
	}
	lo, hi := len(groups)*r, 0
	for _, l := range load {
		lo, hi = min(lo, l), max(hi, l)
	}
	if hi-lo > 1 {
		t.Fatalf("unbalanced: loads %v", load)
	}
}

// TestPlaceBalanced: for 3..12 nodes and 1..64 groups, a new cluster's
// placement, and the placement after a node joins and after a node dies,
// are valid and balanced; the same inputs give the same output whatever
// the order of the node list.
func TestPlaceBalanced(t *testing.T) {
	r := rand.New(rand.NewPCG(32, 3))
	for nodes := 3; nodes <= 12; nodes++ {
		for _, ng := range []int{1, 2, 3, 5, 8, 13, 31, 64} {
			live, groups := nodeNames(nodes), groupIDs(ng)
			p := Place(groups, nil, nil, live, 3)
			checkPlacement(t, p, groups, live, 3)
			shuffled := slices.Clone(live)
			r.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			if q := Place(groups, nil, nil, shuffled, 3); !reflect.DeepEqual(p, q) {
				t.Fatalf("%d nodes %d groups: the node order changed the placement", nodes, ng)
			}
			// Stable: a balanced placement is kept as it is.
			if q := Place(groups, p, nil, live, 3); !reflect.DeepEqual(p, q) {
				t.Fatalf("%d nodes %d groups: a balanced placement was changed:\n%v\n%v", nodes, ng, p, q)
			}
			// A node joins.
			grown := append(slices.Clone(live), "zz-new")
			pg := Place(groups, p, nil, grown, 3)
			checkPlacement(t, pg, groups, grown, 3)
			if moved := changedReplicas(p, pg); moved > (3*ng+nodes)/(nodes+1)+1 {
				t.Fatalf("%d nodes %d groups: a join moved %d replicas", nodes, ng, moved)
			}
			// A node dies.
			dead := live[r.IntN(len(live))]
			rest := slices.DeleteFunc(slices.Clone(live), func(n string) bool { return n == dead })
			pd := Place(groups, p, nil, rest, 3)
			checkPlacement(t, pd, groups, rest, 3)
			for _, g := range groups {
				if !slices.Contains(p[g], dead) && len(rest) >= 3 && changedReplicas(map[uint32][]string{g: p[g]}, map[uint32][]string{g: pd[g]}) > 1 {
					t.Fatalf("group %d lost two replicas to a death that was not its own: %v -> %v", g, p[g], pd[g])
				}
			}
		}
	}
	// Fewer nodes than R: every group on every node.
	p := Place(groupIDs(4), nil, nil, nodeNames(2), 3)
	for g, set := range p {
		if !reflect.DeepEqual(set, nodeNames(2)) {
			t.Fatalf("group %d on %v with two nodes", g, set)
		}
	}
}

// changedReplicas counts the replicas of b not in a.
func changedReplicas(a, b map[uint32][]string) int {
	n := 0
	for g, set := range b {
		for _, x := range set {
			if !slices.Contains(a[g], x) {
				n++
			}
		}
	}
	return n
}

// TestReplicaChangesReachPlacement: applying NextChange's steps through
// the directory's ops (each applied twice, as a new meta leader may
// repeat one) takes every group from its placement to a new one, one
// change at a time, never below the new placement's size in voters.
func TestReplicaChangesReachPlacement(t *testing.T) {
	live := nodeNames(5)
	peers := make([]Peer, len(live))
	for i, n := range live {
		peers[i] = Peer{ID: n, Addr: "127.0.0.1:" + fmt.Sprint(i+1)}
	}
	d, _ := mustMeta(t, EmptyDirectory(), InitPlacedOp(6, 3, peers[:3]))
	for _, g := range d.Groups {
		if !reflect.DeepEqual(g.Replicas, live[:3]) || len(g.Peers) != 3 {
			t.Fatalf("group %d of a three-node cluster: %v", g.ID, g.Replicas)
		}
	}
	apply := func(op []byte) {
		t.Helper()
		d, _ = mustMeta(t, d, op)
		again, _ := mustMeta(t, d, op)
		if again != d {
			t.Fatalf("op %x applied twice changed the directory again", op)
		}
	}
	groups := groupIDs(6)
	for _, step := range [][]string{live, live[1:]} { // two nodes join; then n01 dies
		cur := map[uint32][]string{}
		for _, g := range d.Groups {
			cur[g.ID] = g.Replicas
		}
		want := Place(groups, cur, nil, step, 3)
		for range 100 {
			changed := false
			for _, g := range d.Groups {
				add, leaving, drop := NextChange(g, want[g.ID])
				switch {
				case add != "":
					apply(AddLearnerOp(g.ID, add, leaving))
					if !d.Hosts(d.Group(g.ID), add) {
						t.Fatalf("the learner %s is not a host of group %d", add, g.ID)
					}
					apply(PromotedOp(g.ID, add))
					if leaving != "" {
						apply(DropReplicaOp(g.ID, leaving))
					}
					changed = true
				case drop != "":
					apply(DropReplicaOp(g.ID, drop))
					changed = true
				}
				if n := len(d.Group(g.ID).Replicas); n < 3 {
					t.Fatalf("group %d down to %d voters", g.ID, n)
				}
			}
			if !changed {
				break
			}
		}
		for _, g := range d.Groups {
			if !reflect.DeepEqual(g.Replicas, want[g.ID]) {
				t.Fatalf("group %d at %v, want %v", g.ID, g.Replicas, want[g.ID])
			}
		}
	}
	// Leader reports: a later term wins, an earlier one is ignored.
	apply(LeaderOp(1, "n02", 5))
	apply(LeaderOp(1, "n03", 4))
	if g := d.Group(1); g.Leader != "n02" || g.LeaderTerm != 5 {
		t.Fatalf("leader %s term %d", g.Leader, g.LeaderTerm)
	}
	// The placement round-trips through the encoding.
	back, err := DecodeDirectory(AppendDirectory(nil, d))
	if err != nil || !reflect.DeepEqual(back.Groups, d.Groups) || back.Replicas != 3 {
		t.Fatalf("round trip: %v %+v", err, back)
	}
	// A directory without placement still encodes as before.
	old, _ := mustMeta(t, EmptyDirectory(), InitOp(2, peers))
	if b, err := DecodeDirectory(AppendDirectory(nil, old)); err != nil || b.Replicas != 0 || !old.Hosts(&old.Groups[0], "anyone") {
		t.Fatalf("old directory: %v %+v", err, b)
	}
}

// TestPlacementLoopNeverReverses runs the meta leader's loop as it runs:
// Place recomputed every round with the learners kept, every group's
// next change recorded at once, learners promoted a round later. A node
// added to a group is never dropped from it again, and the additions are
// the new nodes' share and no more.
func TestPlacementLoopNeverReverses(t *testing.T) {
	for _, tc := range []struct{ from, to, groups int }{{3, 5, 6}, {3, 9, 9}, {3, 4, 1}, {5, 12, 64}} {
		live := nodeNames(tc.from)
		peers := make([]Peer, len(live))
		for i, n := range live {
			peers[i] = Peer{ID: n, Addr: "a"}
		}
		d, _ := mustMeta(t, EmptyDirectory(), InitPlacedOp(tc.groups, 3, peers))
		live = nodeNames(tc.to)
		added := map[uint32][]string{}
		adds := 0
		for round := 0; ; round++ {
			if round > 1000 {
				t.Fatalf("%+v: no end after 1000 rounds", tc)
			}
			// Learners of the last round are voters now.
			for _, g := range d.Groups {
				if g.Learner != "" {
					d, _ = mustMeta(t, d, PromotedOp(g.ID, g.Learner))
				}
			}
			ids := groupIDs(tc.groups)
			cur, keep := map[uint32][]string{}, map[uint32]string{}
			for _, g := range d.Groups {
				cur[g.ID], keep[g.ID] = g.Planned(), g.Learner
			}
			want := Place(ids, cur, keep, live, 3)
			changed := false
			for _, g := range d.Groups {
				add, leaving, drop := NextChange(g, want[g.ID])
				switch {
				case add != "":
					d, _ = mustMeta(t, d, AddLearnerOp(g.ID, add, leaving))
					added[g.ID] = append(added[g.ID], add)
					adds++
					changed = true
				case drop != "":
					if slices.Contains(added[g.ID], drop) {
						t.Fatalf("%+v: group %d drops %s, added to it in this run", tc, g.ID, drop)
					}
					d, _ = mustMeta(t, d, DropReplicaOp(g.ID, drop))
					changed = true
				}
			}
			if !changed {
				break
			}
		}
		final := map[uint32][]string{}
		for _, g := range d.Groups {
			final[g.ID] = g.Replicas
		}
		checkPlacement(t, final, groupIDs(tc.groups), live, 3)
		share := 0 // replicas the new nodes hold at the end
		for _, set := range final {
			for _, n := range set {
				if !slices.Contains(nodeNames(tc.from), n) {
					share++
				}
			}
		}
		if adds != share {
			t.Fatalf("%+v: %d additions for a share of %d", tc, adds, share)
		}
	}
}

// placedDirectory is a directory whose groups have placement p.
func placedDirectory(groups []uint32, p map[uint32][]string) *Directory {
	d := &Directory{Epoch: 1, Replicas: 3}
	for _, g := range groups {
		d.Groups = append(d.Groups, Group{ID: g, Replicas: p[g]})
	}
	return d
}

// checkLeaders fails unless every group's preferred leader is one of its
// placeable replicas and no node leads more than its share.
func checkLeaders(t *testing.T, d *Directory, lead map[uint32]string) {
	t.Helper()
	count, holders := map[string]int{}, map[string]bool{}
	placed := 0
	for _, g := range d.Groups {
		ok := false
		for _, n := range g.Replicas {
			if d.Placeable(n) {
				holders[n] = true
				ok = true
			}
		}
		if !ok {
			if lead[g.ID] != "" {
				t.Fatalf("group %d has no placeable replica but a leader %s", g.ID, lead[g.ID])
			}
			continue
		}
		placed++
		l := lead[g.ID]
		if !slices.Contains(g.Replicas, l) || !d.Placeable(l) {
			t.Fatalf("group %d (replicas %v) led by %q", g.ID, g.Replicas, l)
		}
		count[l]++
	}
	// The share, unless the placement forbids it: k groups whose
	// placeable replicas all lie in a set of s nodes make one of them
	// lead at least k/s (a dead node's groups left on two nodes).
	share := (placed + len(holders) - 1) / len(holders)
	for _, g := range d.Groups {
		set := placeable(d, g.Replicas)
		if len(set) == 0 {
			continue
		}
		k := 0
		for _, h := range d.Groups {
			if in := placeable(d, h.Replicas); len(in) > 0 && !slices.ContainsFunc(in, func(n string) bool { return !slices.Contains(set, n) }) {
				k++
			}
		}
		share = max(share, (k+len(set)-1)/len(set))
	}
	for n, c := range count {
		if c > share {
			t.Fatalf("%s leads %d groups, more than its share %d: %v\n%v\n%v", n, c, share, count, d.Groups, lead)
		}
	}
}

func placeable(d *Directory, nodes []string) []string {
	return slices.DeleteFunc(slices.Clone(nodes), func(n string) bool { return !d.Placeable(n) })
}

// TestPreferredLeadersBalanced: for 3..12 nodes and 1..64 groups placed
// by Place, after a join and after a death, every node leads at most its
// share of the groups and only groups it holds; the same directory gives
// the same leaders; where every group is on every node the old rule
// ((id-1) mod n) is kept. (With six nodes and six groups the old rule
// alone had two nodes lead two groups each and two lead none.)
func TestPreferredLeadersBalanced(t *testing.T) {
	for nodes := 3; nodes <= 12; nodes++ {
		for _, ng := range []int{1, 2, 3, 5, 6, 8, 9, 13, 31, 64} {
			live, groups := nodeNames(nodes), groupIDs(ng)
			p := Place(groups, nil, nil, live, 3)
			d := placedDirectory(groups, p)
			lead := d.PreferredLeaders()
			checkLeaders(t, d, lead)
			if again := placedDirectory(groups, p).PreferredLeaders(); !reflect.DeepEqual(lead, again) {
				t.Fatalf("%d nodes %d groups: two computations differ", nodes, ng)
			}
			grown := Place(groups, p, nil, append(slices.Clone(live), "zz-new"), 3)
			checkLeaders(t, placedDirectory(groups, grown), placedDirectory(groups, grown).PreferredLeaders())
			// A node found dead before its replicas moved: it leads
			// nothing, the others share its groups.
			dd := placedDirectory(groups, p)
			dd.States = map[string]byte{live[nodes/2]: NodeDead}
			dl := dd.PreferredLeaders()
			checkLeaders(t, dd, dl)
			for g, l := range dl {
				if l == live[nodes/2] {
					t.Fatalf("%d nodes %d groups: group %d led by the dead node", nodes, ng, g)
				}
			}
		}
	}
	// Every group on every node: the old rule.
	d := &Directory{Epoch: 1, Replicas: 3}
	for _, g := range groupIDs(7) {
		d.Groups = append(d.Groups, Group{ID: g, Replicas: nodeNames(3)})
	}
	for g, l := range d.PreferredLeaders() {
		if want := nodeNames(3)[(g-1)%3]; l != want {
			t.Fatalf("group %d led by %s, want %s", g, l, want)
		}
	}
	if got := (&Directory{Epoch: 1, Groups: d.Groups}).PreferredLeaders(); len(got) != 0 {
		t.Fatalf("a directory without a replication factor: %v", got)
	}
}
