package kv

import (
	"hash/fnv"
	"math"
	"math/rand/v2"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Set commands, with Redis 7.0's replies and errors. Members reply in
// the order Redis 7.0's encodings give (values.Set.Ordered): ascending
// for a set of integers, insertion order otherwise, where Redis's
// hashtable order is arbitrary. An emptied set is deleted.
//
// SPOP and SRANDMEMBER pick with a generator seeded from the command's
// stamped time and its key (randFor), so every replica that applies the
// command from the Raft log picks the same members.

func init() {
	setSpec := oneKeySpec("set")
	var (
		wDenyF = []string{"write", "denyoom", "fast"}
		wFast  = []string{"write", "fast"}
		wDeny  = []string{"write", "denyoom"}
		roFast = []string{"readonly", "fast"}
		ro     = []string{"readonly"}
		aclWF  = []string{"@write", "@set", "@fast"}
		aclWS  = []string{"@write", "@set", "@slow"}
		aclRF  = []string{"@read", "@set", "@fast"}
		aclRS  = []string{"@read", "@set", "@slow"}
	)
	multi := func(name string, arity int, flags, acl []string, since, summary string, op setOp, store bool) *Spec {
		return &Spec{Name: name, Arity: arity, FirstKey: 1, LastKey: -1, KeyStep: 1, Flags: flags, ACL: acl,
			Group: "set", Since: since, Summary: summary,
			run: func(c *Cmd, ks engine.Keyspace, w *Writer) { setAlgebra(c, ks, w, op, store) }}
	}
	smove := setSpec("smove", 4, wFast, aclWF, "1.0.0", "Move a member from one set to another", smoveCmd)
	smove.LastKey = 2
	register(
		setSpec("sadd", -3, wDenyF, aclWF, "1.0.0", "Add one or more members to a set", sadd),
		setSpec("srem", -3, wFast, aclWF, "1.0.0", "Remove one or more members from a set", srem),
		setSpec("smembers", 2, ro, aclRS, "1.0.0", "Get all the members in a set", smembers),
		setSpec("sismember", 3, roFast, aclRF, "1.0.0", "Determine if a given value is a member of a set", sismember),
		setSpec("smismember", -3, roFast, aclRF, "6.2.0", "Returns the membership associated with the given elements for a set", smismember),
		setSpec("scard", 2, roFast, aclRF, "1.0.0", "Get the number of members in a set", scard),
		setSpec("spop", -2, wFast, aclWF, "1.0.0", "Remove and return one or multiple random members from a set", spop),
		setSpec("srandmember", -2, ro, aclRS, "1.0.0", "Get one or multiple random members from a set", srandmember),
		smove,
		multi("sinter", -2, ro, aclRS, "1.0.0", "Intersect multiple sets", opInter, false),
		multi("sinterstore", -3, wDeny, aclWS, "1.0.0", "Intersect multiple sets and store the resulting set in a key", opInter, true),
		multi("sunion", -2, ro, aclRS, "1.0.0", "Add multiple sets", opUnion, false),
		multi("sunionstore", -3, wDeny, aclWS, "1.0.0", "Add multiple sets and store the resulting set in a key", opUnion, true),
		multi("sdiff", -2, ro, aclRS, "1.0.0", "Subtract multiple sets", opDiff, false),
		multi("sdiffstore", -3, wDeny, aclWS, "1.0.0", "Subtract multiple sets and store the resulting set in a key", opDiff, true),
		&Spec{Name: "sintercard", Arity: -3, NumKeysAt: 1, Flags: []string{"readonly", "movablekeys"}, ACL: aclRS,
			Group: "set", Since: "7.0.0", Summary: "Intersect multiple sets and return the cardinality of the result", run: sintercard},
	)
}

// ErrLimitNegative and ErrNumKeysArgs are SINTERCARD's texts.
const (
	ErrLimitNegative = "ERR LIMIT can't be negative"
	ErrNumKeysArgs   = "ERR Number of keys can't be greater than number of args"
)

func lookupSet(ks engine.Keyspace, key []byte) (*values.Set, string) {
	return lookupObj[*values.Set](ks, key)
}

// randFor is the generator of a random pick on key: seeded from the
// stamped time and the key, so replicas agree.
func randFor(ks engine.Keyspace, key []byte) *rand.Rand {
	h := fnv.New64a()
	h.Write(key)
	return rand.New(rand.NewPCG(uint64(ks.Now()), h.Sum64()))
}

func sadd(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	s, msg := lookupSet(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	// Check the bounds before any change.
	fresh := map[string]bool{}
	for _, m := range c.Args[2:] {
		if len(m) > values.MaxElementLen {
			w.Error(ErrListSetElemLong)
			return
		}
		if s == nil || !s.Has(m) {
			fresh[string(m)] = true
		}
	}
	n := len(fresh)
	if s != nil {
		n += s.Len()
	}
	if n > values.MaxElements {
		w.Error(ErrListSetTooMany)
		return
	}
	if s == nil {
		e, err := ks.Create(key, values.TypeSet)
		if err != nil {
			w.Error(errorText(err))
			return
		}
		s = e.Obj.(*values.Set)
	}
	added := int64(0)
	for _, m := range c.Args[2:] {
		if ok, _ := s.Add(m); ok {
			added++
		}
	}
	if added > 0 {
		ks.Changed(key)
	}
	w.Int(added)
}

func srem(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	s, ok := lookupOrZero[*values.Set](ks, w, key)
	if !ok {
		return
	}
	n := int64(0)
	for _, m := range c.Args[2:] {
		if s.Rem(m) {
			n++
		}
	}
	if n > 0 {
		deleteIfEmpty(ks, key, s.Len())
	}
	w.Int(n)
}

func writeSet(w *Writer, members [][]byte) {
	w.SetHeader(len(members))
	for _, m := range members {
		w.Bulk(m)
	}
}

func smembers(c *Cmd, ks engine.Keyspace, w *Writer) {
	s, msg := lookupSet(ks, c.Args[1])
	switch {
	case msg != "":
		w.Error(msg)
	case s == nil:
		w.SetHeader(0)
	default:
		writeSet(w, s.Ordered())
	}
}

func sismember(c *Cmd, ks engine.Keyspace, w *Writer) {
	if s, ok := lookupOrZero[*values.Set](ks, w, c.Args[1]); ok {
		if s.Has(c.Args[2]) {
			w.Int(1)
		} else {
			w.Int(0)
		}
	}
}

func smismember(c *Cmd, ks engine.Keyspace, w *Writer) {
	s, msg := lookupSet(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	w.Array(len(c.Args) - 2)
	for _, m := range c.Args[2:] {
		if s != nil && s.Has(m) {
			w.Int(1)
		} else {
			w.Int(0)
		}
	}
}

func scard(c *Cmd, ks engine.Keyspace, w *Writer) {
	if s, ok := lookupOrZero[*values.Set](ks, w, c.Args[1]); ok {
		w.Int(int64(s.Len()))
	}
}

func spop(c *Cmd, ks engine.Keyspace, w *Writer) {
	if len(c.Args) > 3 {
		w.Error(ErrSyntax)
		return
	}
	key := c.Args[1]
	withCount := len(c.Args) == 3
	count := int64(1)
	if withCount {
		n, ok := values.ParseInt(c.Args[2])
		if !ok || n < 0 {
			w.Error(ErrRangePositive)
			return
		}
		count = n
	}
	s, msg := lookupSet(ks, key)
	switch {
	case msg != "":
		w.Error(msg)
		return
	case s == nil && withCount:
		w.SetHeader(0)
		return
	case s == nil:
		w.Nil()
		return
	case withCount && count == 0:
		w.SetHeader(0)
		return
	}
	rng := randFor(ks, key)
	var out [][]byte
	if withCount && count >= int64(s.Len()) {
		out = s.Ordered()
		ks.Delete(key)
	} else {
		for range count {
			i := rng.IntN(s.Len())
			out = append(out, s.Members()[i])
			s.RemoveAt(i)
		}
		deleteIfEmpty(ks, key, s.Len())
	}
	if !withCount {
		w.Bulk(out[0])
		return
	}
	writeSet(w, out)
}

func srandmember(c *Cmd, ks engine.Keyspace, w *Writer) {
	if len(c.Args) > 3 {
		w.Error(ErrSyntax)
		return
	}
	key := c.Args[1]
	if len(c.Args) == 2 {
		s, msg := lookupSet(ks, key)
		switch {
		case msg != "":
			w.Error(msg)
		case s == nil:
			w.Nil()
		default:
			w.Bulk(s.Members()[randFor(ks, key).IntN(s.Len())])
		}
		return
	}
	l, ok := values.ParseInt(c.Args[2])
	switch {
	case !ok:
		w.Error(ErrNotInteger)
		return
	case l == math.MinInt64:
		w.Error(ErrLongRange)
		return
	}
	uniq := l >= 0
	count := l
	if !uniq {
		count = -l
	}
	s, msg := lookupSet(ks, key)
	switch {
	case msg != "":
		w.Error(msg)
		return
	case s == nil || count == 0:
		w.Array(0)
		return
	}
	rng := randFor(ks, key)
	members := s.Members()
	if !uniq || count == 1 {
		if count > maxPicks {
			w.Error(ErrValueRange)
			return
		}
		w.Array(int(count))
		for range count {
			w.Bulk(members[rng.IntN(len(members))])
		}
		return
	}
	if count >= int64(len(members)) {
		writeArray(w, s.Ordered())
		return
	}
	perm := rng.Perm(len(members))[:count]
	w.Array(int(count))
	for _, i := range perm {
		w.Bulk(members[i])
	}
}

func writeArray(w *Writer, items [][]byte) {
	w.Array(len(items))
	for _, it := range items {
		w.Bulk(it)
	}
}

func smoveCmd(c *Cmd, ks engine.Keyspace, w *Writer) {
	srcKey, dstKey, m := c.Args[1], c.Args[2], c.Args[3]
	src, msg := lookupSet(ks, srcKey)
	if msg != "" {
		// Redis answers 0 for a missing source before it checks types.
		w.Error(msg)
		return
	}
	if src == nil {
		w.Int(0)
		return
	}
	dst, msg := lookupSet(ks, dstKey)
	if msg != "" {
		w.Error(msg)
		return
	}
	if src == dst {
		if src.Has(m) {
			w.Int(1)
		} else {
			w.Int(0)
		}
		return
	}
	if !src.Has(m) {
		w.Int(0)
		return
	}
	if dst != nil && !dst.Has(m) && dst.Len() >= values.MaxElements {
		w.Error(ErrListSetTooMany)
		return
	}
	if dst == nil {
		e, err := ks.Create(dstKey, values.TypeSet)
		if err != nil {
			w.Error(errorText(err))
			return
		}
		dst = e.Obj.(*values.Set)
	}
	dst.Add(m)
	src.Rem(m)
	deleteIfEmpty(ks, srcKey, src.Len())
	ks.Changed(dstKey)
	w.Int(1)
}

type setOp int

const (
	opInter setOp = iota
	opUnion
	opDiff
)

// setsOf looks up keys as sets (nil for a missing key), or returns
// WRONGTYPE's text.
func setsOf(ks engine.Keyspace, keys [][]byte) ([]*values.Set, string) {
	out := make([]*values.Set, len(keys))
	for i, k := range keys {
		s, msg := lookupSet(ks, k)
		if msg != "" {
			return nil, msg
		}
		out[i] = s
	}
	return out, ""
}

// combine computes the intersection, union or difference of sets, in
// the first (for an intersection, the smallest) set's order, then the
// others'. limit stops an intersection early (0: none).
func combine(op setOp, sets []*values.Set, limit int) [][]byte {
	var out [][]byte
	switch op {
	case opInter:
		small := -1
		for i, s := range sets {
			if s == nil {
				return nil
			}
			if small < 0 || s.Len() < sets[small].Len() {
				small = i
			}
		}
	next:
		for _, m := range sets[small].Ordered() {
			for i, s := range sets {
				if i != small && !s.Has(m) {
					continue next
				}
			}
			out = append(out, m)
			if limit > 0 && len(out) >= limit {
				break
			}
		}
	case opUnion:
		seen := map[string]bool{}
		for _, s := range sets {
			if s == nil {
				continue
			}
			for _, m := range s.Ordered() {
				if !seen[string(m)] {
					seen[string(m)] = true
					out = append(out, m)
				}
			}
		}
	case opDiff:
		if sets[0] == nil {
			return nil
		}
	member:
		for _, m := range sets[0].Ordered() {
			for _, s := range sets[1:] {
				if s != nil && s.Has(m) {
					continue member
				}
			}
			out = append(out, m)
		}
	}
	return out
}

// setAlgebra is SINTER, SUNION, SDIFF and their STORE forms.
func setAlgebra(c *Cmd, ks engine.Keyspace, w *Writer, op setOp, store bool) {
	keys := c.Args[1:]
	if store {
		keys = c.Args[2:]
	}
	sets, msg := setsOf(ks, keys)
	if msg != "" {
		w.Error(msg)
		return
	}
	out := combine(op, sets, 0)
	if !store {
		if op != opInter || len(out) == 0 {
			// Redis replies a union or difference as the new set's
			// iteration order; an intset's is ascending.
			out = orderLike(out)
		}
		writeSet(w, out)
		return
	}
	dst := c.Args[1]
	if k := ks.Kind(dst); k != engine.KindNone && !k.IsData() {
		w.Error(ErrWrongType) // limiter state is not replaced, as SET does not replace it
		return
	}
	if len(out) > values.MaxElements {
		w.Error(ErrListSetTooMany)
		return
	}
	ks.Delete(dst)
	if len(out) == 0 {
		w.Int(0)
		return
	}
	e, err := ks.Create(dst, values.TypeSet)
	if err != nil {
		w.Error(errorText(err))
		return
	}
	s := e.Obj.(*values.Set)
	for _, m := range out {
		s.Add(m)
	}
	w.Int(int64(s.Len()))
}

// orderLike is members in the order a set built from them replies.
func orderLike(members [][]byte) [][]byte {
	s := values.NewSet()
	for _, m := range members {
		s.Add(m)
	}
	return s.Ordered()
}

func sintercard(c *Cmd, ks engine.Keyspace, w *Writer) {
	n, msg := parseNumKeys(c.Args, 1)
	if msg != "" {
		w.Error(msg)
		return
	}
	if n > len(c.Args)-2 {
		w.Error(ErrNumKeysArgs)
		return
	}
	limit := int64(0)
	for j := 2 + n; j < len(c.Args); j++ {
		if is(c.Args[j], "limit") && j+1 < len(c.Args) {
			j++
			v, ok := values.ParseInt(c.Args[j])
			if !ok || v < 0 {
				w.Error(ErrLimitNegative)
				return
			}
			limit = v
			continue
		}
		w.Error(ErrSyntax)
		return
	}
	sets, msg := setsOf(ks, c.Args[2:2+n])
	if msg != "" {
		w.Error(msg)
		return
	}
	w.Int(int64(len(combine(opInter, sets, int(min(limit, math.MaxInt32))))))
}
