package kv

import (
	"bytes"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Sorted-set commands, with Redis 7.0's replies and errors. Members are
// ordered by score, then by their bytes; an emptied sorted set is
// deleted. A score of -0 is stored as 0, as Redis's small (listpack)
// sorted sets store it.

func init() {
	zsetSpec := oneKeySpec("sorted-set")
	var (
		roFast = []string{"readonly", "fast"}
		ro     = []string{"readonly"}
		wDenyF = []string{"write", "denyoom", "fast"}
		wFast  = []string{"write", "fast"}
		wr     = []string{"write"}
		aclRF  = []string{"@read", "@sortedset", "@fast"}
		aclRS  = []string{"@read", "@sortedset", "@slow"}
		aclWF  = []string{"@write", "@sortedset", "@fast"}
		aclWS  = []string{"@write", "@sortedset", "@slow"}
	)
	rangeRun := func(rt zrangeType, dir zrangeDir) func(c *Cmd, ks engine.Keyspace, w *Writer) {
		return func(c *Cmd, ks engine.Keyspace, w *Writer) { zrangeGeneric(c.Args, ks, w, rt, dir, nil) }
	}
	register(
		zsetSpec("zadd", -4, wDenyF, aclWF, "1.2.0", "Add one or more members to a sorted set, or update its score if it already exists",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { zadd(c, ks, w, false) }),
		zsetSpec("zincrby", 4, wDenyF, aclWF, "1.2.0", "Increment the score of a member in a sorted set",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { zadd(c, ks, w, true) }),
		zsetSpec("zrem", -3, wFast, aclWF, "1.2.0", "Remove one or more members from a sorted set", zrem),
		zsetSpec("zcard", 2, roFast, aclRF, "1.2.0", "Get the number of members in a sorted set", zcard),
		zsetSpec("zcount", 4, roFast, aclRF, "2.0.0", "Count the members in a sorted set with scores within the given values", zcount),
		zsetSpec("zscore", 3, roFast, aclRF, "1.2.0", "Get the score associated with the given member in a sorted set", zscore),
		zsetSpec("zmscore", -3, roFast, aclRF, "6.2.0", "Get the score associated with the given members in a sorted set", zmscore),
		zsetSpec("zrank", -3, roFast, aclRF, "2.0.0", "Determine the index of a member in a sorted set",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { zrank(c, ks, w, false) }),
		zsetSpec("zrevrank", -3, roFast, aclRF, "2.0.0", "Determine the index of a member in a sorted set, with scores ordered from high to low",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { zrank(c, ks, w, true) }),
		zsetSpec("zrange", -4, ro, aclRS, "1.2.0", "Return a range of members in a sorted set", rangeRun(zrAuto, zrDirAuto)),
		zsetSpec("zrangebyscore", -4, ro, aclRS, "1.0.5", "Return a range of members in a sorted set, by score", rangeRun(zrScore, zrForward)),
		zsetSpec("zrevrangebyscore", -4, ro, aclRS, "2.2.0", "Return a range of members in a sorted set, by score, with scores ordered from high to low", rangeRun(zrScore, zrReverse)),
		zsetSpec("zrevrange", -4, ro, aclRS, "1.2.0", "Return a range of members in a sorted set, by index, with scores ordered from high to low", rangeRun(zrRank, zrReverse)),
		zsetSpec("zremrangebyscore", 4, wr, aclWS, "1.2.0", "Remove all members in a sorted set within the given scores", zremrangebyscore),
		zsetSpec("zremrangebyrank", 4, wr, aclWS, "2.0.0", "Remove all members in a sorted set within the given indexes", zremrangebyrank),
	)
}

// lookupZSet returns key's sorted set, nil when the key is missing, or
// the error text (WRONGTYPE) when it holds another kind.
func lookupZSet(ks engine.Keyspace, key []byte) (*values.ZSet, string) {
	return lookupObj[*values.ZSet](ks, key)
}

// storedScore is the score a sorted set keeps for s: -0 becomes 0.
func storedScore(s float64) float64 {
	if s == 0 {
		return 0
	}
	return s
}

// zadd is ZADD and ZINCRBY (ZADD INCR with no other option), as Redis's
// zaddGenericCommand: options, then every score parsed, then the key.
func zadd(c *Cmd, ks engine.Keyspace, w *Writer, zincrby bool) {
	var nx, xx, gt, lt, ch, incr bool
	incr = zincrby
	args := c.Args
	i := 2
	for ; i < len(args); i++ {
		switch a := args[i]; {
		case is(a, "nx"):
			nx = true
		case is(a, "xx"):
			xx = true
		case is(a, "ch"):
			ch = true
		case is(a, "incr"):
			incr = true
		case is(a, "gt"):
			gt = true
		case is(a, "lt"):
			lt = true
		default:
			goto parsed
		}
	}
parsed:
	pairs := args[i:]
	if len(pairs)%2 != 0 || len(pairs) == 0 {
		w.Error(ErrSyntax)
		return
	}
	switch {
	case nx && xx:
		w.Error(ErrZAddXXNX)
		return
	case (gt && nx) || (lt && nx) || (gt && lt):
		w.Error(ErrZAddGTLTNX)
		return
	case incr && len(pairs) > 2:
		w.Error(ErrZAddIncrPair)
		return
	}
	scores := make([]float64, len(pairs)/2)
	for j := range scores {
		s, ok := parseScore(pairs[2*j])
		if !ok {
			w.Error(ErrNotFloat)
			return
		}
		scores[j] = s
	}
	key := args[1]
	z, msg := lookupZSet(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if z == nil && xx {
		if incr {
			w.Nil()
		} else {
			w.Int(0)
		}
		return
	}
	if msg := zsetRoom(z, pairs, xx); msg != "" {
		w.Error(msg)
		return
	}
	if z == nil {
		e, err := ks.Create(key, values.TypeZSet)
		if err != nil {
			w.Error(errorText(err))
			return
		}
		z = e.Obj.(*values.ZSet)
	}
	var added, updated, processed int
	var score float64
	for j, s := range scores {
		m := pairs[2*j+1]
		cur, had := z.Score(m)
		switch {
		case had:
			if nx {
				continue
			}
			if incr {
				s += cur
				if math.IsNaN(s) {
					if added+updated > 0 {
						ks.Changed(key)
					}
					w.Error(ErrZScoreNaN)
					return
				}
			}
			if (lt && s >= cur) || (gt && s <= cur) {
				continue
			}
			if s != cur {
				z.Add(m, storedScore(s))
				updated++
			}
		case xx:
			continue
		default:
			z.Add(m, storedScore(s))
			added++
		}
		processed++
		score = s
	}
	if added+updated > 0 {
		ks.Changed(key)
	}
	switch {
	case incr && processed > 0:
		w.Double(score)
	case incr:
		w.Nil()
	case ch:
		w.Int(int64(added + updated))
	default:
		w.Int(int64(added))
	}
}

// zsetRoom is the error text when adding the (score, member) pairs to z
// (nil: a new set) would break a bound, or "".
func zsetRoom(z *values.ZSet, pairs [][]byte, xx bool) string {
	n := 0
	if z != nil {
		n = z.Len()
	}
	var fresh map[string]struct{}
	for j := 1; j < len(pairs); j += 2 {
		m := pairs[j]
		if len(m) > values.MaxElementLen {
			return errorText(values.ErrElementTooLong)
		}
		if xx {
			continue
		}
		if z != nil {
			if _, ok := z.Score(m); ok {
				continue
			}
		}
		if len(pairs) > 2 {
			if fresh == nil {
				fresh = make(map[string]struct{})
			}
			if _, dup := fresh[string(m)]; dup {
				continue
			}
			fresh[string(m)] = struct{}{}
		}
		n++
	}
	if n > values.MaxElements {
		return errorText(values.ErrTooMany)
	}
	return ""
}

func zrem(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	z, ok := lookupOrZero[*values.ZSet](ks, w, key)
	if !ok {
		return
	}
	n := 0
	for _, m := range c.Args[2:] {
		if z.Rem(m) {
			n++
			if z.Len() == 0 {
				break
			}
		}
	}
	zsetWritten(ks, key, z, n)
	w.Int(int64(n))
}

// zsetWritten records that n members left key's set z: an empty set is
// deleted.
func zsetWritten(ks engine.Keyspace, key []byte, z *values.ZSet, n int) {
	switch {
	case z.Len() == 0:
		ks.Delete(key)
	case n > 0:
		ks.Changed(key)
	}
}

func zcard(c *Cmd, ks engine.Keyspace, w *Writer) {
	if z, ok := lookupOrZero[*values.ZSet](ks, w, c.Args[1]); ok {
		w.Int(int64(z.Len()))
	}
}

func zscore(c *Cmd, ks engine.Keyspace, w *Writer) {
	z, msg := lookupZSet(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if z != nil {
		if s, ok := z.Score(c.Args[2]); ok {
			w.Double(s)
			return
		}
	}
	w.Nil()
}

func zmscore(c *Cmd, ks engine.Keyspace, w *Writer) {
	z, msg := lookupZSet(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	w.Array(len(c.Args) - 2)
	for _, m := range c.Args[2:] {
		if z != nil {
			if s, ok := z.Score(m); ok {
				w.Double(s)
				continue
			}
		}
		w.Nil()
	}
}

// zrank is ZRANK and ZREVRANK key member [WITHSCORE] (WITHSCORE as in
// Redis 7.2: [rank, score]).
func zrank(c *Cmd, ks engine.Keyspace, w *Writer, rev bool) {
	withScore := false
	switch {
	case len(c.Args) > 4:
		w.Error(ErrSyntax)
		return
	case len(c.Args) == 4:
		if !is(c.Args[3], "withscore") {
			w.Error(ErrSyntax)
			return
		}
		withScore = true
	}
	z, msg := lookupZSet(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if z != nil {
		if r, ok := z.Rank(c.Args[2]); ok {
			score := z.Elems()[r].Score
			if rev {
				r = z.Len() - 1 - r
			}
			if withScore {
				w.Array(2)
				w.Int(int64(r))
				w.Double(score)
				return
			}
			w.Int(int64(r))
			return
		}
	}
	if withScore {
		w.NilArray()
		return
	}
	w.Nil()
}

// rankRange is the ranks start to end (negative: from the end) of a
// sorted set of n members, clamped to the set, as ZRANGE and
// ZREMRANGEBYRANK read them; false when no member is in the range.
func rankRange(start, end, n int64) (int64, int64, bool) {
	if start < 0 {
		start += n
	}
	if end < 0 {
		end += n
	}
	start = max(start, 0)
	if start > end || start >= n {
		return 0, 0, false
	}
	return start, min(end, n-1), true
}

// scoreRange is a range of scores, as ZRANGEBYSCORE's min and max.
type scoreRange struct {
	min, max     float64
	minex, maxex bool // exclusive ("(")
}

// parseScoreRange parses min and max as Redis's zslParseRange.
func parseScoreRange(min, max []byte) (scoreRange, bool) {
	var r scoreRange
	var ok1, ok2 bool
	r.min, r.minex, ok1 = parseRangeBound(min)
	r.max, r.maxex, ok2 = parseRangeBound(max)
	return r, ok1 && ok2
}

// bounds is the ranks [lo, hi) of z's members in the range.
func (r scoreRange) bounds(z *values.ZSet) (lo, hi int) {
	lo = z.FirstAbove(r.min, !r.minex)
	hi = z.FirstAbove(r.max, r.maxex)
	return lo, max(hi, lo)
}

// parseRangeBound parses one bound as zslParseRange does with strtod: a
// leading "(" makes it exclusive; leading spaces, an empty text (0) and
// out-of-range values (infinities, 0) pass; NaN and trailing bytes do not.
func parseRangeBound(b []byte) (f float64, ex, ok bool) {
	if len(b) > 0 && b[0] == '(' {
		ex = true
		b = b[1:]
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i] // strtod reads a C string
	}
	if len(b) == 0 {
		return 0, ex, true // strtod converts nothing and stops at the NUL
	}
	i := 0
	for i < len(b) && hzIsSpace(b[i]) {
		i++
	}
	f, ok, _ = strtodAll(string(b[i:]))
	if !ok || math.IsNaN(f) {
		return 0, false, false
	}
	return f, ex, true
}

// parseScore parses a score as Redis's getDoubleFromObject: all of b is
// one number for strtod, with no leading space, not NaN, neither
// overflowing nor underflowing to zero.
func parseScore(b []byte) (float64, bool) {
	if len(b) == 0 || hzIsSpace(b[0]) {
		return 0, false
	}
	f, ok, outOfRange := strtodAll(string(b))
	if !ok || outOfRange || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}

// strtodAll parses all of s as C's strtod reads one number (decimal or
// hexadecimal, inf, infinity, nan, any case, optional sign): ok is false
// when s is anything else; outOfRange when the value overflows (then f is
// an infinity) or underflows to zero (f is 0), where strtod sets ERANGE.
func strtodAll(s string) (f float64, ok, outOfRange bool) {
	if s == "" || strings.IndexByte(s, '_') >= 0 {
		return 0, false, false
	}
	body := s
	if body[0] == '+' || body[0] == '-' {
		body = body[1:]
	}
	hex := len(body) >= 2 && body[0] == '0' && (body[1]|0x20) == 'x'
	if hex && !strings.ContainsAny(body, "pP") {
		s += "p0" // strtod's hexadecimal exponent is optional, Go's is not
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		if ne, _ := err.(*strconv.NumError); ne != nil && ne.Err == strconv.ErrRange {
			return f, true, true
		}
		return 0, false, false
	}
	if f == 0 {
		// Go returns 0 without an error when a value underflows.
		mant := body
		if hex {
			mant = mant[2:]
			if i := strings.IndexAny(mant, "pP"); i >= 0 {
				mant = mant[:i]
			}
		} else if i := strings.IndexAny(mant, "eE"); i >= 0 {
			mant = mant[:i]
		}
		if strings.Trim(mant, "0.") != "" {
			return 0, true, true
		}
	}
	return f, true, false
}

// lexBound is one end of a ZRANGE BYLEX range.
type lexBound struct {
	v   []byte
	inf int8 // -1: "-" (below every member), 1: "+" (above every member)
	ex  bool
}

// parseLexBound parses "-", "+", "(member" or "[member".
func parseLexBound(b []byte) (lexBound, bool) {
	if len(b) == 0 {
		return lexBound{}, false
	}
	switch b[0] {
	case '-', '+':
		if len(b) != 1 {
			return lexBound{}, false
		}
		if b[0] == '-' {
			return lexBound{inf: -1, ex: true}, true
		}
		return lexBound{inf: 1, ex: true}, true
	case '(':
		return lexBound{v: b[1:], ex: true}, true
	case '[':
		return lexBound{v: b[1:]}, true
	}
	return lexBound{}, false
}

// cmpLex compares two bounds as Redis's sdscmplex.
func cmpLex(a, b lexBound) int {
	switch {
	case a.inf == b.inf && a.inf != 0:
		return 0
	case a.inf == -1 || b.inf == 1:
		return -1
	case a.inf == 1 || b.inf == -1:
		return 1
	}
	return bytes.Compare(a.v, b.v)
}

type lexRange struct{ min, max lexBound }

func (r lexRange) empty() bool {
	c := cmpLex(r.min, r.max)
	return c > 0 || (c == 0 && (r.min.ex || r.max.ex))
}

func (r lexRange) gteMin(m []byte) bool {
	c := cmpLex(lexBound{v: m}, r.min)
	return c > 0 || (c == 0 && !r.min.ex)
}

func (r lexRange) lteMax(m []byte) bool {
	c := cmpLex(lexBound{v: m}, r.max)
	return c < 0 || (c == 0 && !r.max.ex)
}

type zrangeType uint8

const (
	zrAuto zrangeType = iota
	zrRank
	zrScore
	zrLex
)

type zrangeDir uint8

const (
	zrDirAuto zrangeDir = iota
	zrForward
	zrReverse
)

// zrangeGeneric is ZRANGE and its older forms (ZRANGEBYSCORE,
// ZREVRANGEBYSCORE, ZREVRANGE: a range type or direction fixed), as
// Redis's zrangeGenericCommand: args are the command's (the key at 1).
// With dst set it is ZRANGESTORE, args its own from the destination on
// (the source at 1): the range replaces dst (an empty one deletes it) and
// the reply is its size; WITHSCORES is then a syntax error.
func zrangeGeneric(args [][]byte, ks engine.Keyspace, w *Writer, rt zrangeType, dir zrangeDir, dst []byte) {
	withScores := false
	offset, limit := int64(0), int64(-1)
	for j := 4; j < len(args); j++ {
		left := len(args) - j - 1
		switch a := args[j]; {
		case dst == nil && is(a, "withscores"):
			withScores = true
		case is(a, "limit") && left >= 2:
			var ok bool
			if offset, ok = values.ParseInt(args[j+1]); !ok {
				w.Error(ErrNotInteger)
				return
			}
			if limit, ok = values.ParseInt(args[j+2]); !ok {
				w.Error(ErrNotInteger)
				return
			}
			j += 2
		case dir == zrDirAuto && is(a, "rev"):
			dir = zrReverse
		case rt == zrAuto && is(a, "bylex"):
			rt = zrLex
		case rt == zrAuto && is(a, "byscore"):
			rt = zrScore
		default:
			w.Error(ErrSyntax)
			return
		}
	}
	if dir == zrDirAuto {
		dir = zrForward
	}
	if rt == zrAuto {
		rt = zrRank
	}
	if limit != -1 && rt == zrRank {
		w.Error(ErrLimitByRank)
		return
	}
	if withScores && rt == zrLex {
		w.Error(ErrScoresByLex)
		return
	}
	minArg, maxArg := args[2], args[3]
	rev := dir == zrReverse
	if rev && rt != zrRank {
		minArg, maxArg = maxArg, minArg // given as max, min
	}
	var (
		start, end int64
		sr         scoreRange
		lr         lexRange
		ok         bool
	)
	switch rt {
	case zrRank:
		if start, ok = values.ParseInt(minArg); !ok {
			w.Error(ErrNotInteger)
			return
		}
		if end, ok = values.ParseInt(maxArg); !ok {
			w.Error(ErrNotInteger)
			return
		}
	case zrScore:
		if sr, ok = parseScoreRange(minArg, maxArg); !ok {
			w.Error(ErrMinMaxFloat)
			return
		}
	case zrLex:
		var ok1, ok2 bool
		lr.min, ok1 = parseLexBound(minArg)
		lr.max, ok2 = parseLexBound(maxArg)
		if !ok1 || !ok2 {
			w.Error(ErrMinMaxLex)
			return
		}
	}
	z, msg := lookupZSet(ks, args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if z == nil {
		if dst != nil {
			storeZSet(ks, w, dst, nil)
			return
		}
		w.Array(0)
		return
	}
	elems := z.Elems()
	n := int64(len(elems))
	// from is the rank of the first member to reply, step +1 or -1, and
	// count the number of members; stop, when set, ends the run early.
	var from, count int64
	var stop func(m []byte) bool
	switch rt {
	case zrRank:
		if start, end, ok = rankRange(start, end, n); !ok {
			break
		}
		count = end - start + 1
		from = start
		if rev {
			from = n - 1 - start
		}
	case zrScore:
		lo, hi := sr.bounds(z)
		if offset < 0 || (offset > 0 && offset >= n) {
			break
		}
		if rev {
			from = int64(hi) - 1 - offset
			count = from - int64(lo) + 1
		} else {
			from = int64(lo) + offset
			count = int64(hi) - from
		}
	case zrLex:
		if lr.empty() || n == 0 || offset < 0 || (offset > 0 && offset >= n) {
			break
		}
		if !lr.gteMin(elems[n-1].Member) || !lr.lteMax(elems[0].Member) {
			break
		}
		first := int64(-1)
		if rev {
			for i := n - 1; i >= 0; i-- {
				if lr.lteMax(elems[i].Member) {
					if lr.gteMin(elems[i].Member) {
						first = i
					}
					break
				}
			}
			if first < 0 {
				break
			}
			from = first - offset
			count = from + 1
			stop = func(m []byte) bool { return !lr.gteMin(m) }
		} else {
			for i := range n {
				if lr.gteMin(elems[i].Member) {
					if lr.lteMax(elems[i].Member) {
						first = i
					}
					break
				}
			}
			if first < 0 {
				break
			}
			from = first + offset
			count = n - from
			stop = func(m []byte) bool { return !lr.lteMax(m) }
		}
	}
	count = max(count, 0)
	if limit >= 0 {
		count = min(count, limit)
	}
	step := int64(1)
	if rev {
		step = -1
	}
	if stop != nil {
		k := int64(0)
		for ; k < count && !stop(elems[from+k*step].Member); k++ {
		}
		count = k
	}
	if dst != nil {
		out := make([]values.ZElem, count)
		for k := range count {
			out[k] = elems[from+k*step]
		}
		if rev {
			slices.Reverse(out)
		}
		storeZSet(ks, w, dst, out)
		return
	}
	if withScores && !w.RESP3 {
		w.Array(int(2 * count))
	} else {
		w.Array(int(count))
	}
	for k := range count {
		e := &elems[from+k*step]
		if withScores && w.RESP3 {
			w.Array(2)
		}
		w.Bulk(e.Member)
		if withScores {
			w.Double(e.Score)
		}
	}
}

func zcount(c *Cmd, ks engine.Keyspace, w *Writer) {
	r, ok := parseScoreRange(c.Args[2], c.Args[3])
	if !ok {
		w.Error(ErrMinMaxFloat)
		return
	}
	if z, ok := lookupOrZero[*values.ZSet](ks, w, c.Args[1]); ok {
		lo, hi := r.bounds(z)
		w.Int(int64(hi - lo))
	}
}

func zremrangebyscore(c *Cmd, ks engine.Keyspace, w *Writer) {
	r, ok := parseScoreRange(c.Args[2], c.Args[3])
	if !ok {
		w.Error(ErrMinMaxFloat)
		return
	}
	key := c.Args[1]
	z, ok := lookupOrZero[*values.ZSet](ks, w, key)
	if !ok {
		return
	}
	lo, hi := r.bounds(z)
	n := z.RemoveRange(lo, hi)
	zsetWritten(ks, key, z, n)
	w.Int(int64(n))
}

func zremrangebyrank(c *Cmd, ks engine.Keyspace, w *Writer) {
	start, ok1 := values.ParseInt(c.Args[2])
	end, ok2 := values.ParseInt(c.Args[3])
	if !ok1 || !ok2 {
		w.Error(ErrNotInteger)
		return
	}
	key := c.Args[1]
	z, ok := lookupOrZero[*values.ZSet](ks, w, key)
	if !ok {
		return
	}
	start, end, ok = rankRange(start, end, int64(z.Len()))
	if !ok {
		w.Int(0)
		return
	}
	removed := z.RemoveRange(int(start), int(end)+1)
	zsetWritten(ks, key, z, removed)
	w.Int(int64(removed))
}

// hzIsSpace is C's isspace.
func hzIsSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
