// Package persist is rlserver's snapshot format and its on-disk store.
//
// A snapshot is the limiter state at one clock: every live record, sorted
// by key, so the bytes depend only on the state, never on the shard count
// or on map order. Encoder and Decoder stream it over any io.Writer and
// io.Reader (standalone saves use files; Raft's FSM uses its snapshot
// sinks). Store keeps one snapshot file per folder and replaces it
// atomically; Saver decides when to save (periodically while the state
// changes, on SAVE and BGSAVE, at shutdown) and reports how it went.
//
// # Format, version 1
//
// All integers in headers are big-endian. CRC is CRC-32C (Castagnoli).
//
//	header   magic    8 bytes  "\x89RLSNAP\n" (the high byte and the newline catch text-mode copies)
//	         version  uint16   format version (1)
//	         ^version uint16   its complement, so a flipped bit reads as damage, not as a newer version
//	         flags    uint32   flagUnordered or 0; a reader refuses bits it does not know
//	         clock    int64    ns since the Unix epoch: the state's clock (Header.ClockNanos)
//	         metaLen  uint32   at most MaxMeta
//	         meta     metaLen bytes, opaque (Header.Meta)
//	         crc      uint32   CRC of the header bytes before it
//	block    tag      'B'
//	         count    uint32   records in the block, >= 1
//	         length   uint32   payload bytes, at most maxPayload
//	         payload  length bytes: count records
//	         crc      uint32   CRC of tag, count, length and payload
//	trailer  tag      'E'
//	         records  uint64   records in the file
//	         crc      uint32   CRC of every byte of the file before it
//
// Nothing may follow the trailer. A record in a payload is
//
//	shared   uvarint  bytes its key shares with the previous key of the block (0 for the first)
//	suffix   uvarint length, then the rest of the key
//	kind     1 byte   engine.Kind
//	n        uvarint  number of fields
//	fields   n zigzag varints
//
// Keys are strictly ascending (bytewise) across the whole file, unless
// the header's flags hold flagUnordered (Header.Unordered): each key then
// appears at most once, in any order (a Raft snapshot streamed from a
// point-in-time export, which cannot sort the whole state in bounded
// memory). Readers before that flag refuse such a file. Fields
// that are times (see timeFields) are written as the difference from a
// base: the header's clock for the first time field of a record, the
// previous time for the later ones of an RL.LOG record (ascending, so the
// differences are small). Differences wrap around in two's complement, so
// any int64 round-trips exactly; other fields are written as they are.
// Each block decodes on its own, so a reader needs one block in memory.
//
// A reader checks each block's CRC before it parses the block, and the
// trailer's count and whole-file CRC before it reports the end, so a
// flipped bit or a truncation anywhere is an error (ErrCorrupt or
// ErrTruncated), never a panic and never a shorter state.
//
// Changing the format: a new kind of state, or a new field appended to a
// kind's layout (engine.Record), that is coded like the others needs no
// new version. Anything else bumps Version; readers keep reading every
// older version.
//
// # Version 2
//
// Version 2 adds an optional policies section between the header and the
// first block (policies.go). A snapshot without policies is still written
// as version 1, byte for byte.
package persist

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"unsafe"

	"github.com/rlserver/rlserver/engine"
)

// Version is the newest format version this package writes and reads
// (a snapshot is written in the oldest version that holds it: 1 without
// policies).
const Version = 2

// MaxMeta bounds Header.Meta.
const MaxMeta = 1 << 20

const (
	magic      = "\x89RLSNAP\n"
	headerLen  = len(magic) + 2 + 2 + 4 + 8 + 4 // up to metaLen, without meta and crc
	blockTag   = 'B'
	endTag     = 'E'
	blockHead  = 1 + 4 + 4 // tag, count, length
	trailerLen = 1 + 8 + 4
	// maxPayload bounds one block, so a damaged length cannot make a
	// reader allocate much. One record must fit: an RL.LOG record holds at
	// most engine.MaxLogLimit fields of at most 10 bytes, and keys are far
	// below the rest.
	maxPayload = 16 << 20
	// minRecord is the smallest encoded record: shared, suffix length,
	// kind, n.
	minRecord = 4
)

// targetPayload is the payload size at which the encoder closes a block:
// large enough that the per-block cost (13 bytes, one CRC) disappears,
// small enough that a reader holds little. Tests lower it to get many
// blocks in a small file.
var targetPayload = 64 << 10

// maxBlockKeyBytes bounds the key bytes a block decodes to. Keys are
// prefix-compressed, so without a bound a small block could expand to
// gigabytes (each record repeating a long previous key plus one byte): the
// encoder closes a block once its keys reach this many bytes, and the
// decoder refuses a block whose keys exceed it by more than one key.
const maxBlockKeyBytes = 1 << 20

// MaxKeyLen is the longest key a snapshot holds (the server's
// --max-key-len cannot exceed it).
const MaxKeyLen = 65535

// Errors. A damaged snapshot is ErrCorrupt or ErrTruncated; the wrapping
// error says where.
var (
	ErrCorrupt      = errors.New("snapshot corrupt")
	ErrTruncated    = errors.New("snapshot truncated")
	ErrNewerVersion = errors.New("snapshot from a newer format version")
	// ErrUnsorted means an Encoder was given a key that is not above the
	// previous one: a bug in the caller, since snapshots are sorted.
	ErrUnsorted = errors.New("snapshot records not in ascending key order")
	// ErrTooLarge means a record or the meta exceeds the format's bounds.
	ErrTooLarge = errors.New("snapshot record or meta too large")
)

// Header is what a snapshot says besides its records.
type Header struct {
	// ClockNanos is the state's clock when the snapshot was taken
	// (engine.Export's result): loading advances every shard to at least
	// this, so time never runs backwards across a restart.
	ClockNanos int64
	// Meta is opaque to this package, at most MaxMeta bytes. Standalone
	// saves leave it empty; the Raft FSM keeps its applied index there.
	Meta []byte
	// Policies are the named policies' definitions (policies.go), each
	// its words: name, KIND, params. Empty: none (a version 1 file).
	Policies [][]string
	// Unordered says the records are in no particular order, each key
	// at most once (flagUnordered): the encoder takes them as they come,
	// the decoder checks no order.
	Unordered bool
}

// flagUnordered is the header flag of Header.Unordered.
const flagUnordered = 1

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// timeFields says which fields of a kind are times (engine.Record's
// layouts): the first n fields after skip are times; for RL.LOG all
// fields after the window are. Unknown kinds have none.
func timeFields(k engine.Kind) (skip, n int) {
	switch k {
	case engine.KindGCRA, engine.KindShape, engine.KindFixed, engine.KindSliding:
		return 0, 1
	case engine.KindLog:
		return 1, -1 // all the rest
	}
	return 0, 0
}

// Encoder writes one snapshot to an io.Writer. Write the records in
// ascending key order, then Close. It buffers at most one block.
type Encoder struct {
	w       io.Writer
	whole   hash.Hash32 // every byte written
	clock   int64
	block   []byte // head reserved, then the payload
	n       uint32 // records in block
	ordered bool   // keys must ascend (not Header.Unordered)
	prevKey []byte // the last key written, in the file
	inBlock bool   // prevKey belongs to the current block
	keyLen  int    // decoded key bytes of the current block
	count   uint64
	written int64
	err     error
}

// NewEncoder writes h's header to w and returns an encoder for the
// records. w is written in blocks of about 64 KiB; it needs no buffering.
func NewEncoder(w io.Writer, h Header) (*Encoder, error) {
	if len(h.Meta) > MaxMeta {
		return nil, fmt.Errorf("%w: meta of %d bytes", ErrTooLarge, len(h.Meta))
	}
	e := &Encoder{w: w, whole: crc32.New(castagnoli), clock: h.ClockNanos, ordered: !h.Unordered, block: make([]byte, blockHead, targetPayload+blockHead+1024)}
	var flags uint32
	if h.Unordered {
		flags |= flagUnordered
	}
	hdr := make([]byte, 0, headerLen+len(h.Meta)+4)
	hdr = append(hdr, magic...)
	version := versionFor(h)
	hdr = binary.BigEndian.AppendUint16(hdr, version)
	hdr = binary.BigEndian.AppendUint16(hdr, ^version)
	hdr = binary.BigEndian.AppendUint32(hdr, flags)
	hdr = binary.BigEndian.AppendUint64(hdr, uint64(h.ClockNanos))
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(len(h.Meta)))
	hdr = append(hdr, h.Meta...)
	hdr = binary.BigEndian.AppendUint32(hdr, crc32.Checksum(hdr, castagnoli))
	if version >= policiesVersion {
		var err error
		if hdr, err = appendPolicies(hdr, h.Policies); err != nil {
			return nil, err
		}
	}
	if err := e.write(hdr); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Encoder) write(b []byte) error {
	if e.err != nil {
		return e.err
	}
	n, err := e.w.Write(b)
	e.written += int64(n)
	e.whole.Write(b[:n])
	if err == nil && n < len(b) {
		err = io.ErrShortWrite
	}
	e.err = err
	return err
}

// Write adds one record. Its key must be above the previous record's
// (bytewise), unless the header is Unordered. The encoder does not keep
// rec.
func (e *Encoder) Write(rec engine.Record) error {
	if e.err != nil {
		return e.err
	}
	if e.ordered && e.count > 0 && rec.Key <= unsafe.String(unsafe.SliceData(e.prevKey), len(e.prevKey)) {
		return fmt.Errorf("%w: %q after %q", ErrUnsorted, rec.Key, e.prevKey)
	}
	if len(rec.Key) > MaxKeyLen {
		return fmt.Errorf("%w: key of %d bytes (at most %d)", ErrTooLarge, len(rec.Key), MaxKeyLen)
	}
	mark := len(e.block)
	shared := 0
	if e.inBlock {
		for shared < len(rec.Key) && shared < len(e.prevKey) && rec.Key[shared] == e.prevKey[shared] {
			shared++
		}
	}
	b := binary.AppendUvarint(e.block, uint64(shared))
	b = binary.AppendUvarint(b, uint64(len(rec.Key)-shared))
	b = append(b, rec.Key[shared:]...)
	b = append(b, byte(rec.Kind))
	b = binary.AppendUvarint(b, uint64(len(rec.Fields)))
	b = appendFields(b, rec.Kind, e.clock, rec.Fields)
	if len(b)-blockHead > maxPayload {
		e.block = b[:mark]
		if e.n > 0 {
			// Too large only together with the block's other records.
			if err := e.flush(); err != nil {
				return err
			}
			return e.Write(rec)
		}
		return fmt.Errorf("%w: record %q of %d bytes", ErrTooLarge, rec.Key, len(b)-mark)
	}
	e.block = b
	e.n++
	e.count++
	e.prevKey = append(e.prevKey[:0], rec.Key...)
	e.inBlock = true
	e.keyLen += len(rec.Key)
	if len(e.block)-blockHead >= targetPayload || e.keyLen >= maxBlockKeyBytes {
		return e.flush()
	}
	return nil
}

// appendFields codes fields by the kind's layout (see the package comment).
func appendFields(b []byte, k engine.Kind, clock int64, fields []int64) []byte {
	skip, n := timeFields(k)
	base := uint64(clock)
	for i, f := range fields {
		if i >= skip && (n < 0 || i < skip+n) {
			b = binary.AppendVarint(b, int64(uint64(f)-base))
			base = uint64(f)
			continue
		}
		b = binary.AppendVarint(b, f)
	}
	return b
}

// flush writes the current block, if it has records.
func (e *Encoder) flush() error {
	if e.n == 0 {
		return e.err
	}
	binary.BigEndian.PutUint32(e.block[1:5], e.n)
	binary.BigEndian.PutUint32(e.block[5:9], uint32(len(e.block)-blockHead))
	e.block[0] = blockTag
	e.block = binary.BigEndian.AppendUint32(e.block, crc32.Checksum(e.block, castagnoli))
	err := e.write(e.block)
	e.block = e.block[:blockHead]
	e.n = 0
	e.inBlock = false
	e.keyLen = 0
	return err
}

// Close writes the last block and the trailer. It does not close the
// underlying writer.
func (e *Encoder) Close() error {
	if err := e.flush(); err != nil {
		return err
	}
	t := make([]byte, 0, trailerLen)
	t = append(t, endTag)
	t = binary.BigEndian.AppendUint64(t, e.count)
	e.whole.Write(t)
	t = binary.BigEndian.AppendUint32(t, e.whole.Sum32())
	// The trailer's crc covers the bytes before it: write without hashing.
	if e.err != nil {
		return e.err
	}
	n, err := e.w.Write(t)
	e.written += int64(n)
	if err == nil && n < len(t) {
		err = io.ErrShortWrite
	}
	e.err = err
	if err == nil {
		e.err = errors.New("persist: encoder closed")
	}
	return err
}

// Bytes is the number of bytes written to the underlying writer so far.
func (e *Encoder) Bytes() int64 { return e.written }

// Encode writes a whole snapshot of recs, which must be sorted by key
// (SortRecords).
func Encode(w io.Writer, h Header, recs []engine.Record) error {
	e, err := NewEncoder(w, h)
	if err != nil {
		return err
	}
	for i := range recs {
		if err := e.Write(recs[i]); err != nil {
			return err
		}
	}
	return e.Close()
}

// Decoder reads one snapshot from an io.Reader, block by block. Records
// returned before an error were checked against their block's CRC but not
// yet against the trailer: a caller that must never act on part of a
// snapshot (anyone loading state) keeps them until Next reports io.EOF, as
// Decode does.
type Decoder struct {
	r       *bufio.Reader
	whole   hash.Hash32
	h       Header
	off     int64 // bytes consumed
	count   uint64
	recs    []engine.Record // the current block's records, not yet returned
	buf     []byte
	prevKey string // the last key decoded, in the file
	done    bool
	err     error
}

// NewDecoder reads and checks the header. It buffers r itself and reads
// it to its end: nothing may follow the snapshot.
func NewDecoder(r io.Reader) (*Decoder, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 256<<10)
	}
	d := &Decoder{r: br, whole: crc32.New(castagnoli)}
	hdr := make([]byte, headerLen)
	// The magic first, so a file that is something else says so even
	// when it is short.
	n, _ := io.ReadFull(d.r, hdr[:len(magic)])
	d.whole.Write(hdr[:n])
	d.off += int64(n)
	if string(hdr[:n]) != magic[:n] {
		return nil, fmt.Errorf("%w: not an rlserver snapshot (bad magic)", ErrCorrupt)
	}
	if n < len(magic) {
		return nil, fmt.Errorf("%w: the file ends at byte %d, inside the header", ErrTruncated, n)
	}
	if err := d.read(hdr[len(magic):], "header"); err != nil {
		return nil, err
	}
	p := hdr[len(magic):]
	v, notV := binary.BigEndian.Uint16(p), binary.BigEndian.Uint16(p[2:])
	switch {
	case v != ^notV:
		return nil, fmt.Errorf("%w: header: damaged version field", ErrCorrupt)
	case v > Version:
		return nil, fmt.Errorf("%w: format version %d, this build reads up to %d", ErrNewerVersion, v, Version)
	case v == 0:
		return nil, fmt.Errorf("%w: header: version 0", ErrCorrupt)
	}
	flags := binary.BigEndian.Uint32(p[4:])
	d.h.ClockNanos = int64(binary.BigEndian.Uint64(p[8:]))
	metaLen := binary.BigEndian.Uint32(p[16:])
	if metaLen > MaxMeta {
		return nil, fmt.Errorf("%w: header: meta length %d", ErrCorrupt, metaLen)
	}
	rest := make([]byte, int(metaLen)+4)
	if err := d.read(rest, "header"); err != nil {
		return nil, err
	}
	sum := crc32.Update(crc32.Checksum(hdr, castagnoli), castagnoli, rest[:metaLen])
	if binary.BigEndian.Uint32(rest[metaLen:]) != sum {
		return nil, fmt.Errorf("%w: header checksum mismatch", ErrCorrupt)
	}
	if flags&^flagUnordered != 0 {
		return nil, fmt.Errorf("%w: header: unknown flags %#x", ErrCorrupt, flags)
	}
	d.h.Unordered = flags&flagUnordered != 0
	if metaLen > 0 {
		d.h.Meta = rest[:metaLen:metaLen]
	}
	if v >= policiesVersion {
		if err := d.readPolicies(); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// read fills b from the stream, adding it to the whole-file checksum; a
// short read is ErrTruncated.
func (d *Decoder) read(b []byte, what string) error {
	n, err := io.ReadFull(d.r, b)
	d.whole.Write(b[:n])
	d.off += int64(n)
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: the file ends at byte %d, inside the %s", ErrTruncated, d.off, what)
	}
	return err
}

// Header is the snapshot's header.
func (d *Decoder) Header() Header { return d.h }

// Next returns the next record, or io.EOF once the trailer has been read
// and verified and the stream has ended. The record's key and fields may
// share memory with other records of its block; they are never written
// again.
func (d *Decoder) Next() (engine.Record, error) {
	for len(d.recs) == 0 {
		if d.err != nil {
			return engine.Record{}, d.err
		}
		if d.done {
			return engine.Record{}, io.EOF
		}
		d.err = d.nextBlock()
	}
	rec := d.recs[0]
	d.recs[0] = engine.Record{}
	d.recs = d.recs[1:]
	return rec, nil
}

// nextBlock reads the next block into d.recs, or the trailer.
func (d *Decoder) nextBlock() error {
	at := d.off
	var head [blockHead]byte
	if err := d.read(head[:1], "block list (no trailer)"); err != nil {
		return err
	}
	switch head[0] {
	case endTag:
		return d.trailer(at)
	case blockTag:
	default:
		return fmt.Errorf("%w: byte %d: unknown tag %#x", ErrCorrupt, at, head[0])
	}
	if err := d.read(head[1:], "block header"); err != nil {
		return err
	}
	count := binary.BigEndian.Uint32(head[1:])
	length := binary.BigEndian.Uint32(head[5:])
	if length > maxPayload || count == 0 || uint64(count)*minRecord > uint64(length) {
		return fmt.Errorf("%w: block at byte %d: bad count %d or length %d", ErrCorrupt, at, count, length)
	}
	if cap(d.buf) < int(length)+4 {
		d.buf = make([]byte, int(length)+4)
	}
	buf := d.buf[:length+4]
	if err := d.read(buf, fmt.Sprintf("block at byte %d", at)); err != nil {
		return err
	}
	sum := crc32.Update(crc32.Checksum(head[:], castagnoli), castagnoli, buf[:length])
	if binary.BigEndian.Uint32(buf[length:]) != sum {
		return fmt.Errorf("%w: block at byte %d: checksum mismatch", ErrCorrupt, at)
	}
	recs, err := d.parse(buf[:length], int(count))
	if err != nil {
		return fmt.Errorf("%w: block at byte %d: %v", ErrCorrupt, at, err)
	}
	d.recs = recs
	d.count += uint64(count)
	return nil
}

// parse decodes a verified payload of count records. All keys of the block
// share one byte array and all fields one slice, so a block costs three
// allocations whatever its size.
func (d *Decoder) parse(p []byte, count int) ([]engine.Record, error) {
	q := p
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(q)
		if n <= 0 {
			return 0, false
		}
		q = q[n:]
		return v, true
	}
	// First pass: sizes and every bound, so the second cannot fail.
	keyBytes, nFields, prevLen := 0, 0, 0
	for i := range count {
		shared, ok1 := uv()
		suffix, ok2 := uv()
		if !ok1 || !ok2 || shared > uint64(prevLen) || (i == 0 && shared != 0) || suffix > uint64(len(q)) {
			return nil, fmt.Errorf("record %d: bad key lengths", i)
		}
		q = q[suffix:]
		prevLen = int(shared + suffix)
		keyBytes += prevLen
		if prevLen > MaxKeyLen || keyBytes > maxBlockKeyBytes+MaxKeyLen {
			return nil, fmt.Errorf("record %d: keys longer than a block may hold", i)
		}
		if len(q) < 1 {
			return nil, fmt.Errorf("record %d: no kind", i)
		}
		q = q[1:]
		n, ok := uv()
		if !ok || n > uint64(len(q)) {
			return nil, fmt.Errorf("record %d: bad field count", i)
		}
		for j := range n {
			_, m := binary.Varint(q)
			if m <= 0 {
				return nil, fmt.Errorf("record %d: bad field %d", i, j)
			}
			q = q[m:]
		}
		nFields += int(n)
	}
	if len(q) != 0 {
		return nil, fmt.Errorf("%d bytes after the last record", len(q))
	}
	// keys has its final capacity, so it is never moved: each key is a
	// string over its bytes, which are written once, before the string
	// is made, and never again.
	keys := make([]byte, 0, keyBytes)
	fields := make([]int64, nFields)
	recs := make([]engine.Record, count)
	q = p
	prevLen = 0
	for i := range recs {
		shared, _ := uv()
		suffix, _ := uv()
		start := len(keys)
		keys = append(keys, keys[start-prevLen:start-prevLen+int(shared)]...)
		keys = append(keys, q[:suffix]...)
		q = q[suffix:]
		prevLen = len(keys) - start
		rec := &recs[i]
		if prevLen > 0 {
			rec.Key = unsafe.String(&keys[start], prevLen)
		}
		if !d.h.Unordered && (d.count > 0 || i > 0) && rec.Key <= d.prevKey {
			return nil, fmt.Errorf("record %d: key %q not above %q", i, rec.Key, d.prevKey)
		}
		d.prevKey = rec.Key
		rec.Kind = engine.Kind(q[0])
		q = q[1:]
		n, _ := uv()
		rec.Fields = fields[:n:n]
		fields = fields[n:]
		skip, nt := timeFields(rec.Kind)
		base := uint64(d.h.ClockNanos)
		for j := range rec.Fields {
			v, m := binary.Varint(q)
			q = q[m:]
			if j >= skip && (nt < 0 || j < skip+nt) {
				base += uint64(v)
				v = int64(base)
			}
			rec.Fields[j] = v
		}
	}
	return recs, nil
}

// trailer checks the trailer that starts at byte at (its tag read) and
// that the stream ends there.
func (d *Decoder) trailer(at int64) error {
	var t [trailerLen - 1]byte
	if err := d.read(t[:8], "trailer"); err != nil {
		return err
	}
	sum := d.whole.Sum32() // every byte up to the trailer's crc
	if err := d.read(t[8:], "trailer"); err != nil {
		return err
	}
	if binary.BigEndian.Uint32(t[8:]) != sum {
		return fmt.Errorf("%w: trailer at byte %d: file checksum mismatch", ErrCorrupt, at)
	}
	if n := binary.BigEndian.Uint64(t[:8]); n != d.count {
		return fmt.Errorf("%w: trailer at byte %d: %d records announced, %d read", ErrCorrupt, at, n, d.count)
	}
	if extra, _ := io.Copy(io.Discard, d.r); extra > 0 {
		return fmt.Errorf("%w: %d bytes after the trailer", ErrCorrupt, extra)
	}
	d.done = true
	return nil
}

// Decode reads a whole snapshot. It returns the records only when the
// whole stream checked out: on an error, no records.
func Decode(r io.Reader) (Header, []engine.Record, error) {
	return decode(r, 0)
}

// decode is Decode with room for sizeHint records made at once.
func decode(r io.Reader, sizeHint int) (Header, []engine.Record, error) {
	d, err := NewDecoder(r)
	if err != nil {
		return Header{}, nil, err
	}
	recs := make([]engine.Record, 0, sizeHint)
	for {
		rec, err := d.Next()
		if err == io.EOF {
			return d.Header(), recs, nil
		}
		if err != nil {
			return Header{}, nil, err
		}
		recs = append(recs, rec)
	}
}
