package kv

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Hash commands, with Redis 7.0's replies and errors. A hash replies its
// fields in insertion order, as Redis's small (listpack) hashes do; an
// emptied hash is deleted.

func init() {
	hashSpec := func(name string, arity int, flags, acl []string, since, summary string,
		run func(c *Cmd, ks engine.Keyspace, w *Writer)) *Spec {
		return &Spec{Name: name, Arity: arity, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: flags, ACL: acl, Group: "hash", Since: since, Summary: summary, run: run}
	}
	var (
		roFast  = []string{"readonly", "fast"}
		ro      = []string{"readonly"}
		wDenyF  = []string{"write", "denyoom", "fast"}
		wFast   = []string{"write", "fast"}
		aclRF   = []string{"@read", "@hash", "@fast"}
		aclRS   = []string{"@read", "@hash", "@slow"}
		aclWF   = []string{"@write", "@hash", "@fast"}
		hsetRun = func(c *Cmd, ks engine.Keyspace, w *Writer) { hset(c, ks, w, false) }
	)
	register(
		hashSpec("hget", 3, roFast, aclRF, "2.0.0", "Get the value of a hash field", hget),
		hashSpec("hmget", -3, roFast, aclRF, "2.0.0", "Get the values of all the given hash fields", hmget),
		hashSpec("hset", -4, wDenyF, aclWF, "2.0.0", "Set the string value of a hash field", hsetRun),
		hashSpec("hmset", -4, wDenyF, aclWF, "2.0.0", "Set multiple hash fields to multiple values",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { hset(c, ks, w, true) }),
		hashSpec("hsetnx", 4, wDenyF, aclWF, "2.0.0", "Set the value of a hash field, only if the field does not exist", hsetnx),
		hashSpec("hdel", -3, wFast, aclWF, "2.0.0", "Delete one or more hash fields", hdel),
		hashSpec("hgetall", 2, ro, aclRS, "2.0.0", "Get all the fields and values in a hash",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { hgetall(c, ks, w, true, true) }),
		hashSpec("hkeys", 2, ro, aclRS, "2.0.0", "Get all the fields in a hash",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { hgetall(c, ks, w, true, false) }),
		hashSpec("hvals", 2, ro, aclRS, "2.0.0", "Get all the values in a hash",
			func(c *Cmd, ks engine.Keyspace, w *Writer) { hgetall(c, ks, w, false, true) }),
		hashSpec("hexists", 3, roFast, aclRF, "2.0.0", "Determine if a hash field exists", hexists),
		hashSpec("hlen", 2, roFast, aclRF, "2.0.0", "Get the number of fields in a hash", hlen),
		hashSpec("hstrlen", 3, roFast, aclRF, "3.2.0", "Get the length of the value of a hash field", hstrlen),
		hashSpec("hincrby", 4, wDenyF, aclWF, "2.0.0", "Increment the integer value of a hash field by the given number", hincrby),
		hashSpec("hincrbyfloat", 4, wDenyF, aclWF, "2.6.0", "Increment the float value of a hash field by the given amount", hincrbyfloat),
	)
}

// lookupHash returns key's hash, nil when the key is missing, or the
// error text (WRONGTYPE) when it holds another kind.
func lookupHash(ks engine.Keyspace, key []byte) (*values.Hash, string) {
	e, err := ks.Get(key)
	if err != nil {
		return nil, errorText(err)
	}
	if e == nil {
		return nil, ""
	}
	h, ok := e.Obj.(*values.Hash)
	if !ok {
		return nil, ErrWrongType
	}
	return h, ""
}

// createHash adds key, which must be missing, holding an empty hash.
func createHash(ks engine.Keyspace, key []byte) (*values.Hash, string) {
	e, err := ks.Create(key, values.TypeHash)
	if err != nil {
		return nil, errorText(err)
	}
	return e.Obj.(*values.Hash), ""
}

func hget(c *Cmd, ks engine.Keyspace, w *Writer) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if h != nil {
		if v, ok := h.Get(c.Args[2]); ok {
			w.Bulk(v)
			return
		}
	}
	w.Nil()
}

func hmget(c *Cmd, ks engine.Keyspace, w *Writer) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	w.Array(len(c.Args) - 2)
	for _, f := range c.Args[2:] {
		if h != nil {
			if v, ok := h.Get(f); ok {
				w.Bulk(v)
				continue
			}
		}
		w.Nil()
	}
}

// hset is HSET (the count of new fields) and HMSET (+OK): every pair is
// checked against the bounds before any is written.
func hset(c *Cmd, ks engine.Keyspace, w *Writer, hmset bool) {
	if len(c.Args)%2 == 1 {
		w.Error(hzWrongArgs(c.spec.Name))
		return
	}
	key := c.Args[1]
	h, msg := lookupHash(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	pairs := c.Args[2:]
	if msg := hashRoom(h, pairs); msg != "" {
		w.Error(msg)
		return
	}
	if h == nil {
		if h, msg = createHash(ks, key); msg != "" {
			w.Error(msg)
			return
		}
	}
	added := 0
	for i := 0; i < len(pairs); i += 2 {
		if isNew, _ := h.Set(pairs[i], pairs[i+1]); isNew {
			added++
		}
	}
	ks.Changed(key)
	if hmset {
		w.OK()
		return
	}
	w.Int(int64(added))
}

// hashRoom is the error text when setting pairs (field, value, ...) on h
// (nil: a new hash) would break a bound, or "".
func hashRoom(h *values.Hash, pairs [][]byte) string {
	n := 0
	if h != nil {
		n = h.Len()
	}
	var fresh map[string]struct{}
	for i := 0; i+1 < len(pairs); i += 2 {
		f, v := pairs[i], pairs[i+1]
		if len(f) > values.MaxElementLen || len(v) > values.MaxElementLen {
			return errorText(values.ErrElementTooLong)
		}
		if h != nil {
			if _, ok := h.Get(f); ok {
				continue
			}
		}
		if len(pairs) > 2 {
			if fresh == nil {
				fresh = make(map[string]struct{})
			}
			if _, dup := fresh[string(f)]; dup {
				continue
			}
			fresh[string(f)] = struct{}{}
		}
		n++
	}
	if n > values.MaxElements {
		return errorText(values.ErrTooMany)
	}
	return ""
}

func hsetnx(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	h, msg := lookupHash(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if h != nil {
		if _, ok := h.Get(c.Args[2]); ok {
			w.Int(0)
			return
		}
	}
	if msg := hashRoom(h, c.Args[2:4]); msg != "" {
		w.Error(msg)
		return
	}
	if h == nil {
		if h, msg = createHash(ks, key); msg != "" {
			w.Error(msg)
			return
		}
	}
	h.Set(c.Args[2], c.Args[3])
	ks.Changed(key)
	w.Int(1)
}

func hdel(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	h, msg := lookupHash(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if h == nil {
		w.Int(0)
		return
	}
	n := 0
	for _, f := range c.Args[2:] {
		if h.Del(f) {
			n++
			if h.Len() == 0 {
				break
			}
		}
	}
	if h.Len() == 0 {
		ks.Delete(key)
	} else if n > 0 {
		ks.Changed(key)
	}
	w.Int(int64(n))
}

// hgetall is HGETALL (fields and values, a map in RESP3), HKEYS and HVALS.
func hgetall(c *Cmd, ks engine.Keyspace, w *Writer, fields, vals bool) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	n := 0
	if h != nil {
		n = h.Len()
	}
	if fields && vals {
		w.Map(n)
	} else {
		w.Array(n)
	}
	if h == nil {
		return
	}
	h.Each(func(k, v []byte) {
		if fields {
			w.Bulk(k)
		}
		if vals {
			w.Bulk(v)
		}
	})
}

func hexists(c *Cmd, ks engine.Keyspace, w *Writer) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if h != nil {
		if _, ok := h.Get(c.Args[2]); ok {
			w.Int(1)
			return
		}
	}
	w.Int(0)
}

func hlen(c *Cmd, ks engine.Keyspace, w *Writer) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if h == nil {
		w.Int(0)
		return
	}
	w.Int(int64(h.Len()))
}

func hstrlen(c *Cmd, ks engine.Keyspace, w *Writer) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	var n int
	if h != nil {
		v, _ := h.Get(c.Args[2])
		n = len(v)
	}
	w.Int(int64(n))
}

// hashIncr stores the text v under field in key's hash h (nil: create
// the key), checking the bounds first; it returns the error text or "".
func hashIncr(ks engine.Keyspace, key []byte, h *values.Hash, field, v []byte) string {
	if msg := hashRoom(h, [][]byte{field, v}); msg != "" {
		return msg
	}
	if h == nil {
		var msg string
		if h, msg = createHash(ks, key); msg != "" {
			return msg
		}
	}
	h.Set(field, v)
	ks.Changed(key)
	return ""
}

func hincrby(c *Cmd, ks engine.Keyspace, w *Writer) {
	key, field := c.Args[1], c.Args[2]
	incr, ok := values.ParseInt(c.Args[3])
	if !ok {
		w.Error(ErrNotInteger)
		return
	}
	h, msg := lookupHash(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	var cur int64
	if h != nil {
		if v, ok := h.Get(field); ok {
			if cur, ok = values.ParseInt(v); !ok {
				w.Error(ErrHashNotInt)
				return
			}
		}
	}
	if (incr < 0 && cur < 0 && incr < math.MinInt64-cur) ||
		(incr > 0 && cur > 0 && incr > math.MaxInt64-cur) {
		w.Error(ErrOverflow)
		return
	}
	n := cur + incr
	var buf [20]byte
	if msg := hashIncr(ks, key, h, field, strconv.AppendInt(buf[:0], n, 10)); msg != "" {
		w.Error(msg)
		return
	}
	w.Int(n)
}

func hincrbyfloat(c *Cmd, ks engine.Keyspace, w *Writer) {
	key, field := c.Args[1], c.Args[2]
	incr, ok := hzParseLongDouble(c.Args[3])
	if !ok {
		w.Error(ErrNotFloat)
		return
	}
	if incr.IsInf() {
		w.Error(ErrIncrNaNOrInf)
		return
	}
	h, msg := lookupHash(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	cur := new(big.Float).SetPrec(hzLDPrec)
	if h != nil {
		if v, ok := h.Get(field); ok {
			if cur, ok = hzParseLongDouble(v); !ok {
				w.Error(ErrHashNotFloat)
				return
			}
		}
	}
	if cur.IsInf() {
		w.Error(ErrNaN)
		return
	}
	sum := new(big.Float).SetPrec(hzLDPrec).Add(cur, incr)
	if !hzLongDoubleFinite(sum) {
		w.Error(ErrNaN)
		return
	}
	text := hzFormatLongDouble(sum)
	if msg := hashIncr(ks, key, h, field, text); msg != "" {
		w.Error(msg)
		return
	}
	w.Bulk(text)
}

// Redis's HINCRBYFLOAT (and INCRBYFLOAT) computes in C's long double: on
// x86-64, the x87 80-bit format with a 64-bit significand and a 15-bit
// exponent. It is emulated with big.Float at precision 64: parsing rounds
// the exact decimal value once (as strtold does), the sum rounds once (as
// the FPU does), and the reply is the exact value printed "%.17Lf" with
// its trailing zeros cut. Subnormal long doubles keep 64 bits here (they
// never arise from values a limiter stores).
const (
	hzLDPrec   = 64
	hzLDMaxExp = 16384  // |x| < 2**16384
	hzLDMinExp = -16444 // the smallest subnormal is 2**-16445
	hzLDMaxLen = 5 * 1024
)

// hzLongDoubleFinite reports whether x is finite in the long double range.
func hzLongDoubleFinite(x *big.Float) bool {
	return !x.IsInf() && (x.Sign() == 0 || x.MantExp(nil) <= hzLDMaxExp)
}

// hzParseLongDouble parses b as Redis's string2ld: the whole text as strtold
// reads it, no leading space, neither NaN nor out of range (an infinity
// written as such is accepted).
func hzParseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= hzLDMaxLen {
		return nil, false
	}
	z := new(big.Float).SetPrec(hzLDPrec)
	if hzIsSpace(b[0]) {
		return nil, false
	}
	s := string(b)
	neg := false
	body := s
	if body != "" && (body[0] == '+' || body[0] == '-') {
		neg = body[0] == '-'
		body = body[1:]
	}
	switch lower := strings.ToLower(body); {
	case lower == "inf" || lower == "infinity":
		return z.SetInf(neg), true
	case strings.HasPrefix(lower, "nan"):
		return nil, false
	case strings.HasPrefix(lower, "0x"):
		if strings.ContainsAny(body, "_") || len(body) == 2 {
			return nil, false
		}
		if !strings.ContainsAny(body, "pP") {
			s += "p0"
		}
		if _, _, err := z.Parse(s, 0); err != nil {
			return nil, false
		}
	default:
		r, ok := hzParseDecimal(body)
		if !ok {
			return nil, false
		}
		if r == nil {
			return nil, false // out of range
		}
		z.SetRat(r)
		if neg {
			z.Neg(z)
		}
	}
	if z.Sign() != 0 {
		exp := z.MantExp(nil)
		if exp > hzLDMaxExp || exp < hzLDMinExp {
			return nil, false // ERANGE: overflow or underflow
		}
	}
	if neg && z.Sign() == 0 {
		z.Neg(z)
	}
	return z, true
}

// hzParseDecimal parses unsigned decimal digits with an optional point and
// exponent exactly; nil with ok true when the value is far out of the
// long double range.
func hzParseDecimal(s string) (*big.Rat, bool) {
	var mant []byte
	digits, exp := 0, 0
	i := 0
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		digits++
		mant = append(mant, s[i])
	}
	if i < len(s) && s[i] == '.' {
		i++
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			digits++
			mant = append(mant, s[i])
			exp--
		}
	}
	if digits == 0 {
		return nil, false
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		if i == len(s) {
			return nil, false
		}
		e := 0
		for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
			if e < 1_000_000 {
				e = e*10 + int(s[i]-'0')
			}
		}
		if eneg {
			e = -e
		}
		exp += e
	}
	if i != len(s) {
		return nil, false
	}
	mant = bytes.TrimLeft(mant, "0")
	if len(mant) == 0 {
		return new(big.Rat), true
	}
	// The value is about 10**(exp+len(mant)).
	if mag := exp + len(mant); mag > 4940 || mag < -4960 {
		return nil, true
	}
	m, _ := new(big.Int).SetString(string(mant), 10)
	p := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(hzAbs(exp))), nil)
	if exp >= 0 {
		return new(big.Rat).SetInt(m.Mul(m, p)), true
	}
	return new(big.Rat).SetFrac(m, p), true
}

func hzAbs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

// hzFormatLongDouble writes x as Redis's ld2string(LD_STR_HUMAN): "%.17Lf"
// without trailing zeros (nor a trailing point), and "0" for "-0".
func hzFormatLongDouble(x *big.Float) []byte {
	b := x.Append(nil, 'f', 17)
	if bytes.IndexByte(b, '.') >= 0 {
		b = bytes.TrimRight(b, "0")
		b = bytes.TrimSuffix(b, []byte("."))
	}
	if string(b) == "-0" {
		b = []byte("0")
	}
	return b
}

// hzIsSpace is C's isspace.
func hzIsSpace(c byte) bool {
	return c == ' ' || (c >= '\t' && c <= '\r')
}
