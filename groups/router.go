package groups

import (
	"context"
	"errors"
	"slices"

	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/status"
)

// Route says how this node handles a command on slot (server.SlotRouter):
// served here when it leads the slot's group (groupSet.owner: including a
// group that took the slot in a move this node's directory does not show
// yet), with --cluster-redirect forward, or while the group has no leader
// it knows of (the group's node then waits for one and forwards, within
// the commit timeout); redirected to the group leader's client address
// otherwise. A group of a placed cluster that this node does not hold is
// served with --cluster-redirect forward (through its leader: remote.go),
// else redirected to its recorded leader. A slot no group owns, or whose
// group is not open here yet in a cluster without placement, is not
// served.
func (h *Host) Route(slot int) (serve bool, addr string) {
	gs := h.set.Load()
	m := gs.owner(slot)
	if m == nil {
		if gs.dir.Slots == nil {
			return false, ""
		}
		g := gs.dir.Group(gs.dir.Slots[slot])
		if g != nil && gs.dir.Replicas > 0 && h.cfg.Redirect == Forward {
			return true, ""
		}
		if g != nil && g.Leader != "" && gs.dir.Replicas > 0 {
			if addr := gs.dir.Nodes[g.Leader]; addr != "" {
				return false, addr
			}
		}
		return false, ""
	}
	if h.cfg.Redirect == Forward || m.node.IsLeader() {
		return true, ""
	}
	leader := m.node.LeaderID()
	if leader == "" {
		return true, ""
	}
	addr = gs.dir.Nodes[leader]
	if addr == "" {
		return true, ""
	}
	return false, addr
}

// Topology is the slot map as this node sees it (server.SlotRouter).
func (h *Host) Topology() status.Topology {
	gs := h.set.Load()
	d := gs.dir
	t := status.Topology{MyID: h.myID, Epoch: d.Epoch, Forward: h.cfg.Redirect == Forward}
	for _, p := range h.meta.Peers() {
		t.Nodes = append(t.Nodes, status.TopologyNode{
			ID: NodeID40(p.ID), Name: p.ID, Addr: d.Nodes[p.ID], RaftAddr: p.Addr,
			Myself: p.ID == h.cfg.Node.NodeID, PlacedNode: placedNode(d, p.ID),
		})
	}
	slices.SortFunc(t.Nodes, func(a, b status.TopologyNode) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	leaders := map[uint32]string{}
	for _, g := range d.Groups {
		leaders[g.ID] = g.Leader // a group not held here: its recorded leader
	}
	for _, m := range gs.ordered {
		leaders[m.id] = m.node.LeaderID()
	}
	for _, r := range ownership.Runs(d.Slots) {
		sr := status.SlotRange{Start: r.Start, End: r.End, Group: r.Group}
		if l := leaders[r.Group]; l != "" && d.Nodes[l] != "" {
			sr.Leader = NodeID40(l)
		}
		t.Ranges = append(t.Ranges, sr)
	}
	for _, g := range d.Groups {
		sg := status.Group{ID: g.ID}
		for _, r := range t.Ranges {
			if r.Group == g.ID {
				sg.Ranges = append(sg.Ranges, r)
				sg.Slots += r.End - r.Start + 1
			}
		}
		sg.Replicas, sg.Learner = g.Replicas, g.Learner
		if m := gs.byID[g.ID]; m == nil {
			sg.Leader = g.Leader
			sg.Members = g.Replicas
		} else {
			st := m.node.ClusterStatus()
			sg.Leader, sg.Role = st.LeaderID, st.Role
			sg.Applied, sg.Commit, sg.LastLog = st.AppliedIndex, st.CommitIndex, st.LastLogIndex
			if sg.LastLog > sg.Applied {
				sg.Lag = sg.LastLog - sg.Applied
			}
			for _, n := range st.Nodes {
				sg.Members = append(sg.Members, n.ID)
			}
			if u, err := m.node.Usage(context.Background()); err == nil {
				sg.Keys = u.Stored
			}
		}
		t.Groups = append(t.Groups, sg)
	}
	for _, m := range d.Moves {
		sm := status.Move{ID: m.ID, Start: m.Start, End: m.End, Source: m.Source, Target: m.Target,
			State: moveStates[m.State], Began: m.Began, Ended: m.Ended}
		if dst := gs.byID[m.Target]; dst != nil {
			if p, ok := dst.node.Move(m.ID); ok {
				sm.Keys = p.Keys
			}
		}
		t.Moves = append(t.Moves, sm)
	}
	t.Rebalancing = h.rebalancing.Load()
	t.Placement = placement(d)
	return t
}

var moveStates = map[byte]string{ownership.MoveBegun: "begun", ownership.MoveCommitted: "committed", ownership.MoveReleased: "released"}

var errBadSlot = errors.New("invalid slot")

// CountKeysInSlot counts this replica's live keys in slot.
func (h *Host) CountKeysInSlot(ctx context.Context, slot int) (int, error) {
	n := 0
	err := h.keysInSlot(ctx, slot, func(string) bool { n++; return true })
	return n, err
}

// KeysInSlot lists up to count of this replica's live keys in slot.
func (h *Host) KeysInSlot(ctx context.Context, slot int, count int) ([]string, error) {
	var keys []string
	if count <= 0 {
		return keys, nil
	}
	err := h.keysInSlot(ctx, slot, func(k string) bool {
		keys = append(keys, k)
		return len(keys) < count
	})
	slices.Sort(keys)
	return keys, err
}

var errStop = errors.New("stop")

func (h *Host) keysInSlot(ctx context.Context, slot int, fn func(string) bool) error {
	if slot < 0 || slot >= slots.Count {
		return errBadSlot
	}
	m := h.set.Load().bySlot[slot]
	if m == nil {
		return nil
	}
	err := m.node.ForEachKey(ctx, func(k string) error {
		if slots.OfString(k) == slot && !fn(k) {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// placedNode is node's share of the placement in d (zero when d has no
// replication factor).
func placedNode(d *ownership.Directory, node string) status.PlacedNode {
	if d.Replicas == 0 {
		return status.PlacedNode{}
	}
	p := status.PlacedNode{Placed: true, Dead: d.States[node]&ownership.NodeDead != 0, Draining: d.States[node]&ownership.NodeDraining != 0}
	for i := range d.Groups {
		g := &d.Groups[i]
		if d.Hosts(g, node) {
			p.Replicas++
		}
		if g.Leader == node {
			p.Leads++
		}
	}
	return p
}

// placement counts d's placement state (nil without a replication
// factor).
func placement(d *ownership.Directory) *status.Placement {
	if d.Replicas == 0 {
		return nil
	}
	p := &status.Placement{Replicas: d.Replicas, MovesFinished: d.ReplicasAdded}
	for _, st := range d.States {
		if st&ownership.NodeDead != 0 {
			p.DeadNodes++
		}
		if st&ownership.NodeDraining != 0 {
			p.DrainingNodes++
		}
	}
	placeable := 0
	for id := range d.Nodes {
		if d.Placeable(id) {
			placeable++
		}
	}
	want := min(d.Replicas, placeable)
	for _, g := range d.Groups {
		if g.Learner != "" {
			p.MovesInProgress++
		}
		healthy := 0
		for _, n := range g.Replicas {
			if d.States[n]&ownership.NodeDead == 0 {
				healthy++
			}
		}
		if healthy < want {
			p.UnderReplicated++
		}
	}
	return p
}
