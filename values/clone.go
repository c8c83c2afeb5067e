package values

import "maps"

// Clone returns a deep copy of e: a change to either leaves the other as
// it was. A value's bytes are copied into one array per value, each
// element capped at its own end so that growing one in place moves it
// out instead of overwriting the next.
func (e *Entry) Clone() Entry {
	c := *e
	switch o := e.Obj.(type) {
	case *Str:
		c.Obj = &Str{B: append(make([]byte, 0, len(o.B)), o.B...), Raw: o.Raw}
	case *Hash:
		c.Obj = o.clone()
	case *ZSet:
		c.Obj = o.clone()
	case *List:
		c.Obj = o.clone()
	case *Set:
		c.Obj = o.clone()
	}
	return c
}

// arena hands out copies of byte slices from one array.
type arena []byte

// copyOf copies b into a, capped at its end; a nil b stays nil.
func (a *arena) copyOf(b []byte) []byte {
	if b == nil {
		return nil
	}
	n := len(*a)
	*a = append(*a, b...)
	return (*a)[n : n+len(b) : n+len(b)]
}

func (h *Hash) clone() *Hash {
	n := 0
	for _, p := range h.pairs {
		n += len(p.k) + len(p.v)
	}
	a := make(arena, 0, n)
	c := &Hash{pairs: make([]pair, len(h.pairs)), size: h.size}
	for i, p := range h.pairs {
		c.pairs[i] = pair{k: a.copyOf(p.k), v: a.copyOf(p.v)}
	}
	if h.index != nil {
		c.index = maps.Clone(h.index)
	}
	return c
}

func (z *ZSet) clone() *ZSet {
	n := 0
	for _, e := range z.elems {
		n += len(e.Member)
	}
	a := make(arena, 0, n)
	c := &ZSet{elems: make([]ZElem, len(z.elems)), size: z.size}
	for i, e := range z.elems {
		c.elems[i] = ZElem{Score: e.Score, Member: a.copyOf(e.Member)}
	}
	if z.index != nil {
		c.index = maps.Clone(z.index)
	}
	return c
}

func (l *List) clone() *List {
	return &List{items: cloneAll(l.items), size: l.size}
}

func (s *Set) clone() *Set {
	c := &Set{members: cloneAll(s.members), size: s.size, hashed: s.hashed}
	if s.index != nil {
		c.index = maps.Clone(s.index)
	}
	return c
}

func cloneAll(items [][]byte) [][]byte {
	n := 0
	for _, b := range items {
		n += len(b)
	}
	a := make(arena, 0, n)
	out := make([][]byte, len(items))
	for i, b := range items {
		out[i] = a.copyOf(b)
	}
	return out
}
