package values

import (
	"slices"
	"strconv"
	"testing"
)

// A clone holds what its original holds (the same snapshot fields) and
// shares nothing with it: every change to one, in place or growing, leaves
// the other as it was.
func TestCloneIsDeep(t *testing.T) {
	for _, n := range []int{1, 3, indexAt + 5} {
		h, z, l, s := NewHash(), NewZSet(), NewList(), NewSet()
		for i := range n {
			b := []byte("m" + strconv.Itoa(i))
			h.Set(b, []byte("value"+strconv.Itoa(i)))
			z.Add(b, float64(i))
			l.Insert(l.Len(), b)
			s.Add(b)
		}
		entries := []Entry{
			{Obj: &Str{B: []byte("hello"), Raw: true}, Expire: 7},
			{Int: 42},
			{Obj: h}, {Obj: z}, {Obj: l}, {Obj: s},
		}
		for _, e := range entries {
			before := AppendFields(nil, &e)
			c := e.Clone()
			if got := AppendFields(nil, &c); !slices.Equal(got, before) {
				t.Fatalf("n=%d %T: the clone's fields differ", n, e.Obj)
			}
			// Change the clone every way its type allows.
			switch o := c.Obj.(type) {
			case *Str:
				o.B[0] = 'J'
				o.B = append(o.B, '!')
			case *Hash:
				o.Set([]byte("m0"), []byte("v"))                   // shorter: in place
				o.Set([]byte("m1"), []byte("a much longer value")) // grows
				o.Set([]byte("new"), []byte("x"))
			case *ZSet:
				o.Add([]byte("m0"), 100)
				o.Add([]byte("new"), -1)
			case *List:
				o.Set(0, []byte("x"))
				o.Insert(0, []byte("new"))
			case *Set:
				o.Add([]byte("new"))
			default:
				c.Int++
			}
			if got := AppendFields(nil, &e); !slices.Equal(got, before) {
				t.Errorf("n=%d %T: changing the clone changed the original", n, e.Obj)
			}
		}
	}
}
