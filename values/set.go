package values

import (
	"cmp"
	"slices"
	"sync/atomic"
)

// Set is a set of members. It keeps them in insertion order, except that
// a removal moves the last member into the removed one's place, with an
// index by member once it grows.
//
// It reports Redis 7.0's encoding: "intset" while every member is an
// integer's canonical text and there are at most set-max-intset-entries
// (SetIntsetMax) of them, then
// "hashtable" for good (Redis never converts back). An intset replies its
// members in ascending numeric order, as Redis's does (Ordered).
type Set struct {
	members [][]byte
	index   map[string]int // member -> position; nil while small
	size    int
	hashed  bool // no longer an intset
}

// DefaultIntsetMax is Redis's set-max-intset-entries default.
const DefaultIntsetMax = 512

// intsetMax is set-max-intset-entries (SetIntsetMax).
var intsetMax atomic.Int64

func init() { intsetMax.Store(DefaultIntsetMax) }

// SetIntsetMax sets the size past which a set stops being an intset
// (CONFIG SET set-max-intset-entries).
func SetIntsetMax(n int64) { intsetMax.Store(n) }

// NewSet returns an empty set.
func NewSet() *Set { return &Set{} }

// Type implements Object.
func (*Set) Type() Type { return TypeSet }

// Size implements Object.
func (s *Set) Size() int { return s.size + 40*len(s.members) + 64 }

// Len is the number of members.
func (s *Set) Len() int { return len(s.members) }

// Intset reports whether Redis 7.0 would hold the set as an intset.
func (s *Set) Intset() bool { return !s.hashed }

func (s *Set) find(m []byte) int {
	if s.index != nil {
		if i, ok := s.index[string(m)]; ok {
			return i
		}
		return -1
	}
	for i, x := range s.members {
		if string(x) == string(m) {
			return i
		}
	}
	return -1
}

// Has reports whether m is a member.
func (s *Set) Has(m []byte) bool { return s.find(m) >= 0 }

// Add adds a copy of m and reports whether it is new. It refuses a
// member longer than MaxElementLen and a new member beyond MaxElements.
func (s *Set) Add(m []byte) (bool, error) {
	if len(m) > MaxElementLen {
		return false, ErrElementTooLong
	}
	if s.find(m) >= 0 {
		return false, nil
	}
	if len(s.members) >= MaxElements {
		return false, ErrTooMany
	}
	c := append([]byte{}, m...)
	s.members = append(s.members, c)
	s.size += len(c)
	if _, isInt := ParseInt(c); !isInt || int64(len(s.members)) > intsetMax.Load() {
		s.hashed = true
	}
	if s.index != nil {
		s.index[string(c)] = len(s.members) - 1
	} else if len(s.members) >= indexAt {
		s.index = make(map[string]int, len(s.members))
		for i, x := range s.members {
			s.index[string(x)] = i
		}
	}
	return true, nil
}

// Rem removes m and reports whether it was there.
func (s *Set) Rem(m []byte) bool {
	i := s.find(m)
	if i < 0 {
		return false
	}
	s.RemoveAt(i)
	return true
}

// RemoveAt removes the member at position i of Members: the last member
// takes its place.
func (s *Set) RemoveAt(i int) {
	gone := s.members[i]
	last := len(s.members) - 1
	s.members[i] = s.members[last]
	s.members[last] = nil
	s.members = s.members[:last]
	s.size -= len(gone)
	if s.index != nil {
		delete(s.index, string(gone))
		if i < last {
			s.index[string(s.members[i])] = i
		}
		if len(s.members) < indexAt/2 {
			s.index = nil
		}
	}
}

// Members is the members in stored order (positions for At and
// RemoveAt). The caller must not modify it; it is valid until the set
// changes.
func (s *Set) Members() [][]byte { return s.members }

// Ordered is the members in the order Redis 7.0 replies them: ascending
// integers for an intset, stored order otherwise. It is a fresh slice.
func (s *Set) Ordered() [][]byte {
	out := slices.Clone(s.members)
	if !s.hashed {
		slices.SortFunc(out, func(a, b []byte) int {
			x, _ := ParseInt(a)
			y, _ := ParseInt(b)
			return cmp.Compare(x, y)
		})
	}
	return out
}

func (s *Set) appendFields(dst []int64) []int64 {
	dst = append(dst, tagSet, int64(len(s.members)))
	for _, m := range s.members {
		dst = appendBytes(dst, m)
	}
	return dst
}
