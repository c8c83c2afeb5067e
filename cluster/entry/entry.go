package entry

import (
	"fmt"

	"encoding/binary"

	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
)

// Entry types: the first byte of every log entry. Append-only: never
// renumber or reuse a value, old logs and snapshots on disk hold them. A
// change to the encoding of an existing type (a new engine.Request field,
// for example) needs a new type here.
const (
	// batchV1 is a batch in the first request encoding (requestV1):
	// varint nowNanos, uvarint count, then count requests. Nothing writes
	// it any more; it is read from old logs, and decodes as a Batch.
	batchV1 byte = 1
	// Flush removes every key (FLUSHALL): varint nowNanos.
	Flush byte = 2
	// Len counts live keys at the stamped time (DBSIZE): varint nowNanos.
	Len byte = 3
	// Batch is a batch of engine requests: varint nowNanos, uvarint
	// count, then count requests (AppendRequest), which may name a policy
	// that the state machine resolves when it applies the entry. Leaders
	// write it for every batch.
	Batch byte = 4
	// PolicySet defines or redefines a policy: varint nowNanos, then its
	// words (AppendWords).
	PolicySet byte = 5
	// PolicyDel deletes a policy: varint nowNanos, its name.
	PolicyDel byte = 6
	// PolicyReplace replaces every policy (RL.POLICY LOAD, a policy
	// file): varint nowNanos, uvarint count, then count definitions.
	PolicyReplace byte = 7
	// Meta changes the slot directory (meta group only): varint
	// nowNanos, then a directory op (ownership.InitOp, ...).
	Meta byte = 8
	// Slots is a slot-move step (data groups): varint nowNanos, then a
	// step (ownership.ImportStep, ...).
	Slots byte = 9
	// NoCreate wraps a batch entry that the leader wrote while above
	// maxmemory with the noeviction policy: the byte, then the whole
	// inner entry. Replicas apply it with the engine's no-create mode on
	// and every other batch with it off, so the mode needs no state of
	// its own (a snapshot cannot lose it).
	NoCreate byte = 16
	// Evict is one eviction round (engine.EvictRange): varint nowNanos,
	// uvarint N, then From and To as 8 bytes each, big-endian, then a
	// byte 1 for allkeys-lru (absent for volatile-ttl).
	Evict byte = 17
)

// ErrCorrupt reports a log entry or a forwarded body that does not
// decode. In a log entry it is fatal (the state machine panics).
var ErrCorrupt = codec.ErrCorrupt

// Decoded is a decoded log entry.
type Decoded struct {
	Type     byte // Batch for a batch in either request encoding
	NowNanos int64
	V1       bool              // Batch: read from a batchV1 entry (an old log)
	Reqs     []engine.Request  // Batch
	Names    [][]byte          // Batch: the policy of each request, nil for plain ones (nil: none names one)
	Defs     [][]string        // PolicySet (one), PolicyDel (the name alone), PolicyReplace
	NoCreate bool              // the batch was wrapped in NoCreate
	Evict    engine.EvictRange // Evict
	Op       []byte            // Meta: the directory op; Slots: the move step
}

// AppendHeader starts a log entry of type typ stamped nowNanos.
func AppendHeader(dst []byte, typ byte, nowNanos int64) []byte {
	dst = append(dst, typ)
	return binary.AppendVarint(dst, nowNanos)
}

// Decode decodes a log entry. Keys, names and ops alias b.
func Decode(b []byte) (Decoded, error) { return DecodeInto(b, nil) }

// DecodeInto is Decode decoding a Batch entry's requests into buf's
// array when it is large enough (the state machine reuses one array for
// every entry it applies: the requests' keys point into b, and nothing
// keeps a request after the entry is applied).
func DecodeInto(b []byte, buf []engine.Request) (Decoded, error) {
	if len(b) > 0 && b[0] == NoCreate {
		return decodeNoCreate(b[1:], buf)
	}
	d := codec.Reader{B: b}
	e := Decoded{Type: d.Byte(), NowNanos: d.Varint()}
	if d.Err != nil {
		return e, ErrCorrupt
	}
	switch e.Type {
	case batchV1:
		count := d.Uvarint()
		if d.Err != nil {
			return e, ErrCorrupt
		}
		reqs, err := DecodeV1Requests(d.B, count)
		if err != nil {
			return e, err
		}
		e.Type, e.V1, e.Reqs = Batch, true, reqs
	case Flush, Len:
		if len(d.B) != 0 {
			return e, ErrCorrupt
		}
	case Evict:
		if err := decodeEvict(&e, d.B); err != nil {
			return e, err
		}
	case Batch:
		count := d.Uvarint()
		if d.Err != nil {
			return e, ErrCorrupt
		}
		reqs, names, err := DecodeRequests(d.B, count, buf[:0])
		if err != nil {
			return e, err
		}
		e.Reqs, e.Names = reqs, names
	case PolicySet, PolicyDel, PolicyReplace:
		defs, err := decodePolicy(e.Type, d.B)
		if err != nil {
			return e, err
		}
		e.Defs = defs
	case Meta:
		if !ownership.ValidOp(d.B) {
			return e, ErrCorrupt
		}
		e.Op = d.B
	case Slots:
		if !ownership.ValidStep(d.B) {
			return e, ErrCorrupt
		}
		e.Op = d.B
	default:
		return e, fmt.Errorf("%w: unknown entry type %d", ErrCorrupt, e.Type)
	}
	return e, nil
}

// decodeNoCreate decodes the entry a NoCreate byte wraps: a batch.
func decodeNoCreate(b []byte, buf []engine.Request) (Decoded, error) {
	e, err := DecodeInto(b, buf)
	if err != nil {
		return e, err
	}
	if e.Type != Batch || e.NoCreate {
		return e, fmt.Errorf("%w: NoCreate wraps entry type %d", ErrCorrupt, e.Type)
	}
	e.NoCreate = true
	return e, nil
}

// AppendEvict encodes an Evict entry.
func AppendEvict(dst []byte, nowNanos int64, r engine.EvictRange) []byte {
	dst = AppendHeader(dst, Evict, nowNanos)
	dst = binary.AppendUvarint(dst, uint64(r.N))
	dst = binary.BigEndian.AppendUint64(dst, r.From)
	dst = binary.BigEndian.AppendUint64(dst, r.To)
	if r.LRU {
		dst = append(dst, 1) // allkeys-lru; absent for volatile-ttl, as before
	}
	return dst
}

// decodeEvict decodes the body of an Evict entry (after the header).
func decodeEvict(e *Decoded, b []byte) error {
	d := codec.Reader{B: b}
	count := d.Uvarint()
	if d.Err != nil || (len(d.B) != 16 && (len(d.B) != 17 || d.B[16] != 1)) || count > 1<<31 {
		return ErrCorrupt
	}
	from, to := binary.BigEndian.Uint64(d.B), binary.BigEndian.Uint64(d.B[8:])
	if from > to {
		return ErrCorrupt
	}
	e.Evict = engine.EvictRange{From: from, To: to, N: int(count), LRU: len(d.B) == 17}
	return nil
}
