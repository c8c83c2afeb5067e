package groups

import (
	"context"
	"errors"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/status"
)

// Replicas that follow the directory's placement (cluster/ownership
// placement.go), when the cluster was created with a replication factor
// (--replicas; Directory.Replicas > 0). Every node runs place, which does
// whatever of these falls to it:
//
//   - the meta group's leader compares each group's record with
//     ownership.Place over the meta group's members and records one
//     change per group at a time: a learner to add, or (once the group
//     has its new voter) a replica to drop; it also keeps the meta group
//     at R voters, the other nodes being non-voters that read the
//     directory from their own replica;
//   - a group's leader records itself as the group's leader (for -MOVED
//     and CLUSTER SLOTS on nodes that do not hold the group) and makes
//     the group's Raft configuration follow the record
//     (cluster.Node.FollowMembership: add the learner as a non-voter,
//     remove a dropped replica only once every recorded voter votes);
//   - a learner opens its replica (refresh), and once it has caught up
//     asks the group's leader to promote it and records the promotion;
//   - a node the record no longer places a group on closes its replica
//     once the group's leader removed it (or the record has said so for
//     dropGrace), and deletes its folder.

// placeInterval is how often place runs without a directory change.
const placeInterval = 200 * time.Millisecond

// learnerLag is how far behind its commit index a learner may be when it
// asks to become a voter.
const learnerLag = 64

// dropGrace is how long a replica the directory no longer places here
// stays open while its group still lists this node (the group's leader
// removes it first, normally within a tick; a node that was down when it
// was removed never hears of it).
const dropGrace = 30 * time.Second

func (h *Host) place() {
	defer h.wg.Done()
	tick := time.NewTicker(placeInterval)
	defer tick.Stop()
	unplacedSince := map[uint32]time.Time{}
	for {
		ch := h.meta.DirectoryChanged()
		if d := h.meta.Directory(); d.Replicas > 0 {
			if h.meta.IsLeader() {
				h.placeGroups(d)
			} else {
				h.forgetLiveness()
			}
			h.followPlacement(d, unplacedSince)
		}
		select {
		case <-h.closing:
			return
		case <-ch:
		case <-tick.C:
		}
	}
}

// members are the meta group's members: every node of the cluster, with
// its Raft address, and whether it votes in the meta group.
func (h *Host) members() (ids []string, addrs map[string]string, voters int) {
	st := h.meta.ClusterStatus()
	addrs = make(map[string]string, len(st.Nodes))
	for _, n := range st.Nodes {
		ids = append(ids, n.ID)
		addrs[n.ID] = n.RaftAddr
		if n.Voter {
			voters++
		}
	}
	return ids, addrs, voters
}

// liveness is the meta group's leader's view of which nodes answer on
// their Raft port: a node unreachable for longer than the dead-after
// setting is dead, and placement leaves it out. The view starts afresh
// on each new leader (a node is never taken for dead sooner than
// dead-after after a leader took over).
type liveness struct {
	mu       sync.Mutex
	lastSeen map[string]time.Time
	dead     map[string]bool
	probing  map[string]bool
	answered map[string]bool // a probe reached the node since this leader took over
}

// deadAfter is the NodeDeadAfter setting.
func (h *Host) deadAfter() time.Duration {
	if h.cfg.NodeDeadAfter > 0 {
		return h.cfg.NodeDeadAfter
	}
	return 5 * time.Minute
}

// liveMembers probes every member (in the background, at most one probe
// per node at a time) and returns those not taken for dead. A node the
// directory records as dead stays dead until a probe reaches it (a new
// leader does not give it a fresh period).
func (h *Host) liveMembers(ids []string, addrs map[string]string, d *ownership.Directory) []string {
	l := &h.liveness
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastSeen == nil {
		l.lastSeen, l.dead, l.probing, l.answered = map[string]time.Time{}, map[string]bool{}, map[string]bool{}, map[string]bool{}
	}
	now := time.Now()
	var live []string
	for _, id := range ids {
		if id == h.cfg.Node.NodeID {
			l.lastSeen[id], l.answered[id] = now, true
		}
		if _, ok := l.lastSeen[id]; !ok {
			l.lastSeen[id] = now // first seen: give it the full period
		}
		if !l.probing[id] && id != h.cfg.Node.NodeID {
			l.probing[id] = true
			go func(id, addr string) {
				ok := reachable(addr)
				l.mu.Lock()
				defer l.mu.Unlock()
				l.probing[id] = false
				if ok && l.lastSeen != nil {
					l.lastSeen[id], l.answered[id] = time.Now(), true
				}
			}(id, addrs[id])
		}
		dead := now.Sub(l.lastSeen[id]) > h.deadAfter() || (d.States[id]&ownership.NodeDead != 0 && !l.answered[id])
		if dead != l.dead[id] {
			l.dead[id] = dead
			if dead {
				h.log.Warn("node taken for dead: its replicas are rebuilt on the other nodes", "node", id, "unreachable_for", now.Sub(l.lastSeen[id]).Round(time.Second))
			} else {
				h.log.Info("node answers again", "node", id)
			}
		}
		if !dead {
			live = append(live, id)
		}
	}
	return live
}

// forgetLiveness drops the view (this node no longer leads the meta
// group).
func (h *Host) forgetLiveness() {
	h.liveness.mu.Lock()
	h.liveness.lastSeen, h.liveness.dead, h.liveness.answered = nil, nil, nil
	h.liveness.mu.Unlock()
}

// DeadNodes are the nodes this node, as the meta group's leader, takes
// for dead (none on other nodes).
func (h *Host) DeadNodes() []string {
	h.liveness.mu.Lock()
	defer h.liveness.mu.Unlock()
	var out []string
	for id, d := range h.liveness.dead {
		if d {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// placeGroups runs on the meta group's leader: it records which nodes
// are dead, records the next placement change of every group, keeps R
// live voters in the meta group, and lets a drained node leave.
func (h *Host) placeGroups(d *ownership.Directory) {
	members, addrs, _ := h.members()
	live := h.liveMembers(members, addrs, d)
	ctx, cancel := context.WithTimeout(context.Background(), h.commitTimeout())
	defer cancel()
	if !h.recordStates(ctx, d, members, live) {
		return
	}
	// Replicas go on live nodes that are not draining.
	live = slices.DeleteFunc(live, func(id string) bool { return d.States[id]&ownership.NodeDraining != 0 })
	h.keepMetaVoters(ctx, d.Replicas, live)
	h.leaveDrained(ctx, d, members)
	ids := make([]uint32, len(d.Groups))
	cur := make(map[uint32][]string, len(d.Groups))
	keep := make(map[uint32]string, len(d.Groups)) // changes in flight are finished, not reversed
	for i, g := range d.Groups {
		ids[i] = g.ID
		cur[g.ID] = g.Planned()
		keep[g.ID] = g.Learner
	}
	want := ownership.Place(ids, cur, keep, live, d.Replicas)
	for _, g := range d.Groups {
		var op []byte
		var add, leaving, drop string
		switch {
		case g.Learner != "" && addrs[g.Learner] == "" && !slices.Contains(g.Replicas, g.Learner):
			op = ownership.DropReplicaOp(g.ID, g.Learner) // the learner left the cluster
		default:
			add, leaving, drop = ownership.NextChange(g, want[g.ID])
			switch {
			case add != "":
				op = ownership.AddLearnerOp(g.ID, add, leaving)
			case drop != "":
				op = ownership.DropReplicaOp(g.ID, drop)
			}
		}
		if op == nil {
			continue
		}
		changed, err := h.meta.ChangeDirectory(ctx, op)
		if err != nil {
			h.log.Info("cannot record a placement change yet", "group", g.ID, "err", err)
			return
		}
		switch {
		case changed == 1 && add != "":
			h.replicaAdds.Add(1)
			h.log.Info("replica move: a learner joins the group", "group", g.ID, "node", add, "replaces", leaving)
			if leaving != "" && plantedEarlyRemove() {
				h.meta.ChangeDirectory(ctx, ownership.DropReplicaOp(g.ID, leaving))
			}
		case changed == 1 && drop != "":
			h.log.Info("replica move: a replica leaves the group", "group", g.ID, "node", drop)
		}
	}
}

// recordStates records each member's liveness in the directory (the
// draining bit is the operator's and is kept); false when the meta group
// cannot take it now.
func (h *Host) recordStates(ctx context.Context, d *ownership.Directory, members, live []string) bool {
	for _, id := range members {
		want := d.States[id] &^ ownership.NodeDead
		if !slices.Contains(live, id) {
			want |= ownership.NodeDead
		}
		if want == d.States[id] {
			continue
		}
		if _, err := h.meta.ChangeDirectory(ctx, ownership.NodeStateOp(id, want)); err != nil {
			h.log.Info("cannot record a node's state yet", "node", id, "err", err)
			return false
		}
	}
	return true
}

// leaveDrained removes from the cluster every draining node that holds
// no replica and no longer votes in the meta group (a draining voter is
// demoted by keepMetaVoters once another node votes in its place), and
// forgets a draining node that is no longer a member.
func (h *Host) leaveDrained(ctx context.Context, d *ownership.Directory, members []string) {
	for id, st := range d.States {
		if st&ownership.NodeDraining == 0 {
			continue
		}
		if !slices.Contains(members, id) {
			if err := h.meta.ForgetNode(ctx, id); err != nil {
				h.log.Info("cannot forget a drained node yet", "node", id, "err", err)
			}
			continue
		}
		if h.replicasOn(d, id) > 0 || id == h.cfg.Node.NodeID || slices.ContainsFunc(h.meta.ClusterStatus().Nodes, func(n status.Node) bool { return n.ID == id && n.Voter }) {
			continue
		}
		if err := h.meta.Remove(ctx, id); err != nil {
			h.log.Info("cannot remove a drained node yet", "node", id, "err", err)
			continue
		}
		h.log.Info("node drained: it holds no replica and left the cluster", "node", id)
		if err := h.meta.ForgetNode(ctx, id); err != nil {
			h.log.Info("cannot forget a drained node yet", "node", id, "err", err)
		}
	}
}

// replicasOn counts the groups that hold a replica on node or are adding
// one to it.
func (h *Host) replicasOn(d *ownership.Directory, node string) int {
	n := 0
	for i := range d.Groups {
		if d.Hosts(&d.Groups[i], node) {
			n++
		}
	}
	return n
}

// keepMetaVoters keeps r live voters in the meta group: a live
// non-voter is promoted while fewer vote, then a dead voter is demoted.
func (h *Host) keepMetaVoters(ctx context.Context, r int, live []string) {
	var liveVoters, deadVoters, spare []string
	for _, n := range h.meta.ClusterStatus().Nodes {
		isLive := slices.Contains(live, n.ID)
		switch {
		case n.Voter && isLive:
			liveVoters = append(liveVoters, n.ID)
		case n.Voter:
			deadVoters = append(deadVoters, n.ID)
		case isLive:
			spare = append(spare, n.ID)
		}
	}
	_, addrs, _ := h.members()
	switch {
	case len(liveVoters) > r:
		// More voters than R (a cluster started from a longer --peers
		// list): one steps down to non-voter, never this leader.
		slices.Sort(liveVoters)
		for _, v := range slices.Backward(liveVoters) {
			if v != h.cfg.Node.NodeID {
				if err := h.meta.DemoteVoter(ctx, v); err != nil {
					h.log.Info("cannot make a voter of the meta group a non-voter yet", "node", v, "err", err)
				}
				break
			}
		}
	case len(liveVoters) < r && len(spare) > 0:
		if err := h.meta.Join(ctx, spare[0], addrs[spare[0]]); err != nil {
			h.log.Info("cannot make a node a voter of the meta group yet", "node", spare[0], "err", err)
		}
	case len(deadVoters) > 0 && len(liveVoters) >= min(r, len(live)):
		if err := h.meta.DemoteVoter(ctx, deadVoters[0]); err != nil {
			h.log.Info("cannot demote a dead voter of the meta group yet", "node", deadVoters[0], "err", err)
		}
	}
}

// followPlacement does this node's part of the placement: as a group's
// leader, as a learner, and as a replica the directory dropped.
func (h *Host) followPlacement(d *ownership.Directory, unplacedSince map[uint32]time.Time) {
	me := h.cfg.Node.NodeID
	_, addrs, _ := h.members()
	ctx, cancel := context.WithTimeout(context.Background(), h.commitTimeout())
	defer cancel()
	for _, m := range h.set.Load().ordered {
		g := d.Group(m.id)
		if g == nil {
			continue
		}
		if d.Hosts(g, me) {
			delete(unplacedSince, m.id)
		}
		switch {
		case m.node.IsLeader():
			st := m.node.ClusterStatus()
			if g.Leader != me || g.LeaderTerm != st.Term {
				if _, err := h.meta.ChangeDirectory(ctx, ownership.LeaderOp(m.id, me, st.Term)); err != nil {
					h.log.Debug("cannot record this node as the group's leader yet", "group", m.id, "err", err)
				}
			}
			if g.Learner == me && !slices.Contains(g.Replicas, me) && m.node.Voter() {
				// The learner became a voter and then the leader (a
				// hand-off) before it recorded its promotion.
				if _, err := h.meta.ChangeDirectory(ctx, ownership.PromotedOp(m.id, me)); err != nil {
					h.log.Debug("cannot record the promotion yet", "group", m.id, "err", err)
				}
				continue
			}
			if _, err := m.node.FollowMembership(ctx, cluster.Membership{Voters: g.Replicas, Learner: g.Learner, Addrs: addrs}); err != nil && !errors.Is(err, cluster.ErrNotAppended) {
				h.log.Info("cannot change the group's members to follow the placement yet", "group", m.id, "err", err)
			}
		case g.Learner == me && !slices.Contains(g.Replicas, me):
			if m.node.Voter() {
				if _, err := h.meta.ChangeDirectory(ctx, ownership.PromotedOp(m.id, me)); err != nil {
					h.log.Debug("cannot record the promotion yet", "group", m.id, "err", err)
				}
			} else if m.node.CaughtUp(learnerLag) {
				if err := m.node.Join(ctx, me, h.transport.Addr()); err != nil {
					h.log.Info("cannot become a voter yet", "group", m.id, "err", err)
				}
			}
		case !d.Hosts(g, me):
			since, ok := unplacedSince[m.id]
			if !ok {
				unplacedSince[m.id] = time.Now()
				since = time.Now()
			}
			if m.node.Removed() || !slices.ContainsFunc(m.node.Peers(), func(p cluster.Peer) bool { return p.ID == me }) || time.Since(since) > dropGrace {
				h.dropReplica(m)
				delete(unplacedSince, m.id)
			}
		}
	}
}

// dropReplica closes this node's replica of a group the directory no
// longer places here, deletes its folder, then its entries and keys in the
// shared log (a crash in between leaves a group without a folder, which
// the next start drops from the log: openExisting).
func (h *Host) dropReplica(m *member) {
	h.openMu.Lock()
	defer h.openMu.Unlock()
	gs := h.set.Load()
	if gs.byID[m.id] != m {
		return
	}
	n := &groupSet{dir: gs.dir, byID: make(map[uint32]*member, len(gs.byID))}
	for id, o := range gs.byID {
		if id != m.id {
			n.byID[id] = o
		}
	}
	n.index()
	h.set.Store(n)
	m.node.Close()
	if err := os.RemoveAll(h.groupDir(m.id)); err != nil {
		h.log.Warn("cannot delete a dropped replica's folder", "group", m.id, "err", err)
	} else if err := h.wal.Drop(m.id); err != nil {
		h.log.Warn("cannot delete a dropped replica's raft log", "group", m.id, "err", err)
	}
	h.log.Info("replica dropped: the placement moved it to another node", "group", m.id)
	// Calls that loaded the group set before the swap may still reach
	// the engine (a command, INFO, RL.CLUSTER GROUPS): it stops once
	// they are over (they end within the commit timeout), or when the
	// host closes.
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		select {
		case <-time.After(2*h.commitTimeout() + 5*time.Second):
		case <-h.closing:
		}
		m.eng.Close()
	}()
}
