package groups

import (
	"context"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// Scan continues a walk of the keys from cursor, whose key space is a
// group's id (engine.SplitCursor): with MOVED redirection, the groups this
// node leads, as each Redis Cluster master scans its own slots (a client
// scans every master); with forwarding, every group open here. Groups are
// walked in ascending id order, each on its local replica, and only keys
// of slots the group owns in this node's directory are listed. fn gets
// each live key and its kind; 0 means the walk is done.
func (h *Host) Scan(ctx context.Context, cursor uint64, count int, fn func(key []byte, k engine.Kind)) (uint64, error) {
	space, _, _ := engine.SplitCursor(cursor)
	gs := h.set.Load()
	var led []*member
	for _, m := range gs.ordered {
		if m.id >= space && m.id <= engine.MaxScanSpace && (h.cfg.Redirect == Forward || m.node.IsLeader()) {
			led = append(led, m)
		}
	}
	for i, m := range led {
		if m.id > space {
			cursor = engine.JoinCursor(m.id, 0, 0)
		}
		next, err := m.node.Scan(ctx, cursor, count, func(key []byte, k engine.Kind) {
			if gs.bySlot[slots.Of(key)] == m {
				fn(key, k)
			}
		})
		if err != nil || next != 0 {
			return next, err
		}
		// This group is done: the next call starts the next one.
		if i+1 < len(led) {
			return engine.JoinCursor(led[i+1].id, 0, 0), nil
		}
	}
	return 0, nil
}
