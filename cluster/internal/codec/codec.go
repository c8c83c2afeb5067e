// Package codec holds the primitives the cluster's binary encodings are
// made of: uvarints, varints, length-prefixed byte strings and engine
// records. Log entries (package entry), the slot directory and slot-move
// state (package ownership) and forwarded messages (package cluster) are
// all written with them, and their bytes are on disk in logs and
// snapshots: nothing here may change how a value is encoded.
//
// # Usage
//
//	b := codec.AppendString(nil, "node-a")
//	b = binary.AppendUvarint(b, 7)
//	r := codec.Reader{B: b}
//	id, n := string(r.Bytes()), r.Uvarint()
//	if r.Err != nil || len(r.B) != 0 {
//		// corrupt: ErrCorrupt
//	}
package codec

import (
	"encoding/binary"
	"errors"

	"github.com/rlserver/rlserver/engine"
)

// ErrCorrupt reports a log entry or a message that does not decode. In a
// log entry it is fatal (the state machine panics).
var ErrCorrupt = errors.New("undecodable entry")

// Reader reads the fields of an entry or message from B, consuming it.
// The first error sticks in Err (ErrCorrupt), and every later read
// returns a zero value.
type Reader struct {
	B   []byte
	Err error
}

// Fail marks the input corrupt.
func (r *Reader) Fail() {
	if r.Err == nil {
		r.Err = ErrCorrupt
	}
	r.B = nil
}

// Byte reads one byte.
func (r *Reader) Byte() byte {
	if len(r.B) < 1 {
		r.Fail()
		return 0
	}
	c := r.B[0]
	r.B = r.B[1:]
	return c
}

// Uvarint reads an unsigned varint.
func (r *Reader) Uvarint() uint64 {
	v, n := binary.Uvarint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Varint reads a signed varint.
func (r *Reader) Varint() int64 {
	v, n := binary.Varint(r.B)
	if n <= 0 {
		r.Fail()
		return 0
	}
	r.B = r.B[n:]
	return v
}

// Bytes reads a length-prefixed byte string (AppendString), aliasing the
// input.
func (r *Reader) Bytes() []byte {
	n := r.Uvarint()
	if r.Err != nil || n > uint64(len(r.B)) {
		r.Fail()
		return nil
	}
	v := r.B[:n:n]
	r.B = r.B[n:]
	return v
}

// AppendString appends s as a uvarint length and its bytes.
func AppendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// AppendRecord appends a record: its key (AppendString), its kind byte,
// a uvarint count of fields, then each field as a varint. Slot-move
// chunks carry records so, and the state digest hashes them so.
func AppendRecord(dst []byte, r *engine.Record) []byte {
	dst = AppendString(dst, r.Key)
	dst = append(dst, byte(r.Kind))
	dst = binary.AppendUvarint(dst, uint64(len(r.Fields)))
	for _, v := range r.Fields {
		dst = binary.AppendVarint(dst, v)
	}
	return dst
}

// Records reads a uvarint count and that many records (AppendRecord).
func (r *Reader) Records() []engine.Record {
	n := r.Uvarint()
	if r.Err != nil || n > uint64(len(r.B)) {
		r.Fail()
		return nil
	}
	recs := make([]engine.Record, 0, n)
	for range n {
		rec := engine.Record{Key: string(r.Bytes()), Kind: engine.Kind(r.Byte())}
		// Each field takes a byte at least: a count past the bytes left
		// is damage. (A string of 8 MiB is a million fields; a fixed
		// bound of 65,536 had refused every record past 512 KiB.)
		nf := r.Uvarint()
		if r.Err != nil || nf > uint64(len(r.B)) {
			r.Fail()
			return nil
		}
		for range nf {
			rec.Fields = append(rec.Fields, r.Varint())
		}
		recs = append(recs, rec)
	}
	return recs
}
