package values

import "slices"

// List is a list: elements in order, head first. Indexes are from the
// head, 0-based; kv turns Redis's negative indexes into these.
type List struct {
	items [][]byte
	size  int
}

// NewList returns an empty list.
func NewList() *List { return &List{} }

// Type implements Object.
func (*List) Type() Type { return TypeList }

// Size implements Object.
func (l *List) Size() int { return l.size + 24*len(l.items) + 64 }

// Len is the number of elements.
func (l *List) Len() int { return len(l.items) }

// At is the element at index i (0 <= i < Len). The caller must not
// modify it; it is valid until the list changes.
func (l *List) At(i int) []byte { return l.items[i] }

// Items is the elements in order. The caller must not modify it, and it
// is valid until the list changes.
func (l *List) Items() [][]byte { return l.items }

// Room reports, without changing l, the error that adding n elements of
// the given lengths would meet: an element longer than MaxElementLen, or
// more than MaxElements elements.
func (l *List) Room(elems [][]byte) error {
	for _, v := range elems {
		if len(v) > MaxElementLen {
			return ErrElementTooLong
		}
	}
	if len(l.items)+len(elems) > MaxElements {
		return ErrTooMany
	}
	return nil
}

// Insert puts a copy of v at index i (0 <= i <= Len), after checking the
// bounds (Room).
func (l *List) Insert(i int, v []byte) error {
	if err := l.Room([][]byte{v}); err != nil {
		return err
	}
	l.items = slices.Insert(l.items, i, append([]byte{}, v...))
	l.size += len(v)
	return nil
}

// Set replaces the element at index i (0 <= i < Len) by a copy of v.
func (l *List) Set(i int, v []byte) error {
	if len(v) > MaxElementLen {
		return ErrElementTooLong
	}
	l.size += len(v) - len(l.items[i])
	l.items[i] = append([]byte{}, v...)
	return nil
}

// Delete removes the elements at indexes [from, to) and returns them.
func (l *List) Delete(from, to int) [][]byte {
	from, to = max(from, 0), min(to, len(l.items))
	if from >= to {
		return nil
	}
	out := slices.Clone(l.items[from:to])
	for _, v := range out {
		l.size -= len(v)
	}
	l.items = slices.Delete(l.items, from, to)
	return out
}

func (l *List) appendFields(dst []int64) []int64 {
	dst = append(dst, tagList, int64(len(l.items)))
	for _, v := range l.items {
		dst = appendBytes(dst, v)
	}
	return dst
}
