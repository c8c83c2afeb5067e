package kv

import (
	"math"
	"strconv"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// The rest of the sorted-set, hash and string families that Redis 7.0's
// test units use: the BYLEX commands, ZPOPMIN/ZPOPMAX and their blocking
// and multi-key forms, ZRANDMEMBER, HRANDFIELD, GETRANGE, SUBSTR and
// SETRANGE. Random picks use randFor (set.go): replicas agree. Blocking
// forms answer as the non-blocking ones when there is something to pop,
// and a null array otherwise, as inside MULTI (list.go).

// Texts of these commands' errors. ErrLongRange is Redis's reply to a
// count of -2^63 where it takes -LONG_MAX to LONG_MAX (SRANDMEMBER,
// ZRANDMEMBER, HRANDFIELD).
const (
	ErrOffsetRange = "ERR offset is out of range"
	ErrValueRange  = "ERR value is out of range"
	ErrLongRange   = "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
)

// maxPicks bounds a random pick with repeats (a negative count), which
// Redis does not bound: past it SRANDMEMBER, ZRANDMEMBER and HRANDFIELD
// answer ErrValueRange (when the key exists: a missing key's reply is
// empty, as Redis's).
const maxPicks = int64(values.MaxElements) * 100

func init() {
	zsetSpec := oneKeySpec("sorted-set")
	var (
		ro     = []string{"readonly"}
		roFast = []string{"readonly", "fast"}
		wr     = []string{"write"}
		wFast  = []string{"write", "fast"}
		aclRS  = []string{"@read", "@sortedset", "@slow"}
		aclRF  = []string{"@read", "@sortedset", "@fast"}
		aclWS  = []string{"@write", "@sortedset", "@slow"}
		aclWF  = []string{"@write", "@sortedset", "@fast"}
	)
	rangeRun := func(rt zrangeType, dir zrangeDir) func(c *Cmd, ks engine.Keyspace, w *Writer) {
		return func(c *Cmd, ks engine.Keyspace, w *Writer) { zrangeGeneric(c.Args, ks, w, rt, dir, nil) }
	}
	zpop := func(max bool) func(*Cmd, engine.Keyspace, *Writer) {
		return func(c *Cmd, ks engine.Keyspace, w *Writer) { zpopCmd(c, ks, w, max) }
	}
	register(
		zsetSpec("zrangebylex", -4, ro, aclRS, "2.8.9", "Return a range of members in a sorted set, by lexicographical range", rangeRun(zrLex, zrForward)),
		zsetSpec("zrevrangebylex", -4, ro, aclRS, "2.8.9", "Return a range of members in a sorted set, by lexicographical range, ordered from higher to lower strings.", rangeRun(zrLex, zrReverse)),
		zsetSpec("zlexcount", 4, roFast, aclRF, "2.8.9", "Count the number of members in a sorted set between a given lexicographical range", zlexcount),
		zsetSpec("zremrangebylex", 4, wr, aclWS, "2.8.9", "Remove all members in a sorted set between the given lexicographical range", zremrangebylex),
		zsetSpec("zpopmin", -2, wFast, aclWF, "5.0.0", "Remove and return members with the lowest scores in a sorted set", zpop(false)),
		zsetSpec("zpopmax", -2, wFast, aclWF, "5.0.0", "Remove and return members with the highest scores in a sorted set", zpop(true)),
		&Spec{Name: "bzpopmin", Arity: -3, FirstKey: 1, LastKey: -2, KeyStep: 1, Flags: []string{"write", "noscript", "blocking", "fast"},
			ACL: []string{"@write", "@sortedset", "@fast", "@blocking"}, Group: "sorted-set", Since: "5.0.0",
			Summary: "Remove and return the member with the lowest score from one or more sorted sets, or block until one is available", run: zpop(false)},
		&Spec{Name: "bzpopmax", Arity: -3, FirstKey: 1, LastKey: -2, KeyStep: 1, Flags: []string{"write", "noscript", "blocking", "fast"},
			ACL: []string{"@write", "@sortedset", "@fast", "@blocking"}, Group: "sorted-set", Since: "5.0.0",
			Summary: "Remove and return the member with the highest score from one or more sorted sets, or block until one is available", run: zpop(true)},
		&Spec{Name: "zmpop", Arity: -4, NumKeysAt: 1, Flags: []string{"write", "movablekeys"}, ACL: aclWS, Group: "sorted-set",
			Since: "7.0.0", Summary: "Remove and return members with scores in a sorted set", run: zmpop},
		&Spec{Name: "bzmpop", Arity: -5, NumKeysAt: 2, Flags: []string{"write", "blocking", "movablekeys"},
			ACL: []string{"@write", "@sortedset", "@slow", "@blocking"}, Group: "sorted-set", Since: "7.0.0",
			Summary: "Remove and return members with scores in a sorted set or block until one is available", run: zmpop},
		zsetSpec("zrandmember", -2, ro, aclRS, "6.2.0", "Get one or multiple random elements from a sorted set", zrandmember),
		&Spec{Name: "hrandfield", Arity: -2, FirstKey: 1, LastKey: 1, KeyStep: 1, Flags: ro,
			ACL: []string{"@read", "@hash", "@slow"}, Group: "hash", Since: "6.2.0",
			Summary: "Get one or multiple random fields from a hash", run: hrandfield},
		&Spec{Name: "getrange", Arity: 4, FirstKey: 1, LastKey: 1, KeyStep: 1, Flags: ro,
			ACL: []string{"@read", "@string", "@slow"}, Group: "string", Since: "2.4.0",
			Summary: "Get a substring of the string stored at a key", run: getrange},
		&Spec{Name: "substr", Arity: 4, FirstKey: 1, LastKey: 1, KeyStep: 1, Flags: ro,
			ACL: []string{"@read", "@string", "@slow"}, Group: "string", Since: "1.0.0",
			Summary: "Get a substring of the string stored at a key", run: getrange},
		&Spec{Name: "setrange", Arity: 4, FirstKey: 1, LastKey: 1, KeyStep: 1, Flags: []string{"write", "denyoom"},
			ACL: []string{"@write", "@string", "@slow"}, Group: "string", Since: "2.2.0",
			Summary: "Overwrite part of a string at key starting at the specified offset", run: setrange},
	)
}

// lexRanks parses a BYLEX range and returns the ranks [lo, hi) of z's
// members in it, or the error text.
func lexRanks(z *values.ZSet, minArg, maxArg []byte) (lo, hi int, msg string) {
	var lr lexRange
	var ok1, ok2 bool
	lr.min, ok1 = parseLexBound(minArg)
	lr.max, ok2 = parseLexBound(maxArg)
	if !ok1 || !ok2 {
		return 0, 0, ErrMinMaxLex
	}
	if z == nil || lr.empty() {
		return 0, 0, ""
	}
	elems := z.Elems()
	// Redis first checks the set's ends against the range (its
	// zslIsInLexRange), which matters when scores differ.
	if len(elems) == 0 || !lr.gteMin(elems[len(elems)-1].Member) || !lr.lteMax(elems[0].Member) {
		return 0, 0, ""
	}
	for lo < len(elems) && !lr.gteMin(elems[lo].Member) {
		lo++
	}
	hi = lo
	for hi < len(elems) && lr.lteMax(elems[hi].Member) {
		hi++
	}
	return lo, hi, ""
}

func zlexcount(c *Cmd, ks engine.Keyspace, w *Writer) {
	if _, _, msg := lexRanks(nil, c.Args[2], c.Args[3]); msg != "" {
		w.Error(msg)
		return
	}
	if z, ok := lookupOrZero[*values.ZSet](ks, w, c.Args[1]); ok {
		lo, hi, _ := lexRanks(z, c.Args[2], c.Args[3])
		w.Int(int64(hi - lo))
	}
}

func zremrangebylex(c *Cmd, ks engine.Keyspace, w *Writer) {
	if _, _, msg := lexRanks(nil, c.Args[2], c.Args[3]); msg != "" {
		w.Error(msg)
		return
	}
	key := c.Args[1]
	z, ok := lookupOrZero[*values.ZSet](ks, w, key)
	if !ok {
		return
	}
	lo, hi, _ := lexRanks(z, c.Args[2], c.Args[3])
	n := z.RemoveRange(lo, hi)
	zsetWritten(ks, key, z, n)
	w.Int(int64(n))
}

// popZ removes up to n members from z's low (or high) end, in pop order.
func popZ(z *values.ZSet, high bool, n int) []values.ZElem {
	n = min(n, z.Len())
	elems := z.Elems()
	out := make([]values.ZElem, 0, n)
	for i := range n {
		e := elems[i]
		if high {
			e = elems[len(elems)-1-i]
		}
		out = append(out, values.ZElem{Score: e.Score, Member: append([]byte(nil), e.Member...)})
	}
	if high {
		z.RemoveRange(z.Len()-n, z.Len())
	} else {
		z.RemoveRange(0, n)
	}
	return out
}

// writePairs writes members with their scores: nested [member, score]
// arrays, or flat pairs.
func writePairs(w *Writer, out []values.ZElem, nested bool) {
	if nested {
		w.Array(len(out))
	} else {
		w.Array(2 * len(out))
	}
	for _, e := range out {
		if nested {
			w.Array(2)
		}
		w.Bulk(e.Member)
		w.Double(e.Score)
	}
}

// zpopCmd is ZPOPMIN/ZPOPMAX key [count] and BZPOPMIN/BZPOPMAX key...
// timeout, as Redis's genericZpopCommand.
func zpopCmd(c *Cmd, ks engine.Keyspace, w *Writer, high bool) {
	blocking := c.spec.Name[0] == 'b'
	keys := c.Args[1:2]
	count := int64(-1)
	if blocking {
		if msg := parseTimeout(c.Args[len(c.Args)-1], ks.Now()); msg != "" {
			w.Error(msg)
			return
		}
		keys = c.Args[1 : len(c.Args)-1]
	} else {
		if len(c.Args) > 3 {
			w.Error(ErrSyntax)
			return
		}
		if len(c.Args) == 3 {
			n, ok := values.ParseInt(c.Args[2])
			if !ok || n < 0 {
				w.Error(ErrRangePositive)
				return
			}
			count = n
		}
	}
	for _, key := range keys {
		z, msg := lookupZSet(ks, key)
		if msg != "" {
			w.Error(msg)
			return
		}
		if z == nil {
			continue
		}
		if count == 0 {
			w.Array(0)
			return
		}
		out := popZ(z, high, int(max(count, 1)))
		zsetWritten(ks, key, z, len(out))
		if blocking {
			w.Array(3)
			w.Bulk(key)
			w.Bulk(out[0].Member)
			w.Double(out[0].Score)
			return
		}
		writePairs(w, out, w.RESP3 && count != -1)
		return
	}
	if blocking {
		w.NilArray()
		return
	}
	w.Array(0)
}

// zmpop is ZMPOP numkeys key... MIN|MAX [COUNT n] and BZMPOP timeout
// numkeys ...: [key, [[member, score]...]] of the first non-empty set.
func zmpop(c *Cmd, ks engine.Keyspace, w *Writer) {
	at := c.spec.NumKeysAt
	blocking := at == 2
	if blocking {
		if msg := parseTimeout(c.Args[1], ks.Now()); msg != "" {
			w.Error(msg)
			return
		}
	}
	n, msg := parseNumKeys(c.Args, at)
	if msg != "" {
		w.Error(msg)
		return
	}
	whereAt := at + n + 1
	if whereAt >= len(c.Args) {
		w.Error(ErrSyntax)
		return
	}
	var high bool
	switch {
	case is(c.Args[whereAt], "min"):
	case is(c.Args[whereAt], "max"):
		high = true
	default:
		w.Error(ErrSyntax)
		return
	}
	count := int64(-1)
	for j := whereAt + 1; j < len(c.Args); j++ {
		if count == -1 && is(c.Args[j], "count") && j+1 < len(c.Args) {
			j++
			v, ok := values.ParseInt(c.Args[j])
			if !ok || v < 1 {
				w.Error(ErrCountPositive)
				return
			}
			count = v
			continue
		}
		w.Error(ErrSyntax)
		return
	}
	for _, key := range c.Args[at+1 : whereAt] {
		z, msg := lookupZSet(ks, key)
		if msg != "" {
			w.Error(msg)
			return
		}
		if z == nil {
			continue
		}
		out := popZ(z, high, int(max(count, 1)))
		zsetWritten(ks, key, z, len(out))
		w.Array(2)
		w.Bulk(key)
		writePairs(w, out, true)
		return
	}
	w.NilArray()
}

// randCount parses a random pick's count and option (WITHSCORES,
// WITHVALUES) in Redis 7.0's order (the count, the option, the count's
// range with the option): count, whether members may repeat, whether
// the option was given, or the error text.
func randCount(args [][]byte, option string) (count int64, uniq, with bool, msg string) {
	l, ok := values.ParseInt(args[2])
	switch {
	case !ok:
		return 0, false, false, ErrNotInteger
	case l == math.MinInt64:
		return 0, false, false, ErrLongRange
	case len(args) > 4 || (len(args) == 4 && !is(args[3], option)):
		return 0, false, false, ErrSyntax
	}
	with = len(args) == 4
	if with && (l < -math.MaxInt64/2 || l > math.MaxInt64/2) {
		return 0, false, false, ErrValueRange
	}
	if l >= 0 {
		return l, true, with, ""
	}
	return -l, false, with, ""
}

// randIndexes picks count positions among n: distinct (uniq) in random
// order unless count >= n (then all, in order), or with repeats.
func randIndexes(ks engine.Keyspace, key []byte, n int, count int64, uniq bool) []int {
	rng := randFor(ks, key)
	if uniq && count >= int64(n) {
		out := make([]int, n)
		for i := range out {
			out[i] = i
		}
		return out
	}
	if uniq {
		return rng.Perm(n)[:count]
	}
	out := make([]int, count)
	for i := range out {
		out[i] = rng.IntN(n)
	}
	return out
}

func zrandmember(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	if len(c.Args) == 2 {
		z, msg := lookupZSet(ks, key)
		switch {
		case msg != "":
			w.Error(msg)
		case z == nil:
			w.Nil()
		default:
			w.Bulk(z.Elems()[randFor(ks, key).IntN(z.Len())].Member)
		}
		return
	}
	count, uniq, with, msg := randCount(c.Args, "withscores")
	if msg != "" {
		w.Error(msg)
		return
	}
	z, msg := lookupZSet(ks, key)
	switch {
	case msg != "":
		w.Error(msg)
		return
	case z == nil || count == 0:
		w.Array(0)
		return
	case !uniq && count > maxPicks:
		w.Error(ErrValueRange)
		return
	}
	elems := z.Elems()
	idx := randIndexes(ks, key, len(elems), count, uniq)
	out := make([]values.ZElem, len(idx))
	for i, j := range idx {
		out[i] = elems[j]
	}
	if with {
		writePairs(w, out, w.RESP3)
		return
	}
	w.Array(len(out))
	for _, e := range out {
		w.Bulk(e.Member)
	}
}

func hrandfield(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	h, msg := lookupHash(ks, key)
	if msg != "" && len(c.Args) == 2 {
		w.Error(msg)
		return
	}
	var fields, vals [][]byte
	if h != nil {
		h.Each(func(k, v []byte) { fields, vals = append(fields, k), append(vals, v) })
	}
	if len(c.Args) == 2 {
		if h == nil {
			w.Nil()
			return
		}
		w.Bulk(fields[randFor(ks, key).IntN(len(fields))])
		return
	}
	count, uniq, with, perr := randCount(c.Args, "withvalues")
	switch {
	case perr != "":
		w.Error(perr)
		return
	case msg != "":
		w.Error(msg)
		return
	case h == nil || count == 0:
		w.Array(0)
		return
	case !uniq && count > maxPicks:
		w.Error(ErrValueRange)
		return
	}
	idx := randIndexes(ks, key, len(fields), count, uniq)
	switch {
	case with && w.RESP3:
		w.Array(len(idx))
	case with:
		w.Array(2 * len(idx))
	default:
		w.Array(len(idx))
	}
	for _, i := range idx {
		if with && w.RESP3 {
			w.Array(2)
		}
		w.Bulk(fields[i])
		if with {
			w.Bulk(vals[i])
		}
	}
}

// stringBytes is a string entry's value as bytes.
func stringBytes(e *values.Entry) []byte {
	if e.Obj == nil {
		return strconv.AppendInt(nil, e.Int, 10)
	}
	return e.Obj.(*values.Str).B
}

// getrange is GETRANGE and SUBSTR, as Redis 7.0's getrangeCommand.
func getrange(c *Cmd, ks engine.Keyspace, w *Writer) {
	start, ok1 := values.ParseInt(c.Args[2])
	end, ok2 := values.ParseInt(c.Args[3])
	if !ok1 || !ok2 {
		w.Error(ErrNotInteger)
		return
	}
	e, msg := getString(ks, c.Args[1])
	switch {
	case msg != "":
		w.Error(msg)
		return
	case e == nil:
		w.BulkString("")
		return
	}
	b := stringBytes(e)
	n := int64(len(b))
	if start < 0 && end < 0 && start > end {
		w.BulkString("")
		return
	}
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start, end = max(start, 0), max(end, 0)
	end = min(end, n-1)
	if start > end || n == 0 {
		w.BulkString("")
		return
	}
	w.Bulk(b[start : end+1])
}

// setrange is SETRANGE key offset value: zero bytes pad a string shorter
// than offset; the result is bounded by values.MaxValueLen.
func setrange(c *Cmd, ks engine.Keyspace, w *Writer) {
	key, val := c.Args[1], c.Args[3]
	off, ok := values.ParseInt(c.Args[2])
	if !ok {
		w.Error(ErrNotInteger)
		return
	}
	if off < 0 {
		w.Error(ErrOffsetRange)
		return
	}
	e, msg := getString(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if e == nil && len(val) == 0 {
		w.Int(0)
		return
	}
	var cur []byte
	if e != nil {
		cur = stringBytes(e)
	}
	if len(val) == 0 {
		w.Int(int64(len(cur)))
		return
	}
	if off > values.MaxValueLen-int64(len(val)) { // not off+len: it may overflow
		w.Error(ErrTooLong)
		return
	}
	need := int(off) + len(val)
	b := append([]byte(nil), cur...)
	if len(b) < need {
		b = append(b, make([]byte, need-len(b))...)
	}
	copy(b[off:], val)
	if e == nil {
		var err error
		if e, err = ks.Create(key, values.TypeString); err != nil {
			w.Error(errorText(err))
			return
		}
	}
	// Stored raw even when it reads as an integer, as Redis's SETRANGE
	// leaves it (OBJECT ENCODING says "raw").
	e.Int, e.Obj = 0, &values.Str{B: b, Raw: true}
	ks.Changed(key)
	w.Int(int64(len(b)))
}
