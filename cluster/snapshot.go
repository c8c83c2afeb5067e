package cluster

import (
	"bufio"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/engine"
)

// Raft snapshots hold the FSM's clock, its applied index and every live
// record, sorted by key, so that two replicas at the same index write the
// same bytes whatever their shard counts.

// capture exports the state between two entries. The caller holds f.mu.
func (f *fsm) capture(ctx context.Context) (clock int64, applied uint64, recs []engine.Record, err error) {
	clock, applied = f.now.Load(), f.applied.Load()
	// Export at the FSM's clock: every shard is at or behind it, so this
	// moves no shard past a time the log has not reached.
	_, err = f.eng.Export(ctx, clock, func(r engine.Record) error {
		recs = append(recs, r)
		return nil
	})
	slices.SortFunc(recs, func(a, b engine.Record) int { return cmp.Compare(a.Key, b.Key) })
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
	return &fsmSnapshot{clock: clock, applied: applied, recs: recs}, nil
}

// Restore replaces the state with a snapshot's (a follower catching up, a
// node joining, or a restart).
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	clock, applied, recs, err := readSnapshot(bufio.NewReaderSize(rc, 256<<10))
	if err != nil {
		return fmt.Errorf("cluster: restore: %w", err)
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
	f.now.Store(clock)
	f.applied.Store(applied)
	return nil
}

type fsmSnapshot struct {
	clock   int64
	applied uint64
	recs    []engine.Record
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	w := bufio.NewWriterSize(sink, 256<<10)
	err := writeSnapshot(w, s.clock, s.applied, s.recs)
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
	f.mu.Unlock()
	if err != nil {
		return 0, "", err
	}
	h := sha256.New()
	var buf []byte
	buf = binary.AppendVarint(buf, clock)
	buf = binary.AppendUvarint(buf, applied)
	for i := range recs {
		buf = appendRecord(buf, &recs[i])
		if len(buf) > 32<<10 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return applied, hex.EncodeToString(h.Sum(nil)), nil
}

// Snapshot stream: "RLRS" magic, version byte, varint clock, uvarint
// applied, uvarint count, records (uvarint key length, key, kind byte,
// uvarint field count, varint fields), then a CRC-32C of everything before
// it, big-endian.
//
// TODO(persist): switch to the persist package's format once it lands.
var snapMagic = [4]byte{'R', 'L', 'R', 'S'}

const snapVersion = 1

var errBadSnapshot = errors.New("bad snapshot")

func appendRecord(dst []byte, r *engine.Record) []byte {
	dst = appendString(dst, r.Key)
	dst = append(dst, byte(r.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(r.Fields)))
	for _, v := range r.Fields {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func writeSnapshot(w io.Writer, clock int64, applied uint64, recs []engine.Record) error {
	crc := crc32.New(castagnoli)
	mw := io.MultiWriter(w, crc)
	buf := append([]byte(nil), snapMagic[:]...)
	buf = append(buf, snapVersion)
	buf = binary.AppendVarint(buf, clock)
	buf = binary.AppendUvarint(buf, applied)
	buf = binary.AppendUvarint(buf, uint64(len(recs)))
	for i := range recs {
		buf = appendRecord(buf, &recs[i])
		if len(buf) > 64<<10 {
			if _, err := mw.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	if _, err := mw.Write(buf); err != nil {
		return err
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, crc.Sum32()))
	return err
}

// crcReader feeds what it reads into a checksum.
type crcReader struct {
	r   *bufio.Reader
	crc hashWriter
}

type hashWriter interface {
	io.Writer
	Sum32() uint32
}

func (c *crcReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.crc.Write([]byte{b})
	}
	return b, err
}

func (c *crcReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.crc.Write(p[:n])
	return n, err
}

func readSnapshot(r *bufio.Reader) (clock int64, applied uint64, recs []engine.Record, err error) {
	cr := &crcReader{r: r, crc: crc32.New(castagnoli)}
	var hdr [5]byte
	if _, err = io.ReadFull(cr, hdr[:]); err != nil {
		return 0, 0, nil, fmt.Errorf("%w: %v", errBadSnapshot, err)
	}
	if [4]byte(hdr[:4]) != snapMagic || hdr[4] != snapVersion {
		return 0, 0, nil, fmt.Errorf("%w: unknown magic or version", errBadSnapshot)
	}
	bad := func(e error) (int64, uint64, []engine.Record, error) {
		return 0, 0, nil, fmt.Errorf("%w: %v", errBadSnapshot, e)
	}
	if clock, err = binary.ReadVarint(cr); err != nil {
		return bad(err)
	}
	if applied, err = binary.ReadUvarint(cr); err != nil {
		return bad(err)
	}
	count, err := binary.ReadUvarint(cr)
	if err != nil {
		return bad(err)
	}
	recs = make([]engine.Record, 0, min(count, 1<<20))
	for range count {
		var rec engine.Record
		kl, err := binary.ReadUvarint(cr)
		if err != nil || kl > 1<<20 {
			return bad(errors.New("key length"))
		}
		key := make([]byte, kl)
		if _, err := io.ReadFull(cr, key); err != nil {
			return bad(err)
		}
		rec.Key = string(key)
		kind, err := cr.ReadByte()
		if err != nil {
			return bad(err)
		}
		rec.Kind = engine.Kind(kind)
		nf, err := binary.ReadUvarint(cr)
		if err != nil || nf > 1<<20 {
			return bad(errors.New("field count"))
		}
		rec.Fields = make([]int64, nf)
		for i := range rec.Fields {
			if rec.Fields[i], err = binary.ReadVarint(cr); err != nil {
				return bad(err)
			}
		}
		recs = append(recs, rec)
	}
	sum := cr.crc.Sum32()
	var tail [4]byte
	if _, err := io.ReadFull(r, tail[:]); err != nil {
		return bad(err)
	}
	if binary.BigEndian.Uint32(tail[:]) != sum {
		return bad(errors.New("checksum mismatch"))
	}
	return clock, applied, recs, nil
}
