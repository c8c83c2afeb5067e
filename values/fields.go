package values

import (
	"encoding/binary"
	"math"
)

// Snapshot form. A data key's record (engine.Record) holds int64 fields:
//
//	[expire, int]                        an integer string
//	[expire, -1, len, words...]          a string of len bytes, packed 8 per word (little-endian)
//	[expire, -2, n, (len, words...) * 2n] a hash: n fields, each field then its value
//	[expire, -3, n, (score, len, words...) * n] a sorted set: score as float64 bits, then the member
//	[expire, -4, n, (len, words...) * n]  a list: its elements, head first
//	[expire, -5, n, (len, words...) * n]  a set: its members, in insertion order
//
// An integer string has exactly two fields; the others have a tag (-1 to
// -5) in the second. The layouts are part of the snapshot format: never
// change them, add tags.
const (
	tagStr  = -1
	tagHash = -2
	tagZSet = -3
	tagList = -4
	tagSet  = -5
)

// AppendFields appends e's snapshot fields to dst.
func AppendFields(dst []int64, e *Entry) []int64 {
	dst = append(dst, e.Expire)
	if e.Obj == nil {
		return append(dst, e.Int)
	}
	return e.Obj.appendFields(dst)
}

func appendBytes(dst []int64, b []byte) []int64 {
	dst = append(dst, int64(len(b)))
	for len(b) >= 8 {
		dst = append(dst, int64(binary.LittleEndian.Uint64(b)))
		b = b[8:]
	}
	if len(b) > 0 {
		var w [8]byte
		copy(w[:], b)
		dst = append(dst, int64(binary.LittleEndian.Uint64(w[:])))
	}
	return dst
}

// fieldReader reads packed fields; the first error sticks.
type fieldReader struct {
	f   []int64
	bad bool
}

func (r *fieldReader) int() int64 {
	if len(r.f) == 0 {
		r.bad = true
		return 0
	}
	v := r.f[0]
	r.f = r.f[1:]
	return v
}

func (r *fieldReader) bytes() []byte {
	n := r.int()
	if r.bad || n < 0 || n > MaxValueLen || (n+7)/8 > int64(len(r.f)) {
		r.bad = true
		return nil
	}
	b := make([]byte, (n+7)/8*8)
	for i := range (n + 7) / 8 {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(r.f[i]))
	}
	r.f = r.f[(n+7)/8:]
	return b[:n:n]
}

// FromFields decodes a record's fields (AppendFields) into an Entry. It
// refuses fields that no AppendFields could write.
func FromFields(f []int64) (Entry, error) {
	r := fieldReader{f: f}
	e := Entry{Expire: r.int()}
	tag := r.int()
	if r.bad || e.Expire < 0 {
		return Entry{}, ErrBadField
	}
	if len(r.f) == 0 && len(f) == 2 {
		e.Int = tag
		return e, nil
	}
	switch tag {
	case tagStr:
		b := r.bytes()
		if _, isInt := ParseInt(b); isInt {
			r.bad = true // an integer string is always stored as one
		}
		e.Obj = &Str{B: b}
	case tagHash:
		n := r.int()
		if n <= 0 || n > MaxElements {
			return Entry{}, ErrBadField
		}
		h := NewHash()
		for range n {
			k := r.bytes()
			v := r.bytes()
			if r.bad {
				break
			}
			if _, err := h.Set(k, v); err != nil {
				r.bad = true
			}
		}
		if h.Len() != int(n) {
			r.bad = true
		}
		e.Obj = h
	case tagZSet:
		n := r.int()
		if n <= 0 || n > MaxElements {
			return Entry{}, ErrBadField
		}
		z := NewZSet()
		for range n {
			score := math.Float64frombits(uint64(r.int()))
			m := r.bytes()
			if r.bad || math.IsNaN(score) {
				r.bad = true
				break
			}
			if _, err := z.Add(m, score); err != nil {
				r.bad = true
			}
		}
		if z.Len() != int(n) {
			r.bad = true
		}
		e.Obj = z
	case tagList, tagSet:
		n := r.int()
		if n <= 0 || n > MaxElements {
			return Entry{}, ErrBadField
		}
		var l *List
		var st *Set
		if tag == tagList {
			l = NewList()
			e.Obj = l
		} else {
			st = NewSet()
			e.Obj = st
		}
		for range n {
			m := r.bytes()
			if r.bad || len(m) > MaxElementLen {
				r.bad = true
				break
			}
			if l != nil {
				l.items = append(l.items, m)
				l.size += len(m)
			} else if added, _ := st.Add(m); !added {
				r.bad = true // a set member twice
			}
		}
		if e.Obj.(interface{ Len() int }).Len() != int(n) {
			r.bad = true
		}
	default:
		r.bad = true
	}
	if r.bad || len(r.f) != 0 {
		return Entry{}, ErrBadField
	}
	return e, nil
}
