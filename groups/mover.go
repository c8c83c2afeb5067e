package groups

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// Moving slots between groups. The directory (the meta group) holds at
// most one move in progress; whichever node leads the meta group drives
// it, step by step through the source's and the target's logs
// (cluster/slotmove.go), and a new meta leader takes over where the log
// says the move is: every step is idempotent. The argument that a move
// neither loses nor doubles a decision is in docs/cluster-mode.md.

// chunkBytes bounds one import chunk's encoded records: large enough that
// a million keys take some 20 log entries, small enough for one Raft
// append.
const chunkBytes = 2 << 20

// exportBytes bounds one page of a source's records read from its leader
// (a move driven from a node without a replica of the source).
const exportBytes = 8 * chunkBytes

// MoveSlots records a move of slots [start, end] to group target and
// returns its id; the meta group's leader carries it out. It returns once
// the move is recorded; MoveStatus and RL.CLUSTER MOVES follow it.
func (h *Host) MoveSlots(ctx context.Context, start, end int, target uint32) (uint64, error) {
	return h.meta.BeginMove(ctx, start, end, target)
}

// WaitMove waits until move id is over (released) or ctx ends.
func (h *Host) WaitMove(ctx context.Context, id uint64) error {
	for {
		ch := h.meta.DirectoryChanged()
		for _, m := range h.meta.Directory().Moves {
			if m.ID == id && m.State == ownership.MoveReleased {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-h.closing:
			return cluster.ErrShutdown
		case <-ch:
		}
	}
}

// drive runs on every node and drives the move in progress while this
// node is its driver (moveDriver).
func (h *Host) drive() {
	defer h.wg.Done()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	lastErr := ""
	for {
		ch := h.meta.DirectoryChanged()
		if d := h.meta.Directory(); d.Current() != nil && h.drivesMove(d, d.Current()) {
			mv := d.Current()
			err := h.driveMove(*mv)
			if err != nil && !errors.Is(err, errNotMetaLeader) && err.Error() != lastErr {
				h.log.Warn("slot move step failed; retrying", "move", mv.ID, "err", err)
			}
			lastErr = ""
			if err != nil {
				lastErr = err.Error()
			}
		}
		select {
		case <-h.closing:
			return
		case <-ch:
		case <-tick.C:
		}
	}
}

var errNotMetaLeader = errors.New("no longer the move's driver")

// drivesMove reports whether this node drives move mv: the meta group's
// leader, which holds every group in a cluster without a replication
// factor. With one (--replicas) the driver needs replicas of both
// groups: the meta group's leader when it holds them, otherwise the
// first node by id that holds voting replicas of both and is neither
// dead nor draining, or, when no node holds both (with R = 3, possible
// from six nodes), the meta group's leader, through the leaders of the
// groups it does not hold. Two nodes that both take
// themselves for the driver for a moment, as two meta leaders may, are
// safe: every step is recorded in the logs and refused out of order.
func (h *Host) drivesMove(d *ownership.Directory, mv *ownership.Move) bool {
	if d.Replicas == 0 {
		return h.meta.IsLeader()
	}
	src, dst := d.Group(mv.Source), d.Group(mv.Target)
	if src == nil || dst == nil {
		return false
	}
	both := func(n string) bool { return slices.Contains(src.Replicas, n) && slices.Contains(dst.Replicas, n) }
	if l := h.meta.LeaderID(); l != "" && both(l) {
		return h.meta.IsLeader()
	}
	ids := slices.Sorted(maps.Keys(d.Nodes))
	for _, id := range ids {
		if both(id) && d.States[id] == 0 {
			return id == h.cfg.Node.NodeID
		}
	}
	// No live node holds both: the meta leader drives it, reaching the
	// groups it does not hold through their leaders (moveSide).
	return h.meta.IsLeader()
}

// step retries f until it succeeds, this node stops driving the move in
// progress, or the host closes. Refusals by a group's state are returned.
func (h *Host) step(what string, f func(ctx context.Context) error) error {
	for {
		if d := h.meta.Directory(); d.Current() == nil || !h.drivesMove(d, d.Current()) {
			return errNotMetaLeader
		}
		ctx, cancel := context.WithTimeout(context.Background(), h.commitTimeout())
		err := f(ctx)
		cancel()
		if err == nil {
			return nil
		}
		var inv *ownership.ErrMoveInvalid
		if errors.Is(err, ownership.ErrMoveRefused) || errors.As(err, &inv) {
			return fmt.Errorf("%s: %w", what, err)
		}
		select {
		case <-h.closing:
			return cluster.ErrShutdown
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// driveMove carries move mv from where the directory says it is to its
// end.
func (h *Host) driveMove(mv ownership.Move) error {
	start := time.Now()
	var src, dst moveSide
	if err := h.step("find the groups", func(context.Context) error {
		gs := h.set.Load()
		src, dst = h.moveSide(gs, mv.Source), h.moveSide(gs, mv.Target)
		if src == nil || dst == nil {
			return fmt.Errorf("group %d or %d is not reachable from here yet", mv.Source, mv.Target)
		}
		return nil
	}); err != nil {
		return err
	}
	if mv.State == ownership.MoveBegun {
		if err := h.step("import", func(ctx context.Context) error {
			return dst.ImportSlots(ctx, mv.ID, mv.Start, mv.End)
		}); err != nil {
			return err
		}
		if plantedCommitFirst() {
			// Planted bug: the target commits (and the directory
			// switches) before the source froze and its state was copied.
			if err := h.step("commit", func(ctx context.Context) error { return dst.CommitImport(ctx, mv.ID, 0) }); err != nil {
				return err
			}
			if err := h.step("record the commit", func(ctx context.Context) error { return h.meta.MoveCommitted(ctx, mv.ID) }); err != nil {
				return err
			}
		}
		if err := h.step("freeze", func(ctx context.Context) error {
			_, err := h.freeze(ctx, src, mv)
			return err
		}); err != nil {
			return err
		}
		// A target that committed already (a driver before this one got
		// that far) takes no more chunks: go on to record the commit.
		var p ownership.Progress
		var found bool
		if err := h.step("read the target's progress", func(ctx context.Context) (err error) {
			p, found, err = dst.MoveStatus(ctx, mv.ID)
			return err
		}); err != nil {
			return err
		}
		keys, clock := 0, int64(0)
		if !found || !p.Done {
			var err error
			if keys, clock, err = h.copyRange(src, dst, mv, p.LastKey); err != nil {
				return err
			}
		}
		if err := h.step("commit", func(ctx context.Context) error { return dst.CommitImport(ctx, mv.ID, clock) }); err != nil {
			return err
		}
		if err := h.step("record the commit", func(ctx context.Context) error { return h.meta.MoveCommitted(ctx, mv.ID) }); err != nil {
			return err
		}
		h.log.Info("slot move committed", "move", mv.ID, "slots", fmt.Sprintf("%d-%d", mv.Start, mv.End),
			"from", mv.Source, "to", mv.Target, "keys", keys, "took", time.Since(start))
	}
	if err := h.step("release", func(ctx context.Context) error {
		_, err := src.ReleaseSlots(ctx, mv.ID)
		if plantedNoFreeze() && errors.Is(err, ownership.ErrMoveRefused) {
			return nil // never frozen: nothing to release
		}
		return err
	}); err != nil {
		return err
	}
	return h.step("record the release", func(ctx context.Context) error { return h.meta.MoveReleased(ctx, mv.ID) })
}

func (h *Host) freeze(ctx context.Context, src moveSide, mv ownership.Move) (int64, error) {
	if plantedNoFreeze() {
		// Planted bug: the source keeps answering for the range.
		return time.Now().UnixNano(), nil
	}
	return src.FreezeSlots(ctx, mv.ID, mv.Start, mv.End)
}

// copyRange sends the source's records of the range to the target in
// chunks, after after (the greatest key the target has, as its replica
// that answered says, which may lag: the target skips keys it has), and
// returns the records sent and the export clock. The source exports once
// it has applied the freeze, a page at a time (a replica here answers in
// one page, a remote leader in pages of exportBytes); each chunk is a step
// of its own, retried alone, so a range of any size is copied within a
// commit timeout per chunk.
func (h *Host) copyRange(src, dst moveSide, mv ownership.Move, after string) (int, int64, error) {
	sent := 0
	var clock int64
	for first := true; ; first = false {
		var recs []engine.Record
		var more bool
		if err := h.step("export", func(ctx context.Context) (err error) {
			var c int64
			recs, c, more, err = src.ExportPage(ctx, mv.ID, mv.Start, mv.End, after, exportBytes)
			if errors.Is(err, errFreezeNotHere) {
				time.Sleep(5 * time.Millisecond)
			}
			clock = max(clock, c)
			return err
		}); err != nil {
			return sent, clock, err
		}
		if plantedNoCopy() {
			return 0, clock, nil // planted bug: the target commits without the state
		}
		if len(recs) > 0 {
			after = recs[len(recs)-1].Key
		}
		// An empty range still sends one (empty) chunk: it carries the
		// source's clock to the target.
		for firstChunk := first; firstChunk || len(recs) > 0; firstChunk = false {
			n, size := 0, 0
			for n < len(recs) && size < chunkBytes {
				size += len(recs[n].Key) + 8*len(recs[n].Fields) + 8
				n++
			}
			chunk := recs[:n]
			if err := h.step("copy", func(ctx context.Context) error {
				return dst.ImportChunk(ctx, mv.ID, clock, chunk)
			}); err != nil {
				return sent, clock, err
			}
			sent += n
			recs = recs[n:]
		}
		if !more {
			return sent, clock, nil
		}
	}
}

// untilClosed is a context that ends when the host closes (or cancel is
// called).
func (h *Host) untilClosed() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-h.closing:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// StartRebalance runs Rebalance in the background (RL.CLUSTER
// REBALANCE); false when one already runs on this node.
func (h *Host) StartRebalance() bool {
	select {
	case <-h.closing:
		return false
	default:
	}
	if !h.rebalancing.CompareAndSwap(false, true) {
		return false
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer h.rebalancing.Store(false)
		ctx, cancel := h.untilClosed()
		defer cancel()
		n, err := h.Rebalance(ctx)
		if err != nil {
			h.log.Warn("rebalance stopped", "moves", n, "err", err)
			return
		}
		h.log.Info("rebalance done", "moves", n)
	}()
	return true
}

// Rebalance moves slots until every group owns within one slot of the
// same number, one move at a time, each from the group owning the most
// to the group owning the fewest (the highest slots of the richest group's
// last range). It returns the moves made, and stops at ctx's end.
func (h *Host) Rebalance(ctx context.Context) (int, error) {
	made := 0
	for {
		d := h.meta.Directory()
		if d.Epoch == 0 {
			return made, ownership.ErrNotInitialised
		}
		if cur := d.Current(); cur != nil {
			if err := h.WaitMove(ctx, cur.ID); err != nil {
				return made, err
			}
			continue
		}
		start, end, target, ok := rebalanceStep(d)
		if !ok {
			return made, nil
		}
		id, err := h.MoveSlots(ctx, start, end, target)
		if err != nil {
			var inv *ownership.ErrMoveInvalid
			if errors.As(err, &inv) {
				continue // another move began meanwhile: wait for it
			}
			return made, err
		}
		made++
		if err := h.WaitMove(ctx, id); err != nil {
			return made, err
		}
	}
}

// rebalanceStep picks the next move of a rebalance: the slots the group
// owning the most has beyond its fair share (or what the poorest lacks,
// if less), taken from the end of its last range, to the group owning the
// fewest. ok is false when the groups are within one slot of each other.
func rebalanceStep(d *ownership.Directory) (start, end int, target uint32, ok bool) {
	if len(d.Groups) < 2 {
		return 0, 0, 0, false
	}
	count := map[uint32]int{}
	for _, g := range d.Groups {
		count[g.ID] = 0
	}
	for _, g := range d.Slots {
		if g != 0 {
			count[g]++
		}
	}
	ids := make([]uint32, 0, len(count))
	for id := range count {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	rich, poor := ids[0], ids[0]
	for _, id := range ids {
		if count[id] > count[rich] {
			rich = id
		}
		if count[id] < count[poor] {
			poor = id
		}
	}
	if count[rich]-count[poor] <= 1 {
		return 0, 0, 0, false
	}
	total := 0
	for _, n := range count {
		total += n
	}
	fair := total / len(ids)
	n := min(count[rich]-fair, fair-count[poor])
	if n <= 0 {
		n = (count[rich] - count[poor]) / 2
	}
	// The last run of the richest group: move at most n slots off its end.
	runs := ownership.Runs(d.Slots)
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Group == rich {
			end = runs[i].End
			start = max(runs[i].Start, end-n+1)
			return start, end, poor, true
		}
	}
	return 0, 0, 0, false
}

// rerouteRefused handles the requests a group refused for their slot (a
// move froze or released it; never applied): they wait for the directory
// to change, at most the commit timeout, then go to the slot's new group,
// or get MOVED to its leader; past the wait they get TRYAGAIN.
func (h *Host) rerouteRefused(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) {
	deadline := time.Now().Add(h.commitTimeout())
	for {
		var idx []int
		for i := range res {
			if errors.Is(res[i].Err, ownership.ErrNotOwned) {
				idx = append(idx, i)
			}
		}
		if len(idx) == 0 {
			return
		}
		// Wait for the directory to change, at most until the deadline;
		// the refused requests were not applied anywhere.
		before := h.set.Load()
		for h.set.Load() == before {
			wait := time.Until(deadline)
			if wait <= 0 {
				for _, i := range idx {
					res[i] = engine.Result{Err: cluster.ErrNotAppended}
				}
				return
			}
			select {
			case <-ctx.Done():
				for _, i := range idx {
					res[i] = engine.Result{Err: cluster.ErrNotAppended}
				}
				return
			case <-h.closing:
				return
			case <-time.After(min(wait, 20*time.Millisecond)):
			}
		}
		gs := h.set.Load()
		sub := make([]engine.Request, 0, len(idx))
		var subNames [][]byte
		var keep []int
		for _, i := range idx {
			t := h.target(gs, slots.Of(reqs[i].Key))
			if t == nil {
				res[i] = engine.Result{Err: errNotServed}
				continue
			}
			if m, ok := t.(*member); ok && h.cfg.Redirect == Moved && !m.node.IsLeader() {
				if addr := gs.dir.Nodes[m.node.LeaderID()]; addr != "" {
					res[i] = engine.Result{Err: movedError(reqs[i].Key, addr)}
					continue
				}
			}
			sub = append(sub, reqs[i])
			if i < len(names) {
				for len(subNames) < len(sub)-1 {
					subNames = append(subNames, nil)
				}
				subNames = append(subNames, names[i])
			}
			keep = append(keep, i)
		}
		if len(sub) == 0 {
			return
		}
		subRes := make([]engine.Result, len(sub))
		if err := h.doSplit(ctx, gs, sub, subNames, subRes); err != nil {
			for k := range subRes {
				subRes[k] = engine.Result{Err: err}
			}
		}
		for k, i := range keep {
			res[i] = subRes[k]
		}
	}
}
