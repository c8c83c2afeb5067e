// Package values holds the Redis values a data key can hold (strings,
// small hashes, sorted sets, lists and sets), their bounds, and their snapshot form.
//
// The engine stores one Entry per data key in a shard's slab and never
// looks inside a value; package kv runs Redis's commands on them. An
// integer string is stored as an int64 in the Entry itself (Obj nil), so a
// counter with a TTL costs no Go object at all.
package values

import (
	"errors"
	"math"
)

// Type is the Redis type of a data value.
type Type uint8

// Types.
const (
	TypeString Type = 1
	TypeHash   Type = 2
	TypeZSet   Type = 3
	TypeList   Type = 4
	TypeSet    Type = 5
)

// NewObject returns an empty value of type t: nil for a string (the
// integer 0, which needs no object).
func NewObject(t Type) Object {
	switch t {
	case TypeHash:
		return NewHash()
	case TypeZSet:
		return NewZSet()
	case TypeList:
		return NewList()
	case TypeSet:
		return NewSet()
	}
	return nil
}

// Bounds: a string longer than MaxValueLen, a hash field or value or a
// sorted set member longer than MaxElementLen, or a hash or sorted set
// with more than MaxElements fields or members, is refused. They keep the
// largest value's snapshot record (about 13 MB for a full hash, 8 MiB for
// a string) inside one snapshot block (16 MiB).
const (
	MaxValueLen   = 8 << 20 // bytes of one string value
	MaxElementLen = 512     // bytes of one hash field or value, sorted set or set member, list element
	MaxElements   = 10_000  // fields of one hash, members of one (sorted) set, elements of one list
)

// Errors the commands map to Redis's texts.
var (
	ErrTooLong = errors.New("value too long")
	// ErrElementTooLong refuses a hash field or value, or a member, over
	// MaxElementLen.
	ErrElementTooLong = errors.New("element too long")
	ErrTooMany        = errors.New("too many elements")
	ErrBadField       = errors.New("invalid value fields")
)

// Entry is a data key's state: its expiry and its value. Obj is nil for a
// string that holds an integer (Int); otherwise it is a *Str, *Hash,
// *ZSet, *List or *Set.
type Entry struct {
	Expire int64 // Unix ns at which the key expires; 0: never
	Int    int64 // the integer of an integer string (Obj nil)
	Obj    Object
	// Used is when a command last read or wrote the key (Unix ns, the
	// stamped time, so every replica agrees): allkeys-lru evicts the
	// least recently used first. Snapshots do not keep it: a restored key
	// counts as used when it was restored.
	Used int64
}

// Object is a value that is not an integer string.
type Object interface {
	Type() Type
	// Size is the bytes the value holds, for memory accounting.
	Size() int
	// appendFields appends the value's snapshot fields.
	appendFields(dst []int64) []int64
}

// Type is the entry's Redis type.
func (e *Entry) Type() Type {
	if e.Obj == nil {
		return TypeString
	}
	return e.Obj.Type()
}

// Str is a string value that is not stored as an integer. Raw marks a
// string changed in place (APPEND, SETRANGE), which Redis then holds in
// its "raw" encoding whatever its length (OBJECT ENCODING).
type Str struct {
	B   []byte
	Raw bool
}

// Type implements Object.
func (*Str) Type() Type { return TypeString }

// Size implements Object.
func (s *Str) Size() int { return len(s.B) + 24 }

func (s *Str) appendFields(dst []int64) []int64 { return appendBytes(append(dst, tagStr), s.B) }

// ParseInt reports whether b is the canonical text of an int64 (as Redis's
// string2ll: no sign on zero, no leading zeros, no spaces), and its value.
func ParseInt(b []byte) (int64, bool) {
	if len(b) == 0 || len(b) > 20 {
		return 0, false
	}
	if len(b) == 1 && b[0] == '0' {
		return 0, true
	}
	neg := b[0] == '-'
	d := b
	if neg {
		d = b[1:]
	}
	if len(d) == 0 || d[0] < '1' || d[0] > '9' {
		return 0, false
	}
	var u uint64
	for _, c := range d {
		if c < '0' || c > '9' {
			return 0, false
		}
		if u > (math.MaxUint64-9)/10 {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if neg {
		if u > 1<<63 {
			return 0, false
		}
		return int64(-u), true
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// SetString stores b in e as a string: as an integer when b is an
// integer's canonical text, so a counter never holds an object.
func (e *Entry) SetString(b []byte) {
	if n, ok := ParseInt(b); ok {
		e.Int, e.Obj = n, nil
		return
	}
	e.Int, e.Obj = 0, &Str{B: append([]byte(nil), b...)}
}

// Size is the bytes the entry's value holds beyond the Entry itself.
func (e *Entry) Size() int {
	if e.Obj == nil {
		return 0
	}
	return e.Obj.Size()
}
