package persist

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"slices"
	"unsafe"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/offheap"
)

// capture is a copy of a state's records for a save, kept in three
// pointer-free arrays so that the garbage collector never scans it and
// sorting moves 32-byte entries: with 10,000,000 keys a slice of
// engine.Record (48 bytes, two pointers, one small allocation each) would
// make every collection during the save walk the whole copy, and the
// requests served meanwhile pay for that in GC assists.
//
// Memory: 32 bytes per record plus its key and 8 bytes per field (about
// 53 bytes per token bucket with a 13-byte key).
//
// The three arrays are mapped outside the Go heap once large
// (internal/offheap) and unmapped by release when the save is written.
// On the heap they were a second copy of the state that outlived every
// save: the heap grew by the capture plus GOGC's headroom over it during
// a save, and the freed spans stayed resident for seconds, so with a save
// a second a server at 1,000,000 token buckets stayed at about 145 bytes
// per key instead of 45. Off the heap, the memory is returned as soon as
// the file is written, and the per-record garbage of the export (each
// record's key and fields) is collected against a small live heap, so it
// never accumulates either.
type capture struct {
	keys   []byte  // every key, in export order
	fields []int64 // every field, in export order
	ents   []entry // one per record; sorted by key by sort
	first  []byte  // the first key added, for lcp
	lcp    int     // bytes that every key shares (the longest common prefix)

	keysMem, fieldsMem, entsMem []byte // the mappings behind the arrays (nil: on the heap)
}

// offHeapMin is the smallest array a capture maps outside the heap.
const offHeapMin = 64 << 10

// grow returns s with room for need more elements, and the mapping behind
// it: s itself while it has room; else a copy in a new array of at least
// twice the capacity, mapped off the heap when that is at least
// offHeapMin bytes (the old mapping is unmapped at once).
func grow[T any](s []T, mem []byte, need int) ([]T, []byte) {
	if len(s)+need <= cap(s) {
		return s, mem
	}
	c := max(2*cap(s), len(s)+need, 16)
	var zero T
	size := int(unsafe.Sizeof(zero))
	var ns []T
	var nmem []byte
	if c*size >= offHeapMin {
		if nmem = offheap.Map(c * size); nmem != nil {
			ns = unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(nmem))), c)[:len(s)]
		}
	}
	if nmem == nil {
		ns = make([]T, len(s), c)
	}
	copy(ns, s)
	offheap.Unmap(mem)
	return ns, nmem
}

// release unmaps the arrays. The capture, and every record it returned,
// must not be used afterwards; nil is a no-op.
func (c *capture) release() {
	if c == nil {
		return
	}
	offheap.Unmap(c.keysMem)
	offheap.Unmap(c.fieldsMem)
	offheap.Unmap(c.entsMem)
	*c = capture{}
}

// entry locates one record in the arrays. prefix holds the 8 key bytes
// after the common prefix, big-endian and zero-padded, so that most
// comparisons while sorting are one integer comparison.
type entry struct {
	prefix   uint64
	keyOff   uint64
	fieldOff uint64 // low 56 bits: offset; top 8 bits: the kind
	keyLen   uint32
	nFields  uint32
}

// sizes is what a capture held, a hint for the next one.
type sizes struct{ records, keyBytes, fields int }

func newCapture(hint sizes) *capture {
	pad := func(n int) int { return n + n/8 }
	c := &capture{}
	c.keys, c.keysMem = grow(c.keys, nil, pad(hint.keyBytes))
	c.fields, c.fieldsMem = grow(c.fields, nil, pad(hint.fields))
	c.ents, c.entsMem = grow(c.ents, nil, pad(hint.records))
	return c
}

func (c *capture) sizes() sizes { return sizes{len(c.ents), len(c.keys), len(c.fields)} }

// add copies rec.
func (c *capture) add(rec engine.Record) {
	if len(c.ents) == 0 {
		c.first = []byte(rec.Key)
		c.lcp = len(rec.Key)
	} else {
		n := 0
		for n < c.lcp && n < len(rec.Key) && rec.Key[n] == c.first[n] {
			n++
		}
		c.lcp = n
	}
	c.ents, c.entsMem = grow(c.ents, c.entsMem, 1)
	c.keys, c.keysMem = grow(c.keys, c.keysMem, len(rec.Key))
	c.fields, c.fieldsMem = grow(c.fields, c.fieldsMem, len(rec.Fields))
	c.ents = append(c.ents, entry{
		keyOff:   uint64(len(c.keys)),
		keyLen:   uint32(len(rec.Key)),
		fieldOff: uint64(len(c.fields)) | uint64(rec.Kind)<<56,
		nFields:  uint32(len(rec.Fields)),
	})
	c.keys = append(c.keys, rec.Key...)
	c.fields = append(c.fields, rec.Fields...)
}

func (c *capture) key(e *entry) []byte { return c.keys[e.keyOff : e.keyOff+uint64(e.keyLen)] }

// sort orders the entries by key, bytewise.
func (c *capture) sort() {
	for i := range c.ents {
		e := &c.ents[i]
		var p [8]byte
		copy(p[:], c.key(e)[c.lcp:])
		e.prefix = binary.BigEndian.Uint64(p[:])
	}
	slices.SortFunc(c.ents, func(a, b entry) int {
		if a.prefix != b.prefix {
			return cmp.Compare(a.prefix, b.prefix)
		}
		// Equal prefixes: the keys' first lcp+8 bytes agree, except that
		// a key shorter than that was padded with zeros.
		return bytes.Compare(c.key(&a)[c.lcp:], c.key(&b)[c.lcp:])
	})
}

// record returns entry i as a record whose key and fields point into the
// capture: valid while the capture lives, and never written.
func (c *capture) record(i int) engine.Record {
	e := &c.ents[i]
	off := e.fieldOff & (1<<56 - 1)
	rec := engine.Record{Kind: engine.Kind(e.fieldOff >> 56), Fields: c.fields[off : off+uint64(e.nFields) : off+uint64(e.nFields)]}
	if e.keyLen > 0 {
		rec.Key = unsafe.String(&c.keys[e.keyOff], int(e.keyLen))
	}
	return rec
}

// captureState exports src at nowNanos into a capture and sorts it. This
// is the only step of a save that involves the shards, which keep serving
// between its bounded steps. The caller releases the capture.
func captureState(ctx context.Context, src Source, nowNanos int64, hint sizes) (*capture, Header, error) {
	c := newCapture(hint)
	clock, err := src.Export(ctx, nowNanos, func(r engine.Record) error {
		c.add(r)
		return nil
	})
	if err != nil {
		c.release()
		return nil, Header{}, err
	}
	c.sort()
	return c, Header{ClockNanos: clock}, nil
}
