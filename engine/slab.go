package engine

// slab stores values of one kind in a slice, so that updating an existing
// key writes in place and allocates nothing. Freed slots are reused. The
// table (table.go) keeps a key's slab index in its slot.
type slab[T any] struct {
	vals []T
	free []uint32
}

func (s *slab[T]) add(v T) int64 {
	if n := len(s.free); n > 0 {
		i := s.free[n-1]
		s.free = s.free[:n-1]
		s.vals[i] = v
		return int64(i)
	}
	s.vals = append(s.vals, v)
	return int64(len(s.vals) - 1)
}

func (s *slab[T]) del(i int64) {
	var zero T
	s.vals[i] = zero
	s.free = append(s.free, uint32(i))
}

func (s *slab[T]) reset() {
	s.vals = nil
	s.free = nil
}
