package engine

// slab stores values of one kind in a slice, so that updating an existing
// key writes in place and allocates nothing. Freed slots are reused.
type slab[T any] struct {
	vals []T
	free []uint32
}

func (s *slab[T]) add(v T) uint32 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		s.vals[i] = v
		return i
	}
	s.vals = append(s.vals, v)
	return uint32(len(s.vals) - 1)
}

func (s *slab[T]) del(i uint32) {
	var zero T
	s.vals[i] = zero
	s.free = append(s.free, i)
}

func (s *slab[T]) reset() {
	s.vals = nil
	s.free = nil
}

// ref locates a key's state: its kind and its slot in that kind's slab.
type ref uint64

func makeRef(k Kind, slot uint32) ref { return ref(k)<<32 | ref(slot) }
func (r ref) kind() Kind              { return Kind(r >> 32) }
func (r ref) slot() uint32            { return uint32(r) }
