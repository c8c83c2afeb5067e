package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// Slot moves, on the data groups' side. A move m carries the slot range
// [start, end] from a source group S to a target group T, in steps that are
// each one entry of S's or T's log (cmdSlots), so every replica of a group
// passes the same steps at the same log index:
//
//	T: import(m)  the range is IMPORTING here: refused, records may arrive
//	S: freeze(m)  from this index S refuses the range (NOT_OWNED, never
//	              applied) and its records stop changing
//	T: chunk(m)   records exported from a replica of S past the freeze, at
//	              that replica's clock (the export clock), which T takes
//	              when it is ahead
//	T: commit(m)  T owns the range from this index; its clock is at least
//	              the export clock
//	S: release(m) S drops the range's records and keeps refusing it
//
// A group refuses a request on a slot in FROZEN, IMPORTING or GONE state;
// slots it never saw in a move are served (a group serves the slots the
// directory gives it, and the directory changes only after a commit).
// Every step is idempotent: applying it twice is applying it once. The
// driver (groups/, on the meta group's leader) and the argument that no
// decision is lost or made twice are in docs/cluster-mode.md.

// cmdSlots is a slot-move step: varint nowNanos, op byte, uvarint move id,
// then the op's operands.
const cmdSlots byte = 9

// msgSlots forwards a slot-move step to the group's leader: body: the op
// byte, the move id and operands; reply: varint result.
const msgSlots byte = 14

const (
	// slotsImport: uvarint start, end.
	slotsImport byte = 1
	// slotsFreeze: uvarint start, end. Result: the export clock.
	slotsFreeze byte = 2
	// slotsChunk: varint export clock, uvarint count, records
	// (appendRecord), in ascending key order. Result: 1 when applied.
	slotsChunk byte = 3
	// slotsCommit: varint export clock. Result: 1 when committed.
	slotsCommit byte = 4
	// slotsRelease: no operands. Result: the keys dropped.
	slotsRelease byte = 5
)

// Slot states (absent: served).
const (
	slotFrozen    byte = 1 // source, between freeze and release: refused
	slotGone      byte = 2 // source, after release: refused
	slotImporting byte = 3 // target, before commit: refused
	slotOwned     byte = 4 // target, after commit: served
)

// ErrNotOwned is a request's result when its group refused it because the
// group does not own its slot at that log index (a slot being moved, or
// moved away). The request was not applied; it may be sent again to the
// slot's owner.
var ErrNotOwned = &Error{"slot not owned", "TRYAGAIN the key's slot is moving between groups; retry"}

// ErrMoveRefused: a move step was refused by the group's state (for
// example a freeze of slots the group does not serve).
var ErrMoveRefused = &Error{"move step refused", "ERR the slot move step was refused by the group's state"}

type slotEntry struct {
	state byte
	move  uint64
}

// MoveProgress is one move as a replica of S or T has applied it.
type MoveProgress struct {
	ID          uint64
	Start, End  int
	Target      bool   // this group is the move's target
	ExportClock int64  // source: the freeze's time; target: the last chunk's export clock
	LastKey     string // target: the greatest key imported so far
	Done        bool   // target: committed; source: released
	Keys        int    // target: records imported; source: records dropped
}

// slotTable is the FSM's slot-move state (under fsm.mu).
type slotTable struct {
	state map[int]slotEntry
	moves map[uint64]*MoveProgress
}

func newSlotTable() slotTable {
	return slotTable{state: map[int]slotEntry{}, moves: map[uint64]*MoveProgress{}}
}

func (t *slotTable) empty() bool { return len(t.state) == 0 && len(t.moves) == 0 }

// movedIn is the set of slots a group took in a move and owns (state
// slotOwned), one bit per slot: what Node.OwnsMovedSlot reads without the
// state machine's lock.
type movedIn [NumSlots / 64]uint64

// publishMovedIn publishes the slots of the table in state slotOwned (under
// f.mu), after a step that can change them: a commit adds some, a freeze
// takes some out (an import or a release touches no owned slot, a chunk
// no state).
func (f *fsm) publishMovedIn() {
	var m movedIn
	for s, e := range f.slots.state {
		if e.state == slotOwned {
			m[s/64] |= 1 << (s % 64)
		}
	}
	f.movedIn.Store(&m)
}

// OwnsMovedSlot reports whether this replica's group took slot in a move
// that committed here (the target's commit step applied): from then on
// the group serves it, before or after the slot directory says so.
func (n *Node) OwnsMovedSlot(slot int) bool {
	m := n.fsm.movedIn.Load()
	return m != nil && slot >= 0 && slot < NumSlots && m[slot/64]&(1<<(slot%64)) != 0
}

// refused reports whether a request on key must be refused.
func (t *slotTable) refused(key []byte) bool {
	e, ok := t.state[slots.Of(key)]
	return ok && e.state != slotOwned
}

// filterOwned splits a batch: the requests this group may apply (with
// their names when names is not nil) and, in idx, their positions; the
// others get ErrNotOwned in res. A tier group is refused whole when any of
// its keys is. With no slot state (the usual case) it returns ok false and
// the batch is applied as it is.
func (f *fsm) filterOwned(reqs []engine.Request, names [][]byte, res []engine.Result) (keep []engine.Request, keepNames [][]byte, idx []int, ok bool) {
	if len(f.slots.state) == 0 {
		return nil, nil, nil, false
	}
	refuse := make([]bool, len(reqs))
	any := false
	for i := 0; i < len(reqs); {
		n := max(int(reqs[i].Tiers), 1)
		bad := false
		for k := i; k < i+n && k < len(reqs); k++ {
			bad = bad || f.slots.refused(reqs[k].Key)
		}
		for k := i; k < i+n && k < len(reqs); k++ {
			refuse[k] = bad
		}
		any = any || bad
		i += n
	}
	if !any {
		return nil, nil, nil, false
	}
	for i := range reqs {
		if refuse[i] {
			res[i] = engine.Result{Err: ErrNotOwned}
			continue
		}
		keep = append(keep, reqs[i])
		if names != nil {
			var nm []byte
			if i < len(names) {
				nm = names[i]
			}
			keepNames = append(keepNames, nm)
		}
		idx = append(idx, i)
	}
	return keep, keepNames, idx, true
}

// applySlots applies a cmdSlots entry (the caller holds f.mu). An op that
// does not decode was refused before the log, so it panics like any
// undecodable entry.
func (f *fsm) applySlots(now int64, op []byte, index uint64) any {
	d := decoder{b: op}
	code, id := d.byte(), d.uvarint()
	if d.err != nil {
		panic(fmt.Sprintf("cluster: log entry %d: bad slot move step", index))
	}
	mv := f.slots.moves[id]
	switch code {
	case slotsImport, slotsFreeze:
		start, end := int(d.uvarint()), int(d.uvarint())
		if d.err != nil || start > end || end >= NumSlots {
			panic(fmt.Sprintf("cluster: log entry %d: bad slot move range", index))
		}
		if mv != nil {
			return &stateResult{v: mv.ExportClock}
		}
		for s := start; s <= end; s++ {
			e, ok := f.slots.state[s]
			served := !ok || e.state == slotOwned
			// A freeze needs slots this group serves; an import, slots
			// it does not (it never owned them, or they moved away).
			if code == slotsFreeze && !served || code == slotsImport && ok && e.state != slotGone {
				return &stateResult{err: ErrMoveRefused}
			}
		}
		st := slotFrozen
		if code == slotsImport {
			st = slotImporting
		}
		for s := start; s <= end; s++ {
			f.slots.state[s] = slotEntry{state: st, move: id}
		}
		f.publishMovedIn() // a freeze takes owned slots out
		mv = &MoveProgress{ID: id, Start: start, End: end, Target: code == slotsImport}
		if code == slotsFreeze {
			mv.ExportClock = now
		}
		f.slots.moves[id] = mv
		return &stateResult{v: mv.ExportClock}
	case slotsChunk:
		clock := d.varint()
		recs := d.records()
		if d.err != nil {
			panic(fmt.Sprintf("cluster: log entry %d: bad slot move chunk", index))
		}
		if mv == nil || !mv.Target || mv.Done {
			return &stateResult{err: ErrMoveRefused}
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
	case slotsCommit:
		clock := d.varint()
		if d.err != nil {
			panic(fmt.Sprintf("cluster: log entry %d: bad slot move commit", index))
		}
		if mv == nil || !mv.Target {
			return &stateResult{err: ErrMoveRefused}
		}
		if !mv.Done {
			if clock > f.now.Load() {
				f.now.Store(clock)
			}
			for s := mv.Start; s <= mv.End; s++ {
				f.slots.state[s] = slotEntry{state: slotOwned, move: id}
			}
			f.publishMovedIn()
			mv.Done = true
		}
		return &stateResult{v: 1}
	case slotsRelease:
		if mv == nil || mv.Target {
			return &stateResult{err: ErrMoveRefused}
		}
		if !mv.Done {
			for s := mv.Start; s <= mv.End; s++ {
				f.slots.state[s] = slotEntry{state: slotGone, move: id}
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

// records decodes a uvarint count and that many records (appendRecord).
func (d *decoder) records() []engine.Record {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	recs := make([]engine.Record, 0, n)
	for range n {
		r := engine.Record{Key: string(d.bytes()), Kind: engine.Kind(d.byte())}
		nf := d.uvarint()
		if d.err != nil || nf > 1<<16 {
			d.fail()
			return nil
		}
		for range nf {
			r.Fields = append(r.Fields, d.varint())
		}
		recs = append(recs, r)
	}
	return recs
}

// appendSlotTable encodes the slot-move state for snapshots and digests:
// uvarint count of slot entries, then slot, state, move each (by slot);
// uvarint count of moves, then each move by id.
func appendSlotTable(dst []byte, t *slotTable) []byte {
	ss := make([]int, 0, len(t.state))
	for s := range t.state {
		ss = append(ss, s)
	}
	slices.Sort(ss)
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		e := t.state[s]
		dst = binary.AppendUvarint(dst, uint64(s))
		dst = append(dst, e.state)
		dst = binary.AppendUvarint(dst, e.move)
	}
	ids := make([]uint64, 0, len(t.moves))
	for id := range t.moves {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	dst = binary.AppendUvarint(dst, uint64(len(ids)))
	for _, id := range ids {
		m := t.moves[id]
		dst = binary.AppendUvarint(dst, m.ID)
		dst = binary.AppendUvarint(dst, uint64(m.Start))
		dst = binary.AppendUvarint(dst, uint64(m.End))
		flags := byte(0)
		if m.Target {
			flags |= 1
		}
		if m.Done {
			flags |= 2
		}
		dst = append(dst, flags)
		dst = binary.AppendVarint(dst, m.ExportClock)
		dst = appendString(dst, m.LastKey)
		dst = binary.AppendUvarint(dst, uint64(m.Keys))
	}
	return dst
}

func decodeSlotTable(b []byte) (slotTable, error) {
	t := newSlotTable()
	d := decoder{b: b}
	n := d.uvarint()
	if d.err != nil || n > NumSlots {
		return t, errBadSnapshot
	}
	for range n {
		s := int(d.uvarint())
		e := slotEntry{state: d.byte(), move: d.uvarint()}
		if d.err != nil || s >= NumSlots {
			return t, errBadSnapshot
		}
		t.state[s] = e
	}
	nm := d.uvarint()
	if d.err != nil || nm > 1<<20 {
		return t, errBadSnapshot
	}
	for range nm {
		m := &MoveProgress{ID: d.uvarint(), Start: int(d.uvarint()), End: int(d.uvarint())}
		flags := d.byte()
		m.Target, m.Done = flags&1 != 0, flags&2 != 0
		m.ExportClock = d.varint()
		m.LastKey = string(d.bytes())
		m.Keys = int(d.uvarint())
		if d.err != nil {
			return t, errBadSnapshot
		}
		t.moves[m.ID] = m
	}
	if len(d.b) != 0 {
		return t, errBadSnapshot
	}
	return t, nil
}

// Move steps, proposed through the group's leader (any node of the group
// may call them; a follower forwards).

// ImportSlots marks [start, end] IMPORTING for move id (the target's first step).
func (n *Node) ImportSlots(ctx context.Context, id uint64, start, end int) error {
	_, err := n.proposeSlots(ctx, rangeOp(slotsImport, id, start, end))
	return err
}

// FreezeSlots freezes [start, end] for move id (the source's first step)
// and returns the export clock.
func (n *Node) FreezeSlots(ctx context.Context, id uint64, start, end int) (int64, error) {
	return n.proposeSlots(ctx, rangeOp(slotsFreeze, id, start, end))
}

// ImportChunk adds records, in ascending key order, to move id's target.
func (n *Node) ImportChunk(ctx context.Context, id uint64, clock int64, recs []engine.Record) error {
	op := binary.AppendUvarint([]byte{slotsChunk}, id)
	op = binary.AppendVarint(op, clock)
	op = binary.AppendUvarint(op, uint64(len(recs)))
	for i := range recs {
		op = appendRecord(op, &recs[i])
	}
	_, err := n.proposeSlots(ctx, op)
	return err
}

// CommitImport makes the target own move id's range.
func (n *Node) CommitImport(ctx context.Context, id uint64, clock int64) error {
	_, err := n.proposeSlots(ctx, binary.AppendVarint(binary.AppendUvarint([]byte{slotsCommit}, id), clock))
	return err
}

// ReleaseSlots drops move id's range at the source and returns the keys
// dropped.
func (n *Node) ReleaseSlots(ctx context.Context, id uint64) (int, error) {
	v, err := n.proposeSlots(ctx, binary.AppendUvarint([]byte{slotsRelease}, id))
	return int(v), err
}

func rangeOp(code byte, id uint64, start, end int) []byte {
	op := binary.AppendUvarint([]byte{code}, id)
	op = binary.AppendUvarint(op, uint64(start))
	return binary.AppendUvarint(op, uint64(end))
}

// Move reports move id as this replica has applied it.
func (n *Node) Move(id uint64) (MoveProgress, bool) {
	n.fsm.mu.Lock()
	defer n.fsm.mu.Unlock()
	m := n.fsm.slots.moves[id]
	if m == nil {
		return MoveProgress{}, false
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

// validSlotsOp reports whether op decodes as a slot move step.
func validSlotsOp(op []byte) bool {
	d := decoder{b: op}
	code := d.byte()
	d.uvarint()
	switch code {
	case slotsImport, slotsFreeze:
		start, end := d.uvarint(), d.uvarint()
		if start > end || end >= NumSlots {
			return false
		}
	case slotsChunk:
		d.varint()
		recs := d.records()
		if d.err == nil {
			if err := engine.ValidateRecords(recs); err != nil {
				return false
			}
		}
	case slotsCommit:
		d.varint()
	case slotsRelease:
	default:
		return false
	}
	return d.err == nil && len(d.b) == 0
}
