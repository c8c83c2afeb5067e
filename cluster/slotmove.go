package cluster

import (
	"context"
	"fmt"
	"slices"

	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// The steps of a slot move in a data group's log (the steps, their states
// and the argument are in package ownership's table.go and
// docs/cluster-mode.md). A step is an ownership move step in an
// entry.Slots entry, proposed through the group's leader as a state op
// (stateop.go); the FSM applies it to its ownership.Table and, for a
// chunk or a release, to the engine and its clock (applySlots).

// publishMovedIn publishes the slots of the table in state Owned (under
// f.mu), after a step that can change them: a commit adds some, a freeze
// takes some out (an import or a release touches no owned slot, a chunk
// no state).
func (f *fsm) publishMovedIn() { f.movedIn.Store(f.slots.MovedIn()) }

// OwnsMovedSlot reports whether this replica's group took slot in a move
// that committed here (the target's commit step applied): from then on
// the group serves it, before or after the slot directory says so.
func (n *Node) OwnsMovedSlot(slot int) bool { return n.fsm.movedIn.Load().Has(slot) }

// applySlots applies an entry.Slots entry (the caller holds f.mu). A step
// that does not decode was refused before the log, so it panics like any
// undecodable entry.
func (f *fsm) applySlots(now int64, op []byte, index uint64) any {
	step, err := ownership.DecodeStep(op)
	if err != nil {
		panic(fmt.Sprintf("cluster: log entry %d: bad slot move step", index))
	}
	code, id := step.Code, step.ID
	mv := f.slots.Move(id)
	switch code {
	case ownership.StepImport, ownership.StepFreeze:
		start, end := step.Start, step.End
		if mv != nil {
			return &stateResult{v: mv.ExportClock}
		}
		for s := start; s <= end; s++ {
			st, ok := f.slots.State(s)
			served := !ok || st == ownership.Owned
			// A freeze needs slots this group serves; an import, slots
			// it does not (it never owned them, or they moved away).
			if code == ownership.StepFreeze && !served || code == ownership.StepImport && ok && st != ownership.Gone {
				return &stateResult{err: ownership.ErrMoveRefused}
			}
		}
		st := ownership.Frozen
		if code == ownership.StepImport {
			st = ownership.Importing
		}
		for s := start; s <= end; s++ {
			f.slots.Set(s, st, id)
		}
		f.publishMovedIn() // a freeze takes owned slots out
		mv = &ownership.Progress{ID: id, Start: start, End: end, Target: code == ownership.StepImport}
		if code == ownership.StepFreeze {
			mv.ExportClock = now
		}
		f.slots.AddMove(mv)
		return &stateResult{v: mv.ExportClock}
	case ownership.StepChunk:
		clock, recs := step.Clock, step.Records
		if mv == nil || !mv.Target || mv.Done {
			return &stateResult{err: ownership.ErrMoveRefused}
		}
		keep := recs[:0]
		for _, r := range recs {
			if r.Key > mv.LastKey && slots.OfString(r.Key) >= mv.Start && slots.OfString(r.Key) <= mv.End {
				keep = append(keep, r)
			}
		}
		// The target takes the source's clock when it is ahead.
		t := max(now, clock)
		if t > f.now.Load() {
			f.now.Store(t)
		}
		if len(keep) > 0 {
			if err := f.eng.Import(context.Background(), f.now.Load(), keep); err != nil {
				// Records were validated before the log: a failure here
				// is a replica that cannot follow it.
				panic(fmt.Sprintf("cluster: log entry %d: importing a slot move chunk: %v", index, err))
			}
			mv.LastKey = keep[len(keep)-1].Key
			mv.Keys += len(keep)
		}
		mv.ExportClock = max(mv.ExportClock, clock)
		return &stateResult{v: 1}
	case ownership.StepCommit:
		clock := step.Clock
		if mv == nil || !mv.Target {
			return &stateResult{err: ownership.ErrMoveRefused}
		}
		if !mv.Done {
			if clock > f.now.Load() {
				f.now.Store(clock)
			}
			for s := mv.Start; s <= mv.End; s++ {
				f.slots.Set(s, ownership.Owned, id)
			}
			f.publishMovedIn()
			mv.Done = true
		}
		return &stateResult{v: 1}
	case ownership.StepRelease:
		if mv == nil || mv.Target {
			return &stateResult{err: ownership.ErrMoveRefused}
		}
		if !mv.Done {
			for s := mv.Start; s <= mv.End; s++ {
				f.slots.Set(s, ownership.Gone, id)
			}
			n, err := f.dropRange(mv.Start, mv.End)
			if err != nil {
				panic(fmt.Sprintf("cluster: log entry %d: releasing slots: %v", index, err))
			}
			mv.Keys, mv.Done = n, true
		}
		return &stateResult{v: int64(mv.Keys)}
	}
	panic(fmt.Sprintf("cluster: log entry %d: unknown slot move step %d", index, code))
}

// dropRange deletes every key of slots [start, end] (release).
func (f *fsm) dropRange(start, end int) (int, error) {
	return f.eng.DeleteMatching(context.Background(), f.now.Load(), func(key []byte) bool {
		s := slots.Of(key)
		return s >= start && s <= end
	})
}

// Move steps, proposed through the group's leader (any node of the group
// may call them; a follower forwards).

// ImportSlots marks [start, end] IMPORTING for move id (the target's first step).
func (n *Node) ImportSlots(ctx context.Context, id uint64, start, end int) error {
	_, err := n.proposeSlots(ctx, ownership.ImportStep(id, start, end))
	return err
}

// FreezeSlots freezes [start, end] for move id (the source's first step)
// and returns the export clock.
func (n *Node) FreezeSlots(ctx context.Context, id uint64, start, end int) (int64, error) {
	return n.proposeSlots(ctx, ownership.FreezeStep(id, start, end))
}

// ImportChunk adds records, in ascending key order, to move id's target.
func (n *Node) ImportChunk(ctx context.Context, id uint64, clock int64, recs []engine.Record) error {
	_, err := n.proposeSlots(ctx, ownership.ChunkStep(id, clock, recs))
	return err
}

// CommitImport makes the target own move id's range.
func (n *Node) CommitImport(ctx context.Context, id uint64, clock int64) error {
	_, err := n.proposeSlots(ctx, ownership.CommitStep(id, clock))
	return err
}

// ReleaseSlots drops move id's range at the source and returns the keys
// dropped.
func (n *Node) ReleaseSlots(ctx context.Context, id uint64) (int, error) {
	v, err := n.proposeSlots(ctx, ownership.ReleaseStep(id))
	return int(v), err
}

// Move reports move id as this replica has applied it.
func (n *Node) Move(id uint64) (ownership.Progress, bool) {
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	m := n.fsm.slots.Move(id)
	if m == nil {
		return ownership.Progress{}, false
	}
	return *m, true
}

// ExportSlots returns this replica's records of slots [start, end] whose
// key sorts after after, in key order, live at the replica's clock, which
// it returns: the export clock, which the target takes with the records.
// Call it on a replica that has applied the range's freeze: no request
// changes the records any more, and a record the sweep drops meanwhile is
// empty at the export clock, so every export of the range holds the same
// state as of its clock.
func (n *Node) ExportSlots(ctx context.Context, start, end int, after string) ([]engine.Record, int64, error) {
	clock := n.fsm.now.Load()
	var recs []engine.Record
	_, err := n.fsm.eng.Export(ctx, clock, func(r engine.Record) error {
		if s := slots.OfString(r.Key); s >= start && s <= end && r.Key > after {
			recs = append(recs, r)
		}
		return nil
	})
	slices.SortFunc(recs, func(a, b engine.Record) int {
		switch {
		case a.Key < b.Key:
			return -1
		case a.Key > b.Key:
			return 1
		}
		return 0
	})
	return recs, clock, err
}

func (n *Node) proposeSlots(ctx context.Context, op []byte) (int64, error) {
	return slotsOps.propose(ctx, n, op)
}
