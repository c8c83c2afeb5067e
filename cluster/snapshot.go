package cluster

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/persist"
	"github.com/rlserver/rlserver/policy"
)

// Raft snapshots hold the FSM's clock, its applied index and every live
// record, sorted by key, in the persist format: two replicas at the same
// index write the same bytes whatever their shard counts.

// capture exports the state between two entries. The caller holds f.mu.
func (f *fsm) capture(ctx context.Context) (clock int64, applied uint64, recs []engine.Record, err error) {
	clock, applied = f.now.Load(), f.applied.Load()
	// Export at the FSM's clock: every shard is at or behind it, so this
	// moves no shard past a time the log has not reached.
	_, err = f.eng.Export(ctx, clock, func(r engine.Record) error {
		recs = append(recs, r)
		return nil
	})
	persist.SortRecords(recs)
	return clock, applied, recs, err
}

// Snapshot captures the state for Raft. Raft calls it between Apply calls;
// Persist then writes it out without blocking Apply.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clock, applied, recs, err := f.capture(context.Background())
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshot: %w", err)
	}
	return &fsmSnapshot{clock: clock, applied: applied, recs: recs, policies: f.policies.Defs(),
		dir: encodedDirectory(f.dir.Load()), slots: encodedSlotTable(&f.slots)}, nil
}

// Restore replaces the state with a snapshot's (a follower catching up, a
// node joining, or a restart).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	clock, applied, recs, defs, dirBytes, slotBytes, err := readSnapshot(rc)
	if err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	ps, err := policy.ParseDefs(defs)
	if err != nil {
		return fmt.Errorf("cluster: restore: policies: %w", err)
	}
	dir := ownership.EmptyDirectory()
	if len(dirBytes) > 0 {
		if dir, err = ownership.DecodeDirectory(dirBytes); err != nil {
			return fmt.Errorf("cluster: restore: slot directory: %w", err)
		}
	}
	table := ownership.NewTable()
	if len(slotBytes) > 0 {
		if table, err = ownership.DecodeTable(slotBytes); err != nil {
			return fmt.Errorf("cluster: restore: slot moves: %w", err)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	ctx := context.Background()
	if err := f.eng.Flush(ctx); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	if err := f.eng.Import(ctx, clock, recs); err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	if err := f.policies.Replace(ps); err != nil {
		return fmt.Errorf("cluster: restore: policies: %w", err)
	}
	f.now.Store(clock)
	f.applied.Store(applied)
	f.setDirectory(dir)
	f.slots = table
	f.publishMovedIn()
	return nil
}

// encodedSlotTable is t for a snapshot, or nil when no move touched the
// group.
func encodedSlotTable(t *ownership.Table) []byte {
	if t.Empty() {
		return nil
	}
	return ownership.AppendTable(nil, t)
}

// encodedDirectory is d for a snapshot, or nil while it is not
// initialised (a data group's, or an unsharded cluster's).
func encodedDirectory(d *ownership.Directory) []byte {
	if d.Epoch == 0 {
		return nil
	}
	return ownership.AppendDirectory(nil, d)
}

type fsmSnapshot struct {
	clock    int64
	applied  uint64
	recs     []engine.Record
	policies [][]string // definitions, sorted by name
	dir      []byte     // the slot directory (ownership.AppendDirectory), nil when not initialised
	slots    []byte     // the slot-move state (ownership.AppendTable), nil when empty
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 256<<10)
	err := writeSnapshot(w, s.clock, s.applied, s.policies, s.recs, s.dir, s.slots)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}

// Digest hashes the state at the last applied entry: the clock, the applied
// index and the sorted live records. Replicas that applied the same log
// report the same digest.
func (f *fsm) Digest(ctx context.Context) (applied uint64, digest string, err error) {
	f.mu.Lock()
	clock, applied, recs, err := f.capture(ctx)
	defs := f.policies.Defs()
	dir := encodedDirectory(f.dir.Load())
	table := encodedSlotTable(&f.slots)
	f.mu.Unlock()
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	var buf []byte
	buf = binary.AppendVarint(buf, clock)
	buf = binary.AppendUvarint(buf, applied)
	for i := range recs {
		buf = codec.AppendRecord(buf, &recs[i])
		if len(buf) > 32<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	// The policies, when there are any (so a state without any hashes as
	// it did before policies existed).
	for _, d := range defs {
		buf = entry.AppendWords(buf, d)
	}
	// The slot directory, when initialised (the meta group's), and the
	// slot-move state, when a move touched the group.
	buf = append(buf, dir...)
	buf = append(buf, table...)
	h.Write(buf)
	return applied, hex.EncodeToString(h.Sum(nil)), nil
}

// The snapshot stream is the persist package's format (the one standalone
// saves use): the header's clock is the FSM's clock, and its opaque meta
// holds this package's fields: a meta version byte, then the applied index
// as a uvarint; version 2 adds the slot directory
// (ownership.AppendDirectory, after its length as a uvarint) and the
// slot-move state (ownership.AppendTable, to the end), either of which may be empty. Version 1 has neither.
const (
	metaVersion      = 1
	metaVersionSlots = 2
)

var errBadSnapshot = errors.New("bad snapshot")

func writeSnapshot(w io.Writer, clock int64, applied uint64, policies [][]string, recs []engine.Record, dir, slots []byte) error {
	meta := binary.AppendUvarint([]byte{metaVersion}, applied)
	if dir != nil || slots != nil {
		meta = binary.AppendUvarint([]byte{metaVersionSlots}, applied)
		meta = binary.AppendUvarint(meta, uint64(len(dir)))
		meta = append(append(meta, dir...), slots...)
	}
	return persist.Encode(w, persist.Header{ClockNanos: clock, Meta: meta, Policies: policies}, recs)
}

func readSnapshot(r io.Reader) (clock int64, applied uint64, recs []engine.Record, policies [][]string, dir, slots []byte, err error) {
	h, recs, err := persist.Decode(r)
	if err != nil {
		return 0, 0, nil, nil, nil, nil, err
	}
	bad := func() error { return fmt.Errorf("%w: bad meta %x", errBadSnapshot, h.Meta) }
	if len(h.Meta) < 2 || (h.Meta[0] != metaVersion && h.Meta[0] != metaVersionSlots) {
		return 0, 0, nil, nil, nil, nil, fmt.Errorf("%w: not a Raft snapshot of this version (meta %x)", errBadSnapshot, h.Meta)
	}
	d := codec.Reader{B: h.Meta[1:]}
	applied = d.Uvarint()
	if h.Meta[0] == metaVersionSlots {
		dir = d.Bytes()
		slots = d.B
		d.B = nil
	}
	if d.Err != nil || len(d.B) != 0 {
		return 0, 0, nil, nil, nil, nil, bad()
	}
	return h.ClockNanos, applied, recs, h.Policies, dir, slots, nil
}
