package values

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// hashPairs lists h's pairs in order.
func hashPairs(h *Hash) [][2]string {
	var out [][2]string
	h.Each(func(k, v []byte) { out = append(out, [2]string{string(k), string(v)}) })
	return out
}

func zsetElems(z *ZSet) []string {
	var out []string
	for _, e := range z.Elems() {
		out = append(out, fmt.Sprintf("%v:%q", e.Score, e.Member))
	}
	return out
}

// TestHashModel checks Hash against a map and an order slice, across the
// index threshold both ways.
func TestHashModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	h := NewHash()
	m := map[string]string{}
	var order []string
	for i := range 20000 {
		k := fmt.Sprintf("f%d", rng.IntN(150))
		switch rng.IntN(3) {
		case 0, 1:
			v := strings.Repeat("v", rng.IntN(5)) + fmt.Sprint(i)
			isNew, err := h.Set([]byte(k), []byte(v))
			if err != nil {
				t.Fatal(err)
			}
			_, had := m[k]
			if isNew == had {
				t.Fatalf("Set %s: new %v, had %v", k, isNew, had)
			}
			if !had {
				order = append(order, k)
			}
			m[k] = v
		case 2:
			_, had := m[k]
			if h.Del([]byte(k)) != had {
				t.Fatalf("Del %s", k)
			}
			delete(m, k)
			if i := slices.Index(order, k); i >= 0 {
				order = slices.Delete(order, i, i+1)
			}
		}
		if h.Len() != len(m) {
			t.Fatalf("Len %d, want %d", h.Len(), len(m))
		}
		if v, ok := h.Get([]byte(k)); ok != hasKey(m, k) || string(v) != m[k] {
			t.Fatalf("Get %s = %q %v, want %q", k, v, ok, m[k])
		}
	}
	var want [][2]string
	for _, k := range order {
		want = append(want, [2]string{k, m[k]})
	}
	if got := hashPairs(h); !reflect.DeepEqual(got, want) {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}
}

func TestHashBounds(t *testing.T) {
	h := NewHash()
	if _, err := h.Set(make([]byte, MaxElementLen+1), nil); err != ErrElementTooLong {
		t.Fatal(err)
	}
	if _, err := h.Set([]byte("a"), make([]byte, MaxElementLen+1)); err != ErrElementTooLong {
		t.Fatal(err)
	}
	for i := range MaxElements {
		if _, err := h.Set(fmt.Appendf(nil, "%d", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Set([]byte("new"), nil); err != ErrTooMany {
		t.Fatal(err)
	}
	if isNew, err := h.Set([]byte("0"), []byte("x")); isNew || err != nil {
		t.Fatal(isNew, err)
	}
	if v, _ := h.Get([]byte("0")); string(v) != "x" {
		t.Fatal(v)
	}
	// An empty value is stored, and read back, as empty (not missing).
	h2 := NewHash()
	h2.Set([]byte("e"), nil)
	if v, ok := h2.Get([]byte("e")); !ok || v == nil || len(v) != 0 {
		t.Fatalf("%q %v", v, ok)
	}
}

// TestZSetModel checks ZSet against a map sorted on demand, across the
// index threshold both ways.
func TestZSetModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	z := NewZSet()
	m := map[string]float64{}
	sorted := func() []ZElem {
		var out []ZElem
		for k, s := range m {
			out = append(out, ZElem{Score: s, Member: []byte(k)})
		}
		slices.SortFunc(out, func(a, b ZElem) int { return compareElem(a, b.Score, b.Member) })
		return out
	}
	for range 20000 {
		k := fmt.Sprintf("m%d", rng.IntN(150))
		switch rng.IntN(6) {
		case 0, 1, 2:
			s := float64(rng.IntN(20))
			if rng.IntN(10) == 0 {
				s = math.Inf(rng.IntN(2)*2 - 1)
			}
			isNew, err := z.Add([]byte(k), s)
			if err != nil {
				t.Fatal(err)
			}
			if _, had := m[k]; isNew == had {
				t.Fatalf("Add %s: new %v", k, isNew)
			}
			m[k] = s
		case 3:
			_, had := m[k]
			if z.Rem([]byte(k)) != had {
				t.Fatalf("Rem %s", k)
			}
			delete(m, k)
		case 4:
			want := sorted()
			from, to := rng.IntN(len(want)+2)-1, rng.IntN(len(want)+2)
			n := z.RemoveRange(from, to)
			lo, hi := max(from, 0), min(to, len(want))
			if n != max(hi-lo, 0) {
				t.Fatalf("RemoveRange(%d, %d) = %d", from, to, n)
			}
			for j := lo; j < hi; j++ {
				delete(m, string(want[j].Member))
			}
		case 5:
			want := sorted()
			min, incl := float64(rng.IntN(22)-1), rng.IntN(2) == 0
			exp := len(want)
			for j, e := range want {
				if e.Score > min || (incl && e.Score == min) {
					exp = j
					break
				}
			}
			if got := z.FirstAbove(min, incl); got != exp {
				t.Fatalf("FirstAbove(%v, %v) = %d, want %d", min, incl, got, exp)
			}
		}
		want := sorted()
		if z.Len() != len(want) {
			t.Fatalf("Len %d want %d", z.Len(), len(want))
		}
		if s, ok := z.Score([]byte(k)); ok != hasKey(m, k) || s != m[k] {
			t.Fatalf("Score %s", k)
		}
		r, ok := z.Rank([]byte(k))
		wantRank := slices.IndexFunc(want, func(e ZElem) bool { return string(e.Member) == k })
		if ok != (wantRank >= 0) || (ok && r != wantRank) {
			t.Fatalf("Rank %s = %d %v, want %d", k, r, ok, wantRank)
		}
	}
	got := z.Elems()
	want := sorted()
	if len(got) != len(want) {
		t.Fatalf("len %d want %d", len(got), len(want))
	}
	for i := range got {
		if got[i].Score != want[i].Score || !bytes.Equal(got[i].Member, want[i].Member) {
			t.Fatalf("elem %d: %v want %v", i, got[i], want[i])
		}
	}
}

func TestZSetBounds(t *testing.T) {
	z := NewZSet()
	if _, err := z.Add(make([]byte, MaxElementLen+1), 1); err != ErrElementTooLong {
		t.Fatal(err)
	}
	if _, err := z.Add([]byte("a"), math.NaN()); err == nil {
		t.Fatal("NaN accepted")
	}
	for i := range MaxElements {
		if _, err := z.Add(fmt.Appendf(nil, "%d", i), float64(i)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := z.Add([]byte("new"), 1); err != ErrTooMany {
		t.Fatal(err)
	}
	if _, err := z.Add([]byte("5"), -1); err != nil {
		t.Fatal(err)
	}
	if r, ok := z.Rank([]byte("5")); !ok || r != 0 {
		t.Fatal(r, ok)
	}
}

// TestHashZSetSnapshotRoundTrip: AppendFields then FromFields gives an
// equal value, for hashes and sorted sets of every size and content.
func TestHashZSetSnapshotRoundTrip(t *testing.T) {
	var entries []Entry
	for _, n := range []int{1, 2, 7, 63, 64, 65, 200, MaxElements} {
		h := NewHash()
		z := NewZSet()
		for i := range n {
			k := []byte(fmt.Sprintf("field-%d-%s", i, strings.Repeat("é", i%17)))
			v := []byte(strings.Repeat("\x00v", i%9))
			if _, err := h.Set(k, v); err != nil {
				t.Fatal(err)
			}
			s := float64(i%13) - 6.5
			switch i % 11 {
			case 1:
				s = math.Inf(1)
			case 2:
				s = math.Inf(-1)
			case 3:
				s = 1e-310
			}
			if _, err := z.Add(k, s); err != nil {
				t.Fatal(err)
			}
		}
		entries = append(entries, Entry{Obj: h}, Entry{Expire: 1_700_000_000_000_000_000, Obj: z})
	}
	big := NewHash()
	big.Set([]byte(""), make([]byte, MaxElementLen))
	big.Set(make([]byte, MaxElementLen), []byte(""))
	entries = append(entries, Entry{Expire: 5, Obj: big})
	for i, e := range entries {
		f := AppendFields(nil, &e)
		got, err := FromFields(f)
		if err != nil {
			t.Fatalf("entry %d: %v", i, err)
		}
		if got.Expire != e.Expire || got.Type() != e.Type() {
			t.Fatalf("entry %d: expire %d type %d", i, got.Expire, got.Type())
		}
		switch v := e.Obj.(type) {
		case *Hash:
			if a, b := hashPairs(got.Obj.(*Hash)), hashPairs(v); !reflect.DeepEqual(a, b) {
				t.Fatalf("entry %d: hash differs", i)
			}
			if got.Obj.(*Hash).Size() != v.Size() {
				t.Fatalf("entry %d: size %d want %d", i, got.Obj.(*Hash).Size(), v.Size())
			}
		case *ZSet:
			if a, b := zsetElems(got.Obj.(*ZSet)), zsetElems(v); !reflect.DeepEqual(a, b) {
				t.Fatalf("entry %d: zset differs", i)
			}
		}
		if f2 := AppendFields(nil, &got); !slices.Equal(f, f2) {
			t.Fatalf("entry %d: fields differ after the round trip", i)
		}
		// Every strict prefix and a trailing field are refused.
		for _, cut := range []int{len(f) - 1, 3, 2 + len(f)/2} {
			if cut > 2 && cut < len(f) {
				if _, err := FromFields(f[:cut]); err == nil {
					t.Fatalf("entry %d: prefix %d accepted", i, cut)
				}
			}
		}
		if _, err := FromFields(append(slices.Clone(f), 0)); err == nil {
			t.Fatalf("entry %d: trailing field accepted", i)
		}
	}
}

func hasKey[V any](m map[string]V, k string) bool {
	_, ok := m[k]
	return ok
}
