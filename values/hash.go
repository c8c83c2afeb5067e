package values

import "bytes"

// Hash is a small hash: field-value pairs in insertion order (the order
// Redis's small hashes reply in), with an index once it grows.
type Hash struct {
	pairs []pair
	index map[string]int // field -> position in pairs; nil while small
	size  int
}

type pair struct{ k, v []byte }

// indexAt is the length from which a hash keeps an index.
const indexAt = 64

// NewHash returns an empty hash.
func NewHash() *Hash { return &Hash{} }

// Type implements Object.
func (*Hash) Type() Type { return TypeHash }

// Size implements Object.
func (h *Hash) Size() int { return h.size + 48*len(h.pairs) + 64 }

// Len is the number of fields.
func (h *Hash) Len() int { return len(h.pairs) }

func (h *Hash) find(k []byte) int {
	if h.index != nil {
		if i, ok := h.index[string(k)]; ok {
			return i
		}
		return -1
	}
	for i := range h.pairs {
		if bytes.Equal(h.pairs[i].k, k) {
			return i
		}
	}
	return -1
}

// Get returns the field's value.
func (h *Hash) Get(k []byte) ([]byte, bool) {
	if i := h.find(k); i >= 0 {
		return h.pairs[i].v, true
	}
	return nil, false
}

// Set stores v under k (both copied) and reports whether k is new. It
// refuses a field or value longer than MaxElementLen and a new field beyond
// MaxElements.
func (h *Hash) Set(k, v []byte) (bool, error) {
	if len(k) > MaxElementLen || len(v) > MaxElementLen {
		return false, ErrElementTooLong
	}
	if i := h.find(k); i >= 0 {
		h.size += len(v) - len(h.pairs[i].v)
		// Overwrite in place when the old value has room: a token
		// bucket's fields change on every call and keep their length.
		// Get's callers use a value before they set the field again.
		h.pairs[i].v = append(h.pairs[i].v[:0:cap(h.pairs[i].v)], v...)
		return false, nil
	}
	if len(h.pairs) >= MaxElements {
		return false, ErrTooMany
	}
	p := pair{k: append([]byte{}, k...), v: append([]byte{}, v...)}
	h.pairs = append(h.pairs, p)
	h.size += len(k) + len(v)
	if h.index != nil {
		h.index[string(p.k)] = len(h.pairs) - 1
	} else if len(h.pairs) >= indexAt {
		h.reindex()
	}
	return true, nil
}

func (h *Hash) reindex() {
	h.index = make(map[string]int, len(h.pairs))
	for i := range h.pairs {
		h.index[string(h.pairs[i].k)] = i
	}
}

// Del removes k and reports whether it was there.
func (h *Hash) Del(k []byte) bool {
	i := h.find(k)
	if i < 0 {
		return false
	}
	h.size -= len(h.pairs[i].k) + len(h.pairs[i].v)
	h.pairs = append(h.pairs[:i], h.pairs[i+1:]...)
	if h.index != nil {
		if len(h.pairs) < indexAt/2 {
			h.index = nil
		} else {
			h.reindex()
		}
	}
	return true
}

// Each calls fn with every field and value, in order.
func (h *Hash) Each(fn func(k, v []byte)) {
	for _, p := range h.pairs {
		fn(p.k, p.v)
	}
}

func (h *Hash) appendFields(dst []int64) []int64 {
	dst = append(dst, tagHash, int64(len(h.pairs)))
	for _, p := range h.pairs {
		dst = appendBytes(dst, p.k)
		dst = appendBytes(dst, p.v)
	}
	return dst
}
