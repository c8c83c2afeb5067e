package ownership

import (
	"encoding/binary"
	"slices"

	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// A data group's slot-move state. A move m carries the slot range
// [start, end] from a source group S to a target group T, in steps that
// are each one entry of S's or T's log (entry.Slots, a step encoded by
// the *Step functions below), so every replica of a group passes the same
// steps at the same log index:
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
// state machine applies the steps (cluster's slotmove.go); the driver
// (groups/, on the meta group's leader) and the argument that no
// decision is lost or made twice are in docs/cluster-mode.md.

// Step codes: the first byte of a step. Append-only: logs hold them.
const (
	// StepImport: uvarint start, end.
	StepImport byte = 1
	// StepFreeze: uvarint start, end. Result: the export clock.
	StepFreeze byte = 2
	// StepChunk: varint export clock, uvarint count, records
	// (codec.AppendRecord), in ascending key order. Result: 1 when applied.
	StepChunk byte = 3
	// StepCommit: varint export clock. Result: 1 when committed.
	StepCommit byte = 4
	// StepRelease: no operands. Result: the keys dropped.
	StepRelease byte = 5
)

// Step is one decoded slot-move step: a code byte, a uvarint move id,
// then the code's operands.
type Step struct {
	Code       byte
	ID         uint64
	Start, End int             // StepImport, StepFreeze
	Clock      int64           // StepChunk, StepCommit: the export clock
	Records    []engine.Record // StepChunk
}

// ImportStep marks [start, end] IMPORTING for move id (the target's first
// step).
func ImportStep(id uint64, start, end int) []byte { return rangeStep(StepImport, id, start, end) }

// FreezeStep freezes [start, end] for move id (the source's first step).
func FreezeStep(id uint64, start, end int) []byte { return rangeStep(StepFreeze, id, start, end) }

// ChunkStep adds records, in ascending key order, to move id's target.
func ChunkStep(id uint64, clock int64, recs []engine.Record) []byte {
	op := binary.AppendUvarint([]byte{StepChunk}, id)
	op = binary.AppendVarint(op, clock)
	op = binary.AppendUvarint(op, uint64(len(recs)))
	for i := range recs {
		op = codec.AppendRecord(op, &recs[i])
	}
	return op
}

// CommitStep makes the target own move id's range.
func CommitStep(id uint64, clock int64) []byte {
	return binary.AppendVarint(binary.AppendUvarint([]byte{StepCommit}, id), clock)
}

// ReleaseStep drops move id's range at the source.
func ReleaseStep(id uint64) []byte { return binary.AppendUvarint([]byte{StepRelease}, id) }

func rangeStep(code byte, id uint64, start, end int) []byte {
	op := binary.AppendUvarint([]byte{code}, id)
	op = binary.AppendUvarint(op, uint64(start))
	return binary.AppendUvarint(op, uint64(end))
}

// DecodeStep decodes a step; codec.ErrCorrupt when it does not decode,
// has bytes left over, holds a range outside the slots, or records the
// engine would refuse to import.
func DecodeStep(op []byte) (Step, error) {
	d := codec.Reader{B: op}
	s := Step{Code: d.Byte(), ID: d.Uvarint()}
	switch s.Code {
	case StepImport, StepFreeze:
		start, end := d.Uvarint(), d.Uvarint()
		if start > end || end >= slots.Count {
			return s, codec.ErrCorrupt
		}
		s.Start, s.End = int(start), int(end)
	case StepChunk:
		s.Clock = d.Varint()
		s.Records = d.Records()
		if d.Err == nil {
			if err := engine.ValidateRecords(s.Records); err != nil {
				return s, codec.ErrCorrupt
			}
		}
	case StepCommit:
		s.Clock = d.Varint()
	case StepRelease:
	default:
		return s, codec.ErrCorrupt
	}
	if d.Err != nil || len(d.B) != 0 {
		return s, codec.ErrCorrupt
	}
	return s, nil
}

// ValidStep reports whether op decodes as a slot-move step.
func ValidStep(op []byte) bool {
	_, err := DecodeStep(op)
	return err == nil
}

// SlotState is a slot's state in a move (absent from the table: served).
type SlotState byte

// Slot states. Append-only: snapshots hold them.
const (
	Frozen    SlotState = 1 // source, between freeze and release: refused
	Gone      SlotState = 2 // source, after release: refused
	Importing SlotState = 3 // target, before commit: refused
	Owned     SlotState = 4 // target, after commit: served
)

type slotEntry struct {
	state SlotState
	move  uint64
}

// Progress is one move as a replica of S or T has applied it.
type Progress struct {
	ID          uint64
	Start, End  int
	Target      bool   // this group is the move's target
	ExportClock int64  // source: the freeze's time; target: the last chunk's export clock
	LastKey     string // target: the greatest key imported so far
	Done        bool   // target: committed; source: released
	Keys        int    // target: records imported; source: records dropped
}

// Table is a data group's slot-move state: the state of every slot a
// move touched, and every move's progress. Its owner serialises access
// (the state machine's lock).
type Table struct {
	state map[int]slotEntry
	moves map[uint64]*Progress
}

// NewTable returns a table no move has touched.
func NewTable() Table {
	return Table{state: map[int]slotEntry{}, moves: map[uint64]*Progress{}}
}

// Empty reports whether no move touched the group.
func (t *Table) Empty() bool { return len(t.state) == 0 && len(t.moves) == 0 }

// Moving reports whether any slot has a state (the group may refuse
// requests).
func (t *Table) Moving() bool { return len(t.state) > 0 }

// State returns slot's state, and whether it has one.
func (t *Table) State(slot int) (SlotState, bool) {
	e, ok := t.state[slot]
	return e.state, ok
}

// Set puts slot in state st for move id.
func (t *Table) Set(slot int, st SlotState, id uint64) {
	t.state[slot] = slotEntry{state: st, move: id}
}

// Move returns move id's progress (nil: none); the caller may change it.
func (t *Table) Move(id uint64) *Progress { return t.moves[id] }

// AddMove records a move's progress.
func (t *Table) AddMove(p *Progress) { t.moves[p.ID] = p }

// MovedIn is the set of slots a group took in a move and owns (state
// Owned), one bit per slot, for readers that do not hold the table's
// lock.
type MovedIn [slots.Count / 64]uint64

// Has reports whether slot is in the set.
func (m *MovedIn) Has(slot int) bool {
	return m != nil && slot >= 0 && slot < slots.Count && m[slot/64]&(1<<(slot%64)) != 0
}

// MovedIn returns the slots of the table in state Owned.
func (t *Table) MovedIn() *MovedIn {
	var m MovedIn
	for s, e := range t.state {
		if e.state == Owned {
			m[s/64] |= 1 << (s % 64)
		}
	}
	return &m
}

// refused reports whether a request on key must be refused.
func (t *Table) refused(key []byte) bool {
	e, ok := t.state[slots.Of(key)]
	return ok && e.state != Owned
}

// FilterOwned splits a batch: the requests this group may apply (with
// their names when names is not nil) and, in idx, their positions; the
// others get ErrNotOwned in res. A tier group is refused whole when any
// of its keys is. With no slot state (the usual case) it returns ok false
// and the batch is applied as it is.
func (t *Table) FilterOwned(reqs []engine.Request, names [][]byte, res []engine.Result) (keep []engine.Request, keepNames [][]byte, idx []int, ok bool) {
	if len(t.state) == 0 {
		return nil, nil, nil, false
	}
	refuse := make([]bool, len(reqs))
	any := false
	for i := 0; i < len(reqs); {
		n := max(int(reqs[i].Tiers), 1)
		bad := false
		for k := i; k < i+n && k < len(reqs); k++ {
			bad = bad || t.refused(reqs[k].Key)
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

// AppendTable encodes the slot-move state for snapshots and digests:
// uvarint count of slot entries, then slot, state, move each (by slot);
// uvarint count of moves, then each move by id.
func AppendTable(dst []byte, t *Table) []byte {
	ss := make([]int, 0, len(t.state))
	for s := range t.state {
		ss = append(ss, s)
	}
	slices.Sort(ss)
	dst = binary.AppendUvarint(dst, uint64(len(ss)))
	for _, s := range ss {
		e := t.state[s]
		dst = binary.AppendUvarint(dst, uint64(s))
		dst = append(dst, byte(e.state))
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
		dst = codec.AppendString(dst, m.LastKey)
		dst = binary.AppendUvarint(dst, uint64(m.Keys))
	}
	return dst
}

// DecodeTable decodes AppendTable's encoding (ErrBadSnapshot when it does
// not decode).
func DecodeTable(b []byte) (Table, error) {
	t := NewTable()
	d := codec.Reader{B: b}
	n := d.Uvarint()
	if d.Err != nil || n > slots.Count {
		return t, ErrBadSnapshot
	}
	for range n {
		s := int(d.Uvarint())
		e := slotEntry{state: SlotState(d.Byte()), move: d.Uvarint()}
		if d.Err != nil || s >= slots.Count {
			return t, ErrBadSnapshot
		}
		t.state[s] = e
	}
	nm := d.Uvarint()
	if d.Err != nil || nm > 1<<20 {
		return t, ErrBadSnapshot
	}
	for range nm {
		m := &Progress{ID: d.Uvarint(), Start: int(d.Uvarint()), End: int(d.Uvarint())}
		flags := d.Byte()
		m.Target, m.Done = flags&1 != 0, flags&2 != 0
		m.ExportClock = d.Varint()
		m.LastKey = string(d.Bytes())
		m.Keys = int(d.Uvarint())
		if d.Err != nil {
			return t, ErrBadSnapshot
		}
		t.moves[m.ID] = m
	}
	if len(d.B) != 0 {
		return t, ErrBadSnapshot
	}
	return t, nil
}
