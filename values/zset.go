package values

import (
	"bytes"
	"cmp"
	"math"
	"slices"
)

// ZSet is a small sorted set: members ordered by score, then by their
// bytes, as Redis orders them, with an index by member once it grows.
type ZSet struct {
	elems []ZElem
	index map[string]float64 // member -> score; nil while small
	size  int
}

// ZElem is one member of a sorted set.
type ZElem struct {
	Score  float64
	Member []byte
}

// NewZSet returns an empty sorted set.
func NewZSet() *ZSet { return &ZSet{} }

// Type implements Object.
func (*ZSet) Type() Type { return TypeZSet }

// Size implements Object.
func (z *ZSet) Size() int { return z.size + 40*len(z.elems) + 64 }

// Len is the number of members.
func (z *ZSet) Len() int { return len(z.elems) }

func compareElem(a ZElem, score float64, m []byte) int {
	if c := cmp.Compare(a.Score, score); c != 0 {
		return c
	}
	return bytes.Compare(a.Member, m)
}

// rank is the position of (score, m) in order, and whether it is there.
func (z *ZSet) rank(score float64, m []byte) (int, bool) {
	return slices.BinarySearchFunc(z.elems, ZElem{}, func(a, _ ZElem) int { return compareElem(a, score, m) })
}

// Score returns the member's score.
func (z *ZSet) Score(m []byte) (float64, bool) {
	if z.index != nil {
		s, ok := z.index[string(m)]
		return s, ok
	}
	for i := range z.elems {
		if bytes.Equal(z.elems[i].Member, m) {
			return z.elems[i].Score, true
		}
	}
	return 0, false
}

// Rank is m's position in order (0: the lowest score), and whether m is
// a member.
func (z *ZSet) Rank(m []byte) (int, bool) {
	s, ok := z.Score(m)
	if !ok {
		return 0, false
	}
	i, _ := z.rank(s, m)
	return i, true
}

// Add sets m's score (m is copied) and reports whether m is new. score
// must not be NaN. It refuses a member longer than MaxElementLen and a new
// member beyond MaxElements.
func (z *ZSet) Add(m []byte, score float64) (bool, error) {
	if math.IsNaN(score) {
		return false, ErrBadField
	}
	if len(m) > MaxElementLen {
		return false, ErrElementTooLong
	}
	old, had := z.Score(m)
	if had {
		if old == score {
			return false, nil
		}
		i, _ := z.rank(old, m)
		mem := z.elems[i].Member
		z.elems = slices.Delete(z.elems, i, i+1)
		j, _ := z.rank(score, mem)
		z.elems = slices.Insert(z.elems, j, ZElem{Score: score, Member: mem})
		if z.index != nil {
			z.index[string(mem)] = score
		}
		return false, nil
	}
	if len(z.elems) >= MaxElements {
		return false, ErrTooMany
	}
	mem := append([]byte{}, m...)
	j, _ := z.rank(score, mem)
	z.elems = slices.Insert(z.elems, j, ZElem{Score: score, Member: mem})
	z.size += len(mem)
	if z.index != nil {
		z.index[string(mem)] = score
	} else if len(z.elems) >= indexAt {
		z.index = make(map[string]float64, len(z.elems))
		for _, e := range z.elems {
			z.index[string(e.Member)] = e.Score
		}
	}
	return true, nil
}

// Rem removes m and reports whether it was there.
func (z *ZSet) Rem(m []byte) bool {
	s, ok := z.Score(m)
	if !ok {
		return false
	}
	i, _ := z.rank(s, m)
	z.removeAt(i, i+1)
	return true
}

func (z *ZSet) removeAt(from, to int) {
	for _, e := range z.elems[from:to] {
		z.size -= len(e.Member)
		if z.index != nil {
			delete(z.index, string(e.Member))
		}
	}
	z.elems = slices.Delete(z.elems, from, to)
	if z.index != nil && len(z.elems) < indexAt/2 {
		z.index = nil
	}
}

// RemoveRange removes the members at ranks [from, to) and returns how many.
func (z *ZSet) RemoveRange(from, to int) int {
	from, to = max(from, 0), min(to, len(z.elems))
	if from >= to {
		return 0
	}
	z.removeAt(from, to)
	return to - from
}

// Elems is the members in order. The caller must not modify it, and it is
// valid until the set changes.
func (z *ZSet) Elems() []ZElem { return z.elems }

// FirstAbove is the rank of the first member whose score is above min
// (at or above when inclusive).
func (z *ZSet) FirstAbove(min float64, inclusive bool) int {
	i, _ := slices.BinarySearchFunc(z.elems, min, func(e ZElem, t float64) int {
		if e.Score < t || (!inclusive && e.Score == t) {
			return -1
		}
		return 1
	})
	return i
}

func (z *ZSet) appendFields(dst []int64) []int64 {
	dst = append(dst, tagZSet, int64(len(z.elems)))
	for _, e := range z.elems {
		dst = append(dst, int64(math.Float64bits(e.Score)))
		dst = appendBytes(dst, e.Member)
	}
	return dst
}
