package groups

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/status"
)

// ClusterStatus is the meta group's view (server.Cluster): its members are
// the cluster's nodes, with the client addresses of the directory.
func (h *Host) ClusterStatus() status.Cluster {
	st := h.meta.ClusterStatus()
	d := h.set.Load().dir
	for i := range st.Nodes {
		if a := d.Nodes[st.Nodes[i].ID]; a != "" {
			st.Nodes[i].RESPAddr = a
		}
		st.Nodes[i].PlacedNode = placedNode(d, st.Nodes[i].ID)
	}
	return st
}

// Join adds a node to the meta group and to every data group (RL.CLUSTER
// JOIN): the node opens each group as the directory reaches it, and each
// group's leader brings its replica up to date.
//
// In a placed cluster (--replicas) the node joins the meta group only,
// as a voter while it has fewer than R, as a non-voter after; the meta
// group's leader then places replicas on it (placement.go).
func (h *Host) Join(ctx context.Context, id, raftAddr string) error {
	if d := h.meta.Directory(); d.Replicas > 0 {
		_, _, voters := h.members()
		if voters >= d.Replicas {
			return h.meta.JoinNonvoter(ctx, id, raftAddr)
		}
		return h.meta.Join(ctx, id, raftAddr)
	}
	if err := h.meta.Join(ctx, id, raftAddr); err != nil {
		return err
	}
	for _, m := range h.set.Load().ordered {
		if err := m.node.Join(ctx, id, raftAddr); err != nil {
			return fmt.Errorf("group %d: %w", m.id, err)
		}
	}
	return nil
}

// Remove removes a node from every data group, then from the meta group
// and the directory (RL.CLUSTER REMOVE).
//
// In a placed cluster it drains the node instead: the directory records
// it as draining, the meta group's leader moves its replicas to the
// other nodes (each group adds its new replica before it drops the old
// one) and then removes it. Remove waits for that up to drainWait; the
// drain goes on after it returns, also across meta leaders.
func (h *Host) Remove(ctx context.Context, id string) error {
	if d := h.meta.Directory(); d.Replicas > 0 {
		return h.drain(ctx, id)
	}
	for _, m := range h.set.Load().ordered {
		if err := m.node.Remove(ctx, id); err != nil && !isUnknownNode(err) {
			return fmt.Errorf("group %d: %w", m.id, err)
		}
	}
	if err := h.meta.Remove(ctx, id); err != nil {
		return err
	}
	return h.meta.ForgetNode(ctx, id)
}

// drainWait is how long RL.CLUSTER REMOVE waits for a drain to finish.
const drainWait = 60 * time.Second

func (h *Host) drain(ctx context.Context, id string) error {
	d := h.meta.Directory()
	if _, known := d.Nodes[id]; !known {
		if slices.ContainsFunc(h.meta.Peers(), func(p cluster.Peer) bool { return p.ID == id }) {
			return h.meta.Remove(ctx, id) // a member that never registered
		}
		return cluster.ErrUnknownNode
	}
	if id == h.cfg.Node.NodeID && len(h.meta.Peers()) == 1 {
		return ownership.NewError("only node", "ERR cannot remove the only node of the cluster")
	}
	cctx, cancel := context.WithTimeout(ctx, h.commitTimeout())
	_, err := h.meta.ChangeDirectory(cctx, ownership.NodeStateOp(id, d.States[id]|ownership.NodeDraining))
	cancel()
	if err != nil {
		return err
	}
	h.log.Info("node draining: its replicas move to the other nodes, then it leaves", "node", id)
	deadline := time.Now().Add(drainWait)
	for {
		d := h.meta.Directory()
		if _, known := d.Nodes[id]; !known {
			return nil
		}
		if time.Now().After(deadline) {
			text := fmt.Sprintf("ERR node %s is still draining: %d replicas left to move; it leaves the cluster once they have (RL.CLUSTER NODES shows it)", id, h.replicasOn(d, id))
			return ownership.NewError(text[4:], text)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.closing:
			return cluster.ErrShutdown
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func isUnknownNode(err error) bool { return errors.Is(err, cluster.ErrUnknownNode) }

// Digest hashes every group's digest on this node (RL.CLUSTER DIGEST):
// nodes whose replicas applied the same entries in every group report the
// same digest. The index is the meta group's applied index.
func (h *Host) Digest(ctx context.Context) (uint64, string, error) {
	idx, md, err := h.meta.Digest(ctx)
	if err != nil {
		return 0, "", err
	}
	sum := sha256.New()
	fmt.Fprintf(sum, "meta %d %s\n", idx, md)
	for _, m := range h.set.Load().ordered {
		gi, gd, err := m.node.Digest(ctx)
		if err != nil {
			return 0, "", err
		}
		fmt.Fprintf(sum, "g%d %d %s\n", m.id, gi, gd)
	}
	return idx, hex.EncodeToString(sum.Sum(nil)), nil
}

// AddGroup adds a data group (RL.CLUSTER ADDGROUP) replicated by the meta
// group's current members, waits until it has a leader and gives it the
// policy table of the other groups. It owns no slots until slots move
// onto it.
func (h *Host) AddGroup(ctx context.Context) (uint32, error) {
	g, err := h.meta.AddGroup(ctx, h.newGroupPeers())
	if err != nil {
		return 0, err
	}
	deadline := time.Now().Add(2 * h.commitTimeout())
	for {
		gs := h.set.Load()
		if m := gs.byID[g]; m != nil && m.node.LeaderID() != "" {
			if len(gs.ordered) > 1 && gs.ordered[0] != m {
				ps := gs.ordered[0].node.PolicyStore().List()
				if len(ps) > 0 {
					if err := m.node.ReplacePolicies(ctx, ps); err != nil {
						return g, fmt.Errorf("group %d added, but copying the policies failed: %w", g, err)
					}
				}
			}
			return g, nil
		}
		if time.Now().After(deadline) {
			return g, fmt.Errorf("group %d added, but it has no leader yet", g)
		}
		select {
		case <-ctx.Done():
			return g, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// newGroupPeers are the nodes a new group starts on: every member of the
// meta group, or in a placed cluster the R that Place picks beside the
// other groups' replicas.
func (h *Host) newGroupPeers() []cluster.Peer {
	peers := h.meta.Peers()
	d := h.meta.Directory()
	if d.Replicas == 0 {
		return peers
	}
	live, addrs, _ := h.members()
	ids := []uint32{0} // the new group, placed first
	cur := map[uint32][]string{}
	for _, g := range d.Groups {
		ids = append(ids, g.ID)
		cur[g.ID] = g.Replicas
	}
	var out []cluster.Peer
	for _, id := range ownership.Place(ids, cur, nil, live, d.Replicas)[0] {
		out = append(out, cluster.Peer{ID: id, Addr: addrs[id]})
	}
	return out
}

// balance spreads the data groups' leaders over the nodes: group g's
// preferred leader is the directory's choice for a placed group
// (Directory.PreferredLeaders: no node leads more than its share), the
// ((g-1) mod n)-th of its members by id otherwise. A leader
// that is not its group's preferred one hands leadership to it once it
// answers on its Raft port, at most once per group every 10 s, so a
// restarted node gets its share back and a dead one is left alone.
func (h *Host) balance() {
	defer h.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	last := map[uint32]time.Time{}
	for {
		select {
		case <-h.closing:
			return
		case <-tick.C:
		}
		gs := h.set.Load()
		preferred := gs.dir.PreferredLeaders()
		for _, m := range gs.ordered {
			if !m.node.IsLeader() || time.Since(last[m.id]) < 10*time.Second {
				continue
			}
			// Voters only: a non-voter (a learner being added) must
			// never be handed the leadership.
			var voters []cluster.Peer
			for _, n := range m.node.ClusterStatus().Nodes {
				if n.Voter {
					voters = append(voters, cluster.Peer{ID: n.ID, Addr: n.RaftAddr})
				}
			}
			p, ok := preferredLeader(m.id, voters, preferred[m.id])
			if !ok || p.ID == h.cfg.Node.NodeID || !reachable(p.Addr) {
				continue
			}
			last[m.id] = time.Now()
			if err := m.node.TransferLeadership(p.ID, p.Addr); err != nil {
				h.log.Info("leadership hand-off failed", "group", m.id, "to", p.ID, "err", err)
			} else {
				h.log.Info("leadership handed to the group's preferred leader", "group", m.id, "to", p.ID)
			}
		}
	}
}

// preferredLeader is the voter that should lead group g: the directory's
// choice (Directory.PreferredLeaders, placed groups) when it is a voter
// now, else the ((g-1) mod n)-th voter by id.
func preferredLeader(g uint32, peers []cluster.Peer, placed string) (cluster.Peer, bool) {
	if len(peers) == 0 || g == 0 {
		return cluster.Peer{}, false
	}
	if placed != "" {
		if i := slices.IndexFunc(peers, func(p cluster.Peer) bool { return p.ID == placed }); i >= 0 {
			return peers[i], true
		}
		// The chosen node is not a voter yet (a learner catching up):
		// leave the leader where it is until it is.
		return cluster.Peer{}, false
	}
	peers = slices.Clone(peers)
	slices.SortFunc(peers, func(a, b cluster.Peer) int { return strings.Compare(a.ID, b.ID) })
	return peers[int(g-1)%len(peers)], true
}

func reachable(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// RaftSnapshotStatus sums the data groups' Raft snapshots on this node;
// the last-snapshot fields are those of the most recent one.
func (h *Host) RaftSnapshotStatus() status.RaftSnapshots {
	out := h.meta.RaftSnapshotStatus()
	for _, m := range h.set.Load().ordered {
		s := m.node.RaftSnapshotStatus()
		out.Taken += s.Taken
		out.Failures += s.Failures
		out.Restored += s.Restored
		if s.LastSnapshot.After(out.LastSnapshot) {
			out.LastSnapshot, out.LastDuration, out.LastBytes, out.LastIndex = s.LastSnapshot, s.LastDuration, s.LastBytes, s.LastIndex
		}
		out.LastRestoreDuration = max(out.LastRestoreDuration, s.LastRestoreDuration)
	}
	return out
}

// Removed reports whether this node was removed from the cluster.
func (h *Host) Removed() bool { return h.meta.Removed() }
