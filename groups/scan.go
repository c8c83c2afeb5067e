package groups

import (
	"context"
	"slices"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// Scan continues a walk of the keys from cursor, whose key space is a
// group's id (engine.SplitCursor): with MOVED redirection, the groups this
// node leads, as each Redis Cluster master scans its own slots (a client
// scans every master); with forwarding, every group: those open here on
// their local replica, the others of a placed cluster on their leader's
// (cluster.Remote), so a client that is not cluster-aware sees every key
// through any node, as DBSIZE counts them. Groups are walked in ascending
// id order, and only keys of slots the group owns in this node's
// directory are listed. fn gets each live key and its kind; 0 means the
// walk is done.
func (h *Host) Scan(ctx context.Context, cursor uint64, count int, fn func(key []byte, k engine.Kind)) (uint64, error) {
	space, _, _ := engine.SplitCursor(cursor)
	gs := h.set.Load()
	var ids []uint32
	for _, m := range gs.ordered {
		if h.cfg.Redirect == Forward || m.node.IsLeader() {
			ids = append(ids, m.id)
		}
	}
	if h.cfg.Redirect == Forward && gs.dir.Replicas > 0 && gs.dir.Slots != nil {
		for _, g := range gs.dir.Groups {
			if gs.byID[g.ID] == nil {
				ids = append(ids, g.ID)
			}
		}
	}
	slices.Sort(ids)
	ids = slices.DeleteFunc(ids, func(id uint32) bool { return id < space || id > engine.MaxScanSpace })
	for i, id := range ids {
		if id > space {
			cursor = engine.JoinCursor(id, 0, 0)
		}
		var next uint64
		var err error
		if m := gs.byID[id]; m != nil {
			next, err = m.node.Scan(ctx, cursor, count, func(key []byte, k engine.Kind) {
				if gs.bySlot[slots.Of(key)] == m {
					fn(key, k)
				}
			})
		} else if rg := h.remote(gs, id); rg != nil {
			next, err = rg.r.Scan(ctx, cursor, count, func(key []byte, k engine.Kind) {
				if gs.dir.Slots[slots.Of(key)] == id {
					fn(key, k)
				}
			})
		}
		if err != nil || next != 0 {
			return next, err
		}
		// This group is done: the next call starts the next one.
		if i+1 < len(ids) {
			return engine.JoinCursor(ids[i+1], 0, 0), nil
		}
	}
	return 0, nil
}
