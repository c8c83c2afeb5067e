package groups

import (
	"context"
	"slices"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
)

// Groups this node holds no replica of. In a placed cluster (a
// replication factor in the directory) a node opens only its groups; a
// command for another group's key is answered -MOVED to that group's
// recorded leader, or, with --cluster-redirect forward, sent to the
// group's leader through a cluster.Remote (one per group, made on first
// use, closed once the group is opened here or the host closes). The
// remote tries the directory's recorded leader first, then the group's
// other replicas, each at its Raft address in the meta group's
// configuration (every node of a placed cluster is a voter or non-voter
// of the meta group).

// remote is the way to a group not held here: a target of doSplit, like
// a member.
type remote struct {
	id uint32
	r  *cluster.Remote
}

func (rg *remote) do(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	if len(names) == 0 {
		return rg.r.Do(ctx, reqs, res)
	}
	return rg.r.DoPolicies(ctx, reqs, names, res)
}

// target is what serves a part of a batch: a member (this node's
// replica) or a remote.
type target interface {
	do(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error
}

// target is what serves slot for a batch: the member that owns it here
// (groupSet.owner), else, with forwarding in a placed cluster, the remote
// of its group; nil when the slot is not served here.
func (h *Host) target(gs *groupSet, slot int) target {
	if m := gs.owner(slot); m != nil {
		return m
	}
	if h.cfg.Redirect != Forward || gs.dir.Replicas == 0 || gs.dir.Slots == nil {
		return nil
	}
	if rg := h.remote(gs, gs.dir.Slots[slot]); rg != nil {
		return rg
	}
	return nil
}

// remote returns the remote of group g, which gs's directory must list
// and this node must not hold; nil otherwise, or once the host closes.
func (h *Host) remote(gs *groupSet, g uint32) *remote {
	if gs.dir.Replicas == 0 || gs.dir.Group(g) == nil || gs.byID[g] != nil {
		return nil
	}
	h.remoteMu.Lock()
	defer h.remoteMu.Unlock()
	// gs may be older than the routing view: a group opened here since
	// gets no remote (refresh publishes the view, then drops remotes).
	if h.remotes == nil || h.set.Load().byID[g] != nil {
		return nil
	}
	if rg := h.remotes[g]; rg != nil {
		return rg
	}
	rg := &remote{id: g, r: cluster.NewRemote(cluster.RemoteConfig{
		Group:         g,
		DialTLS:       h.cfg.Node.DialTLS,
		CommitTimeout: h.commitTimeout(),
		Addrs:         func() []string { return h.groupAddrs(g) },
		Logger:        h.log,
	})}
	h.remotes[g] = rg
	return rg
}

// groupAddrs lists the Raft addresses of group g's replicas as this node's
// directory records them: its recorded leader first, then the others
// (never this node's own).
func (h *Host) groupAddrs(g uint32) []string {
	grp := h.set.Load().dir.Group(g)
	if grp == nil {
		return nil
	}
	raftAddr := map[string]string{}
	for _, p := range h.meta.Peers() {
		raftAddr[p.ID] = p.Addr
	}
	var out []string
	for _, id := range append([]string{grp.Leader}, grp.Replicas...) {
		if a := raftAddr[id]; a != "" && id != h.cfg.Node.NodeID && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// dropRemotes closes the remotes of the groups gs holds here (their
// commands go to the local replica from now on), or every remote when gs
// is nil (the host closes; none is made after).
func (h *Host) dropRemotes(gs *groupSet) {
	h.remoteMu.Lock()
	defer h.remoteMu.Unlock()
	for g, rg := range h.remotes {
		if gs == nil || gs.byID[g] != nil {
			rg.r.Close()
			delete(h.remotes, g)
		}
	}
	if gs == nil {
		h.remotes = nil
	}
}

// everyGroup calls fn for each group in ascending id order: the groups
// the directory lists and those open here, with this node's member, or,
// for a group of a placed cluster not held here, its remote (when
// neither exists, the group is skipped).
func (h *Host) everyGroup(fn func(m *member, rg *remote) error) error {
	gs := h.set.Load()
	var ids []uint32
	for _, m := range gs.ordered {
		ids = append(ids, m.id)
	}
	for _, g := range gs.dir.Groups {
		if gs.byID[g.ID] == nil {
			ids = append(ids, g.ID)
		}
	}
	slices.Sort(ids)
	for _, id := range ids {
		m := gs.byID[id]
		var rg *remote
		if m == nil {
			if rg = h.remote(gs, id); rg == nil {
				continue
			}
		}
		if err := fn(m, rg); err != nil {
			return err
		}
	}
	return nil
}
