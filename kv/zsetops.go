package kv

import (
	"bytes"
	"cmp"
	"math"
	"slices"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// The sorted-set algebra: ZUNION, ZINTER, ZDIFF, their STORE forms and
// ZINTERCARD, as Redis 7.0's zunionInterDiffGenericCommand, and
// ZRANGESTORE (zrange in zset.go). Inputs may be sorted sets or sets (a
// set's members score 1); a missing key is an empty input.
//
// The order of the arithmetic is Redis's, so sums round alike: inputs
// are taken from the smallest to the largest (a stable sort by size;
// ZDIFF keeps the given order), and each member's score is its weighted
// score in the first input that holds it, aggregated with the next ones
// in that order. A weighted score that is NaN (0 times inf) counts as 0,
// and so does a SUM that is NaN (inf + -inf); in an intersection a NaN
// weighted score after the first input is aggregated as it is (MIN and
// MAX ignore it, SUM gives 0), as Redis does.
//
// A stored result replaces the destination whatever data it held (an
// empty result deletes it), within the sorted-set bounds; -0 is stored
// as 0 (zset.go). A limiter key is never replaced: WRONGTYPE.

func init() {
	var (
		ro      = []string{"readonly", "movablekeys"}
		wr      = []string{"write", "denyoom", "movablekeys"}
		aclRS   = []string{"@read", "@sortedset", "@slow"}
		aclWS   = []string{"@write", "@sortedset", "@slow"}
		algebra = func(name string, op setOp, store, card bool, since, summary string) *Spec {
			s := &Spec{Name: name, Arity: -3, NumKeysAt: 1, Flags: ro, ACL: aclRS, Group: "sorted-set",
				Since: since, Summary: summary,
				run: func(c *Cmd, ks engine.Keyspace, w *Writer) { zsetAlgebra(c, ks, w, op, store, card) }}
			if store {
				s.Arity, s.NumKeysAt, s.Flags, s.ACL = -4, 2, wr, aclWS
				s.FirstKey, s.LastKey, s.KeyStep = 1, 1, 1
			}
			return s
		}
	)
	register(
		algebra("zunion", opUnion, false, false, "6.2.0", "Add multiple sorted sets"),
		algebra("zinter", opInter, false, false, "6.2.0", "Intersect multiple sorted sets"),
		algebra("zdiff", opDiff, false, false, "6.2.0", "Subtract multiple sorted sets"),
		algebra("zunionstore", opUnion, true, false, "2.0.0", "Add multiple sorted sets and store the resulting sorted set in a new key"),
		algebra("zinterstore", opInter, true, false, "2.0.0", "Intersect multiple sorted sets and store the resulting sorted set in a new key"),
		algebra("zdiffstore", opDiff, true, false, "6.2.0", "Subtract multiple sorted sets and store the resulting sorted set in a new key"),
		algebra("zintercard", opInter, false, true, "7.0.0", "Intersect multiple sorted sets and return the cardinality of the result"),
		&Spec{Name: "zrangestore", Arity: -5, FirstKey: 1, LastKey: 2, KeyStep: 1, Flags: []string{"write", "denyoom"},
			ACL: aclWS, Group: "sorted-set", Since: "6.2.0", Summary: "Store a range of members from sorted set into another key",
			run: func(c *Cmd, ks engine.Keyspace, w *Writer) {
				zrangeGeneric(c.Args[1:], ks, w, zrAuto, zrDirAuto, c.Args[1])
			}},
	)
}

// ErrWeightFloat is the reply to a WEIGHTS value that is not a float.
const ErrWeightFloat = "ERR weight value is not a float"

// errNoInputKey is the reply to a numkeys below 1 of the command named
// name (lower case).
func errNoInputKey(name string) string {
	return "ERR at least 1 input key is needed for '" + name + "' command"
}

// zaggregate is AGGREGATE's function.
type zaggregate uint8

const (
	aggSum zaggregate = iota
	aggMin
	aggMax
)

// apply aggregates v into *t, as Redis's zunionInterAggregate.
func (a zaggregate) apply(t *float64, v float64) {
	switch a {
	case aggSum:
		*t += v
		if math.IsNaN(*t) {
			*t = 0
		}
	case aggMin:
		if v < *t {
			*t = v
		}
	case aggMax:
		if v > *t {
			*t = v
		}
	}
}

// zinput is one input of the algebra: a sorted set, a set, or neither
// (a missing key), with its weight.
type zinput struct {
	z      *values.ZSet
	s      *values.Set
	weight float64
}

func (in *zinput) len() int {
	switch {
	case in.z != nil:
		return in.z.Len()
	case in.s != nil:
		return in.s.Len()
	}
	return 0
}

// each calls fn with every member and its score (1 for a set's).
func (in *zinput) each(fn func(m []byte, score float64) bool) {
	switch {
	case in.z != nil:
		for _, e := range in.z.Elems() {
			if !fn(e.Member, e.Score) {
				return
			}
		}
	case in.s != nil:
		for _, m := range in.s.Members() {
			if !fn(m, 1) {
				return
			}
		}
	}
}

// score is m's score in the input, and whether m is there.
func (in *zinput) score(m []byte) (float64, bool) {
	switch {
	case in.z != nil:
		return in.z.Score(m)
	case in.s != nil && in.s.Has(m):
		return 1, true
	}
	return 0, false
}

// zinputs looks up keys as sorted sets or sets, or returns WRONGTYPE's
// text.
func zinputs(ks engine.Keyspace, keys [][]byte) ([]zinput, string) {
	out := make([]zinput, len(keys))
	for i, k := range keys {
		e, err := ks.Get(k)
		if err != nil {
			return nil, errorText(err)
		}
		out[i].weight = 1
		if e == nil {
			continue
		}
		switch o := e.Obj.(type) {
		case *values.ZSet:
			out[i].z = o
		case *values.Set:
			out[i].s = o
		default:
			return nil, ErrWrongType
		}
	}
	return out, ""
}

// zsetAlgebra is ZUNION, ZINTER, ZDIFF (store: their STORE forms, the
// destination first) and ZINTERCARD (card), in Redis's order of checks:
// numkeys, the inputs' types, then the options.
func zsetAlgebra(c *Cmd, ks engine.Keyspace, w *Writer, op setOp, store, card bool) {
	args := c.Args
	at := c.spec.NumKeysAt
	n64, ok := values.ParseInt(args[at])
	switch {
	case !ok:
		w.Error(ErrNotInteger)
		return
	case n64 < 1:
		w.Error(errNoInputKey(c.spec.Name))
		return
	case n64 > int64(len(args)-at-1):
		w.Error(ErrSyntax)
		return
	}
	n := int(n64)
	ins, msg := zinputs(ks, args[at+1:at+1+n])
	if msg != "" {
		w.Error(msg)
		return
	}
	agg := aggSum
	withScores := false
	limit := int64(0)
	for j := at + 1 + n; j < len(args); {
		left := len(args) - j
		switch a := args[j]; {
		case op != opDiff && !card && left >= n+1 && is(a, "weights"):
			j++
			for i := range ins {
				f, ok := parseScore(args[j])
				if !ok {
					w.Error(ErrWeightFloat)
					return
				}
				ins[i].weight = f
				j++
			}
		case op != opDiff && !card && left >= 2 && is(a, "aggregate"):
			switch b := args[j+1]; {
			case is(b, "sum"):
				agg = aggSum
			case is(b, "min"):
				agg = aggMin
			case is(b, "max"):
				agg = aggMax
			default:
				w.Error(ErrSyntax)
				return
			}
			j += 2
		case !store && !card && is(a, "withscores"):
			withScores = true
			j++
		case card && left >= 2 && is(a, "limit"):
			v, ok := values.ParseInt(args[j+1])
			if !ok || v < 0 {
				w.Error(ErrLimitNegative)
				return
			}
			limit = v
			j += 2
		default:
			w.Error(ErrSyntax)
			return
		}
	}
	if op != opDiff {
		slices.SortStableFunc(ins, func(a, b zinput) int { return cmp.Compare(a.len(), b.len()) })
	}
	if card {
		w.Int(zinterCount(ins, limit))
		return
	}
	var out []values.ZElem
	switch op {
	case opInter:
		out = zinter(ins, agg)
	case opUnion:
		out = zunion(ins, agg)
	case opDiff:
		out = zdiff(ins)
	}
	slices.SortFunc(out, func(a, b values.ZElem) int {
		if c := cmp.Compare(a.Score, b.Score); c != 0 {
			return c
		}
		return bytes.Compare(a.Member, b.Member)
	})
	if store {
		storeZSet(ks, w, args[1], out)
		return
	}
	writeZElems(w, out, withScores)
}

// zinterMember reports whether m (of score s in ins[0]) is in every
// input, and its aggregated score.
func zinterMember(ins []zinput, agg zaggregate, m []byte, s float64) (float64, bool) {
	score := ins[0].weight * s
	if math.IsNaN(score) {
		score = 0
	}
	for j := 1; j < len(ins); j++ {
		v, ok := ins[j].score(m)
		if !ok {
			return 0, false
		}
		agg.apply(&score, v*ins[j].weight)
	}
	return score, true
}

// zinter is the intersection of ins, sorted by size.
func zinter(ins []zinput, agg zaggregate) []values.ZElem {
	var out []values.ZElem
	ins[0].each(func(m []byte, s float64) bool {
		if score, ok := zinterMember(ins, agg, m, s); ok {
			out = append(out, values.ZElem{Score: score, Member: m})
		}
		return true
	})
	return out
}

// zinterCount is ZINTERCARD's count, stopping at limit (0: none).
func zinterCount(ins []zinput, limit int64) int64 {
	n := int64(0)
	ins[0].each(func(m []byte, s float64) bool {
		if _, ok := zinterMember(ins, aggSum, m, s); ok {
			n++
		}
		return limit == 0 || n < limit
	})
	return n
}

// zunion is the union of ins, sorted by size.
func zunion(ins []zinput, agg zaggregate) []values.ZElem {
	var out []values.ZElem
	at := map[string]int{} // member -> position in out
	for i := range ins {
		ins[i].each(func(m []byte, s float64) bool {
			score := ins[i].weight * s
			if math.IsNaN(score) {
				score = 0
			}
			if k, ok := at[string(m)]; ok {
				agg.apply(&out[k].Score, score)
			} else {
				at[string(m)] = len(out)
				out = append(out, values.ZElem{Score: score, Member: m})
			}
			return true
		})
	}
	return out
}

// zdiff is the members of ins[0] in no other input, with their scores.
func zdiff(ins []zinput) []values.ZElem {
	var out []values.ZElem
	ins[0].each(func(m []byte, s float64) bool {
		for j := 1; j < len(ins); j++ {
			if _, ok := ins[j].score(m); ok {
				return true
			}
		}
		out = append(out, values.ZElem{Score: s, Member: m})
		return true
	})
	return out
}

// writeZElems writes members in order, with their scores when asked: a
// flat array in RESP2, [member, score] pairs in RESP3.
func writeZElems(w *Writer, out []values.ZElem, withScores bool) {
	if withScores {
		writePairs(w, out, w.RESP3)
		return
	}
	w.Array(len(out))
	for _, e := range out {
		w.Bulk(e.Member)
	}
}

// storeZSet replaces dst by a sorted set of out (in order, distinct
// members) and replies its size; an empty out deletes dst and replies 0.
// out may alias the inputs' members: they are copied before dst goes. A
// limiter key is not replaced (WRONGTYPE), as SET does not replace one.
func storeZSet(ks engine.Keyspace, w *Writer, dst []byte, out []values.ZElem) {
	if k := ks.Kind(dst); k != engine.KindNone && !k.IsData() {
		w.Error(ErrWrongType)
		return
	}
	if len(out) > values.MaxElements {
		w.Error(ErrTooMany)
		return
	}
	z := values.NewZSet()
	for _, e := range out {
		if _, err := z.Add(e.Member, storedScore(e.Score)); err != nil {
			w.Error(errorText(err))
			return
		}
	}
	ks.Delete(dst)
	if z.Len() == 0 {
		w.Int(0)
		return
	}
	e, err := ks.Create(dst, values.TypeZSet)
	if err != nil {
		w.Error(errorText(err))
		return
	}
	e.Obj = z
	ks.Changed(dst)
	w.Int(int64(z.Len()))
}
