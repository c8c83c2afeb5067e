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
// record, in the persist format, unordered (persist.Header.Unordered).
//
// Taking one stops the group from applying entries only for the engine's
// mark (engine.Mark: one job per shard): Snapshot marks the state under
// f.mu, between two entries, and Persist then walks it, point in time
// (copy on write in the engine), while entries are applied, writing the
// records to Raft's sink as each step returns them. Memory is bounded by a
// step's records, the encoder's block, and the records that writes save
// for the walk, not by the state. The records come in the engine's walk
// order, which differs between replicas (their tables have different
// histories): sorting them would need the whole state in memory, so two
// replicas at one index write the same records in different orders, and
// the digest (Digest, RL.CLUSTER DIGEST), which sorts, is what compares
// replicas.
//
// Restore streams too: Raft's file snapshot store hands it the snapshot
// file (after checking its CRC64; a snapshot a leader sends is streamed
// from its file over the transport into a file first, see
// docs/cluster-mode.md), and Restore decodes it block by block and imports
// restoreChunk records at a time, so the receiver never holds more than a
// chunk of records beside the state itself.

// restoreChunk is how many records Restore decodes before it imports them.
const restoreChunk = 16 << 10

// Snapshot marks the state for Raft. Raft calls it between Apply calls;
// Persist then writes it out while Apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	clock, applied := f.now.Load(), f.applied.Load()
	// Mark at the FSM's clock: every shard is at or behind it, so this
	// moves no shard past a time the log has not reached.
	snap, err := f.eng.Mark(context.Background(), clock)
	if err != nil {
		return nil, fmt.Errorf("cluster: snapshot: %w", err)
	}
	return &fsmSnapshot{clock: clock, applied: applied, snap: snap, policies: f.policies.Defs(),
		dir: encodedDirectory(f.dir.Load()), slots: encodedSlotTable(&f.slots)}, nil
}

// Restore replaces the state with a snapshot's (a follower catching up, a
// node joining, or a restart). The header (applied index, directory,
// slot moves, policies) is checked before the state is touched; the
// records are then imported as they are decoded. A snapshot that turns
// out damaged part-way leaves the engine flushed and the error returned:
// Raft then keeps its log and applied index, and retries an install or
// fails the start, so a half-restored state is never served.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	d, err := persist.NewDecoder(rc)
	if err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	h := d.Header()
	applied, keys, dirBytes, slotBytes, err := readMeta(h.Meta)
	if err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
	}
	ps, err := policy.ParseDefs(h.Policies)
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
	err = f.eng.Reserve(ctx, keys)
	if err == nil {
		err = importRecords(ctx, f.eng, h.ClockNanos, d)
	}
	f.eng.Reserve(ctx, 0) // lift the floor; the sweep shrinks what was too much
	if err != nil {
		f.eng.Flush(ctx) // no half state; Raft retries or fails the start
		return fmt.Errorf("cluster: restore: %w", err)
	}
	if err := f.policies.Replace(ps); err != nil {
		return fmt.Errorf("cluster: restore: policies: %w", err)
	}
	f.now.Store(h.ClockNanos)
	f.applied.Store(applied)
	f.setDirectory(dir)
	f.slots = table
	f.publishMovedIn()
	return nil
}

// importRecords imports d's records into eng at clock, restoreChunk at a
// time, up to the end of the snapshot (whose trailer d checks).
func importRecords(ctx context.Context, eng *engine.Engine, clock int64, d *persist.Decoder) error {
	chunk := make([]engine.Record, 0, restoreChunk)
	for {
		rec, err := d.Next()
		if err != nil && err != io.EOF {
			return err
		}
		if err == nil {
			chunk = append(chunk, rec)
		}
		if len(chunk) == restoreChunk || (err == io.EOF && len(chunk) > 0) {
			if err := eng.Import(ctx, clock, chunk); err != nil {
				return err
			}
			clear(chunk) // the decoder's blocks can go
			chunk = chunk[:0]
		}
		if err == io.EOF {
			return nil
		}
	}
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
	snap     *engine.Snapshot // the records, point in time (engine.Mark)
	policies [][]string       // definitions, sorted by name
	dir      []byte           // the slot directory (ownership.AppendDirectory), nil when not initialised
	slots    []byte           // the slot-move state (ownership.AppendTable), nil when empty
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	defer s.snap.Close()
	w := bufio.NewWriterSize(sink, 256<<10)
	ctx := context.Background()
	err := writeSnapshot(w, s.clock, s.applied, s.snap.Keys(), s.policies, func() ([]engine.Record, error) { return s.snap.Next(ctx) }, s.dir, s.slots)
	if err == nil {
		err = w.Flush()
	}
	if err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

// Release ends the walk if Persist did not (Raft releases a snapshot
// whose store failed without persisting it).
func (s *fsmSnapshot) Release() { s.snap.Close() }

// Digest hashes the state at the last applied entry: the clock, the applied
// index and the live records, sorted by key. Replicas that applied the
// same log report the same digest. Like a snapshot, it marks the state
// under f.mu and reads it while entries are applied; unlike one, it holds
// every record in memory, to sort them.
func (f *fsm) Digest(ctx context.Context) (applied uint64, digest string, err error) {
	f.mu.Lock()
	clock, applied := f.now.Load(), f.applied.Load()
	snap, err := f.eng.Mark(ctx, clock)
	defs := f.policies.Defs()
	dir := encodedDirectory(f.dir.Load())
	table := encodedSlotTable(&f.slots)
	f.mu.Unlock()
	if err != nil {
		return 0, "", err
	}
	defer snap.Close()
	var recs []engine.Record
	for {
		r, err := snap.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			return 0, "", err
		}
		recs = append(recs, r...)
	}
	persist.SortRecords(recs)
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
// Version 3 (streamed snapshots) is version 2 with, after the applied
// index, the number of keys at the mark (a uvarint, at least the records
// that follow), so Restore sizes the tables before the records arrive
// (engine.Reserve says why).
const (
	metaVersion      = 1
	metaVersionSlots = 2
	metaVersionKeys  = 3
)

var errBadSnapshot = errors.New("bad snapshot")

// writeSnapshot writes a snapshot whose records next returns, a slice at
// a time, until io.EOF.
func writeSnapshot(w io.Writer, clock int64, applied uint64, keys int, policies [][]string, next func() ([]engine.Record, error), dir, slots []byte) error {
	meta := binary.AppendUvarint([]byte{metaVersionKeys}, applied)
	meta = binary.AppendUvarint(meta, uint64(keys))
	meta = binary.AppendUvarint(meta, uint64(len(dir)))
	meta = append(append(meta, dir...), slots...)
	enc, err := persist.NewEncoder(w, persist.Header{ClockNanos: clock, Meta: meta, Policies: policies, Unordered: true})
	if err != nil {
		return err
	}
	for {
		recs, err := next()
		if err == io.EOF {
			return enc.Close()
		}
		if err != nil {
			return err
		}
		for i := range recs {
			if err := enc.Write(recs[i]); err != nil {
				return err
			}
		}
	}
}

// records is a next function for writeSnapshot that returns recs once.
func records(recs []engine.Record) func() ([]engine.Record, error) {
	return func() ([]engine.Record, error) {
		if recs == nil {
			return nil, io.EOF
		}
		r := recs
		recs = nil
		return r, nil
	}
}

// readMeta parses the header's meta: the applied index, the keys at the
// mark (0: not known), the directory and the slot-move state.
func readMeta(meta []byte) (applied uint64, keys int, dir, slots []byte, err error) {
	if len(meta) < 2 || meta[0] < metaVersion || meta[0] > metaVersionKeys {
		return 0, 0, nil, nil, fmt.Errorf("%w: not a Raft snapshot of this version (meta %x)", errBadSnapshot, meta)
	}
	d := codec.Reader{B: meta[1:]}
	applied = d.Uvarint()
	if meta[0] == metaVersionKeys {
		keys = int(min(d.Uvarint(), 1<<40))
	}
	if meta[0] >= metaVersionSlots {
		dir = d.Bytes()
		slots = d.B
		d.B = nil
	}
	if d.Err != nil || len(d.B) != 0 {
		return 0, 0, nil, nil, fmt.Errorf("%w: bad meta %x", errBadSnapshot, meta)
	}
	return applied, keys, dir, slots, nil
}
