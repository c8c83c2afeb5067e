package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// A slot move on two FSMs (the source's and the target's logs), applied
// entry by entry.

func slotsEntry(now int64, op []byte) []byte {
	return append(entry.AppendHeader(nil, entry.Slots, now), op...)
}

func chunkOp(id uint64, clock int64, recs []engine.Record) []byte {
	op := binary.AppendVarint(binary.AppendUvarint([]byte{ownership.StepChunk}, id), clock)
	op = binary.AppendUvarint(op, uint64(len(recs)))
	for i := range recs {
		op = codec.AppendRecord(op, &recs[i])
	}
	return op
}

// moveKeys returns n keys in slots [start, end] and n outside.
func moveKeys(n, start, end int) (in, out []string) {
	for i := 0; len(in) < n || len(out) < n; i++ {
		k := fmt.Sprintf("key%d", i)
		if s := slots.OfString(k); s >= start && s <= end {
			if len(in) < n {
				in = append(in, k)
			}
		} else if len(out) < n {
			out = append(out, k)
		}
	}
	return in, out
}

type fsmLog struct {
	t   *testing.T
	f   *fsm
	idx uint64
}

func newFSMLog(t *testing.T) *fsmLog {
	eng := engine.New(3)
	t.Cleanup(eng.Close)
	return &fsmLog{t: t, f: newFSM(eng)}
}

// apply appends data at the next index; twice applies it again at the
// same index (a replayed entry).
func (l *fsmLog) apply(data []byte, twice bool) any {
	l.idx++
	r := l.f.Apply(&raft.Log{Index: l.idx, Term: 1, Type: raft.LogCommand, Data: data})
	if twice {
		r2 := l.f.Apply(&raft.Log{Index: l.idx, Term: 1, Type: raft.LogCommand, Data: data})
		if fmt.Sprint(r2) != fmt.Sprint(r) && !isSlotsResult(r) {
			l.t.Fatalf("entry %d applied twice answered %v then %v", l.idx, r, r2)
		}
	}
	return r
}

func isSlotsResult(r any) bool { _, ok := r.(*stateResult); return ok }

func (l *fsmLog) digest() string {
	l.t.Helper()
	_, d, err := l.f.Digest(context.Background())
	if err != nil {
		l.t.Fatal(err)
	}
	return d
}

func allowAll(t *testing.T, keys []string, cost int64) []engine.Request {
	var reqs []engine.Request
	for _, k := range keys {
		reqs = append(reqs, allow(t, k, 10, 0.001, cost))
	}
	return reqs
}

// runMove plays a whole move of [0, 4000] from src to dst, each step
// applied once or, with twice, twice; it returns the digests of both after
// every step.
func runMove(t *testing.T, twice bool) (src, dst *fsmLog, digests []string) {
	src, dst = newFSMLog(t), newFSMLog(t)
	in, out := moveKeys(50, 0, 4000)
	src.apply(batchEntry(t0, allowAll(t, append(in, out...), 3)...), false)
	dst.apply(batchEntry(t0+1e9, allowAll(t, []string{"other"}, 1)...), false)
	record := func() { digests = append(digests, src.digest()+dst.digest()) }

	dst.apply(slotsEntry(t0+2e9, ownership.ImportStep(7, 0, 4000)), twice)
	record()
	fr := src.apply(slotsEntry(t0+5e9, ownership.FreezeStep(7, 0, 4000)), twice).(*stateResult)
	if fr.err != nil || fr.v != t0+5e9 {
		t.Fatalf("freeze: %+v", fr)
	}
	record()
	// The frozen range is refused at the source, the rest applied.
	br := src.apply(batchEntry(t0+6e9, allowAll(t, []string{in[0], out[0]}, 1)...), false).(*batchResult)
	if !errors.Is(br.res[0].Err, ownership.ErrNotOwned) || br.res[1].Err != nil || br.res[1].Remaining != 6 {
		t.Fatalf("batch on a frozen and a free key: %+v", br.res)
	}
	// The target refuses the range until it commits.
	br = dst.apply(batchEntry(t0+6e9, allowAll(t, []string{in[0]}, 1)...), false).(*batchResult)
	if !errors.Is(br.res[0].Err, ownership.ErrNotOwned) {
		t.Fatalf("target before commit: %+v", br.res)
	}
	record()
	recs, clock, err := (&Node{fsm: src.f}).ExportSlots(context.Background(), 0, 4000, "")
	if clock != t0+6e9 {
		t.Fatalf("export clock %d, want the source's clock %d", clock, t0+6e9)
	}
	if err != nil || len(recs) != len(in) {
		t.Fatalf("export: %d records, %v; want %d", len(recs), err, len(in))
	}
	half := len(recs) / 2
	dst.apply(slotsEntry(t0+3e9, chunkOp(7, t0+5e9, recs[:half])), twice)
	record()
	// A chunk sent again from the start (a new driver after a crash)
	// changes nothing already imported.
	dst.apply(slotsEntry(t0+3e9, chunkOp(7, t0+5e9, recs)), twice)
	record()
	cr := dst.apply(slotsEntry(t0+3e9, binary.AppendVarint(binary.AppendUvarint([]byte{ownership.StepCommit}, 7), t0+5e9)), twice).(*stateResult)
	if cr.err != nil {
		t.Fatalf("commit: %v", cr.err)
	}
	record()
	rr := src.apply(slotsEntry(t0+7e9, binary.AppendUvarint([]byte{ownership.StepRelease}, 7)), twice).(*stateResult)
	if rr.err != nil || rr.v != int64(len(in)) {
		t.Fatalf("release: %+v, want %d keys dropped", rr, len(in))
	}
	record()
	// The target serves the range with the source's counts (7 left after
	// 3) and a clock at least the source's (the stamp behind it is
	// clamped).
	br = dst.apply(batchEntry(t0+4e9, allowAll(t, in, 1)...), false).(*batchResult)
	for i, r := range br.res {
		if r.Err != nil || !r.Allowed || r.Remaining != 6 {
			t.Fatalf("target after commit, key %s: %+v", in[i], r)
		}
	}
	if now := dst.f.now.Load(); now < t0+5e9 {
		t.Fatalf("target clock %d behind the source's export clock %d", now, t0+5e9)
	}
	br = src.apply(batchEntry(t0+8e9, allowAll(t, in[:1], 1)...), false).(*batchResult)
	if !errors.Is(br.res[0].Err, ownership.ErrNotOwned) {
		t.Fatalf("source after release: %+v", br.res)
	}
	record()
	return src, dst, digests
}

// TestSlotMoveStepsIdempotent: every step applied twice leaves both groups
// exactly as applying it once does.
func TestSlotMoveStepsIdempotent(t *testing.T) {
	_, _, once := runMove(t, false)
	_, _, twice := runMove(t, true)
	if len(once) != len(twice) {
		t.Fatalf("%d digests vs %d", len(once), len(twice))
	}
	for i := range once {
		if once[i] != twice[i] {
			t.Fatalf("after step %d the state differs when each step is applied twice", i+1)
		}
	}
}

// TestSlotMoveSnapshotMidMove: a snapshot of each group taken in the
// middle of a move restores to the same state, and the restored replicas
// finish the move as the others do.
func TestSlotMoveSnapshotMidMove(t *testing.T) {
	src, dst := newFSMLog(t), newFSMLog(t)
	in, _ := moveKeys(20, 100, 9000)
	src.apply(batchEntry(t0, allowAll(t, in, 2)...), false)
	dst.apply(slotsEntry(t0, ownership.ImportStep(3, 100, 9000)), false)
	src.apply(slotsEntry(t0+1e9, ownership.FreezeStep(3, 100, 9000)), false)
	recs, _, err := (&Node{fsm: src.f}).ExportSlots(context.Background(), 100, 9000, "")
	if err != nil {
		t.Fatal(err)
	}
	dst.apply(slotsEntry(t0+1e9, chunkOp(3, t0+1e9, recs[:5])), false)

	restore := func(l *fsmLog) *fsmLog {
		snap, err := l.f.Snapshot()
		if err != nil {
			t.Fatal(err)
		}
		var sink bufSink
		if err := snap.Persist(&sink); err != nil {
			t.Fatal(err)
		}
		c := newFSMLog(t)
		if err := c.f.Restore(readCloser{bytes.NewReader(sink.Bytes())}); err != nil {
			t.Fatal(err)
		}
		c.idx = l.idx
		if c.digest() != l.digest() {
			t.Fatal("the restored replica's digest differs")
		}
		return c
	}
	src2, dst2 := restore(src), restore(dst)
	// movedIn: the slots a group took in a committed move, no others.
	movedIn := func(l *fsmLog, want bool) {
		t.Helper()
		n := &Node{fsm: l.f}
		if n.OwnsMovedSlot(100) != want || n.OwnsMovedSlot(9000) != want || n.OwnsMovedSlot(99) || n.OwnsMovedSlot(9001) {
			t.Fatalf("slots 99, 100, 9000, 9001 moved in: %v %v %v %v; want false %v %v false",
				n.OwnsMovedSlot(99), n.OwnsMovedSlot(100), n.OwnsMovedSlot(9000), n.OwnsMovedSlot(9001), want, want)
		}
	}
	movedIn(dst2, false)
	for _, pair := range [][2]*fsmLog{{dst, dst2}} {
		for _, l := range pair {
			l.apply(slotsEntry(t0+2e9, chunkOp(3, t0+1e9, recs[5:])), false)
			movedIn(l, false)
			l.apply(slotsEntry(t0+2e9, binary.AppendVarint(binary.AppendUvarint([]byte{ownership.StepCommit}, 3), t0+1e9)), false)
			movedIn(l, true)
		}
	}
	movedIn(restore(dst), true) // a snapshot after the commit keeps it
	for _, l := range []*fsmLog{src, src2} {
		l.apply(slotsEntry(t0+3e9, binary.AppendUvarint([]byte{ownership.StepRelease}, 3)), false)
		movedIn(l, false)
	}
	if src.digest() != src2.digest() || dst.digest() != dst2.digest() {
		t.Fatal("replicas restored mid-move ended in another state")
	}
	p, ok := (&Node{fsm: dst2.f}).Move(3)
	if !ok || !p.Done || p.Keys != len(in) {
		t.Fatalf("restored target's move: %+v", p)
	}
	// Moving the range on again: the freeze takes it out of movedIn.
	dst.apply(slotsEntry(t0+4e9, ownership.FreezeStep(4, 100, 9000)), false)
	movedIn(dst, false)
}

// TestSlotMoveRefusals: steps that do not fit the group's state are
// refused, not applied.
func TestSlotMoveRefusals(t *testing.T) {
	g := newFSMLog(t)
	g.apply(slotsEntry(t0, ownership.FreezeStep(1, 0, 10)), false)
	for name, op := range map[string][]byte{
		"freeze of frozen slots by another move":       ownership.FreezeStep(2, 5, 20),
		"import of frozen slots":                       ownership.ImportStep(3, 0, 3),
		"commit of a move this group is the source of": binary.AppendVarint(binary.AppendUvarint([]byte{ownership.StepCommit}, 1), t0),
		"chunk for an unknown move":                    chunkOp(9, t0, nil),
		"release of an unknown move":                   binary.AppendUvarint([]byte{ownership.StepRelease}, 9),
	} {
		before := ownership.AppendTable(nil, &g.f.slots)
		r := g.apply(slotsEntry(t0, op), false).(*stateResult)
		if !errors.Is(r.err, ownership.ErrMoveRefused) || !bytes.Equal(ownership.AppendTable(nil, &g.f.slots), before) {
			t.Errorf("%s: %+v", name, r)
		}
	}
	for name, op := range map[string][]byte{
		"empty":          nil,
		"unknown op":     {99, 1},
		"reversed range": ownership.FreezeStep(1, 10, 5),
		"slot too big":   ownership.ImportStep(1, 0, slots.Count),
		"trailing bytes": append(binary.AppendUvarint([]byte{ownership.StepRelease}, 1), 0),
	} {
		if ownership.ValidStep(op) {
			t.Errorf("%s: accepted", name)
		}
	}
}
