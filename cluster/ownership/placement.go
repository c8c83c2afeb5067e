package ownership

import (
	"maps"
	"slices"
	"strings"
)

// Placement: which nodes hold a replica of each data group.
//
// A directory initialised with a replication factor R (Directory.Replicas
// > 0) records each group's voters (Group.Replicas) and at most one node
// being added to it (Group.Learner). The meta group's leader compares the
// recorded sets with Place's and writes one change per group at a time:
// a learner to add (AddLearnerOp), then, once that node reports itself a
// voter (PromotedOp), a replica to drop (DropReplicaOp). A group's own
// leader makes its Raft configuration follow the record, and each node
// opens the groups the record places on it and closes the others. Adding
// before dropping keeps every group at R voters or more through any
// crash, and the record in the meta group's log (never a file) lets a
// new meta leader carry a change on where the last one stopped.

// Place returns the replica set each group should have: R distinct nodes
// of live (fewer when there are fewer live nodes), keeping as much of the
// current placement as balance allows. No node holds more than one
// replica more than any other live node, and each group's nodes are
// sorted. The result depends only on its arguments: every meta leader
// computes the same.
//
// current maps a group to its replicas now (nodes not in live are
// dropped); keep names, per group, a node Place must keep (a learner
// being added: a change in flight is finished, never reversed); groups
// lists every group, in the order changes are to be made.
func Place(groups []uint32, current map[uint32][]string, keep map[uint32]string, live []string, r int) map[uint32][]string {
	live = slices.Clone(live)
	slices.Sort(live)
	live = slices.Compact(live)
	want := min(r, len(live))
	isLive := make(map[string]bool, len(live))
	for _, n := range live {
		isLive[n] = true
	}
	load := make(map[string]int, len(live))
	out := make(map[uint32][]string, len(groups))
	for _, g := range groups {
		var set []string
		for _, n := range append([]string{keep[g]}, current[g]...) {
			if n != "" && isLive[n] && !slices.Contains(set, n) {
				set = append(set, n)
			}
		}
		out[g] = set
		for _, n := range set {
			load[n]++
		}
	}
	// Too many (a learner beside R voters, or R lowered): drop the most
	// loaded, never the node to keep.
	for _, g := range groups {
		for len(out[g]) > want {
			worst := -1
			for i, n := range out[g] {
				if n == keep[g] {
					continue
				}
				if worst < 0 || load[n] > load[out[g][worst]] || (load[n] == load[out[g][worst]] && n > out[g][worst]) {
					worst = i
				}
			}
			load[out[g][worst]]--
			out[g] = slices.Delete(slices.Clone(out[g]), worst, worst+1)
		}
	}
	if want == 0 {
		return out
	}
	// Fill each group up to R with the least loaded nodes it lacks. Ties
	// go to the node after the group's id in live's order, so the
	// groups of a new cluster spread their first replicas (and, through
	// the preferred-leader rule, their leaders) round the nodes.
	touched := make(map[uint32]int, len(groups)) // replicas changed here, by group
	for _, g := range groups {
		for len(out[g]) < want {
			best := ""
			for i := range live {
				n := live[(int(g)+i)%len(live)]
				if slices.Contains(out[g], n) {
					continue
				}
				if best == "" || load[n] < load[best] {
					best = n
				}
			}
			out[g] = append(out[g], best)
			load[best]++
			touched[g]++
		}
	}
	// Even out the load: move a replica from the most loaded node to the
	// least loaded one, on a group that has the first and not the second,
	// until no two nodes differ by more than one.
	for range len(groups) * want {
		hi, lo := live[0], live[0]
		for _, n := range live {
			if load[n] > load[hi] {
				hi = n
			}
			if load[n] < load[lo] {
				lo = n
			}
		}
		if load[hi]-load[lo] <= 1 {
			break
		}
		// Of the groups that can give, the one changed least so far
		// (then the first): churn spreads over groups instead of
		// replacing two replicas of one.
		pick, found := uint32(0), false
		for _, g := range groups {
			set := out[g]
			if slices.Contains(set, hi) && !slices.Contains(set, lo) && keep[g] != hi && (!found || touched[g] < touched[pick]) {
				pick, found = g, true
			}
		}
		if !found {
			break
		}
		set := slices.Clone(out[pick])
		set[slices.Index(set, hi)] = lo
		out[pick] = set
		load[hi]--
		load[lo]++
		touched[pick]++
	}
	for _, g := range groups {
		slices.SortFunc(out[g], strings.Compare)
	}
	return out
}

// NextChange is the next placement change for group g, from its record
// to the placement want (computed from Planned): a node to add as a
// learner and the replica it replaces (leaving, "" when the group lacks
// voters), or a replica to drop. One change at a time: while a learner
// is being added nothing else happens; once it votes, the replica it
// replaces is dropped. A group thus never has fewer voters than want
// lists through a change.
func NextChange(g Group, want []string) (add, leaving, drop string) {
	if g.Learner != "" {
		if slices.Contains(g.Replicas, g.Learner) && g.Leaving != "" {
			return "", "", g.Leaving
		}
		return "", "", ""
	}
	var extra string
	for _, n := range g.Replicas {
		if !slices.Contains(want, n) {
			extra = n
			break
		}
	}
	for _, n := range want {
		if !slices.Contains(g.Replicas, n) {
			if len(g.Replicas) < len(want) {
				extra = ""
			}
			return n, extra, ""
		}
	}
	if len(g.Replicas) > len(want) {
		return "", "", extra
	}
	return "", "", ""
}

// Planned is group g's replicas once the change in flight is complete:
// Place's input, so that it finishes a change instead of reversing it.
func (g *Group) Planned() []string {
	out := slices.DeleteFunc(slices.Clone(g.Replicas), func(n string) bool { return n == g.Leaving })
	if g.Learner != "" && !slices.Contains(out, g.Learner) {
		out = append(out, g.Learner)
	}
	return out
}

// Hosts reports whether node holds (or is receiving) a replica of group
// g: always in a directory without a replication factor, where every
// node holds every group.
func (d *Directory) Hosts(g *Group, node string) bool {
	if d.Replicas == 0 {
		return true
	}
	return g.Learner == node || slices.Contains(g.Replicas, node)
}

// PreferredLeaders names, for each data group with recorded replicas,
// the replica that should lead it: no placeable node (Placeable) leads
// more than its share, the ceiling of groups over the placeable nodes
// that hold any of them, when the placement allows it. Each group's
// first choice is its ((id-1) mod len)-th replica by id, the rule of a
// directory without a replication factor, so a placement where that
// rule is balanced keeps it. The result depends only on the directory:
// every node computes the same. Empty when Replicas is 0.
func (d *Directory) PreferredLeaders() map[uint32]string {
	out := make(map[uint32]string, len(d.Groups))
	if d.Replicas == 0 {
		return out
	}
	// cands: each group's placeable replicas, sorted, rotated so the
	// first choice comes first.
	cands := make(map[uint32][]string, len(d.Groups))
	count := map[string]int{}
	var ids []uint32
	for i := range d.Groups {
		g := &d.Groups[i]
		var c []string
		for _, n := range g.Replicas {
			if d.Placeable(n) {
				c = append(c, n)
			}
		}
		if len(c) == 0 {
			continue
		}
		slices.Sort(c)
		k := int((g.ID - 1) % uint32(len(c)))
		c = append(c[k:], c[:k]...)
		cands[g.ID] = c
		ids = append(ids, g.ID)
		for _, n := range c {
			count[n] += 0
		}
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		return out
	}
	share := (len(ids) + len(count) - 1) / len(count)
	// Greedy: each group, in order, to its least loaded candidate (the
	// first choice on a tie).
	for _, g := range ids {
		best := cands[g][0]
		for _, n := range cands[g][1:] {
			if count[n] < count[best] {
				best = n
			}
		}
		out[g] = best
		count[best]++
	}
	// Then shorten every node over its share along a chain of hand-offs
	// (this node's group to another of its replicas, whose group to
	// another, ...) ending at a node under its share: the augmenting
	// paths of a bipartite matching, found breadth first.
	for range len(ids) * len(count) {
		over := ""
		for _, n := range slices.Sorted(maps.Keys(count)) {
			if count[n] > share {
				over = n
				break
			}
		}
		if over == "" || !handOff(over, share, ids, cands, out, count) {
			break
		}
	}
	return out
}

// handOff moves one leadership away from node from along the shortest
// chain of hand-offs to a node leading fewer than share groups, and
// reports whether it found one.
func handOff(from string, share int, ids []uint32, cands map[uint32][]string, lead map[uint32]string, count map[string]int) bool {
	type step struct {
		group uint32 // the group handed to this node
		prev  string // the node it was taken from
	}
	seen := map[string]step{from: {}}
	queue := []string{from}
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		for _, g := range ids {
			if lead[g] != n {
				continue
			}
			for _, m := range cands[g] {
				if _, ok := seen[m]; ok {
					continue
				}
				seen[m] = step{group: g, prev: n}
				if count[m] < share {
					for at := m; at != from; {
						s := seen[at]
						lead[s.group] = at
						at = s.prev
					}
					count[from]--
					count[m]++
					return true
				}
				queue = append(queue, m)
			}
		}
	}
	return false
}
