package kv

import (
	"math"
	"strconv"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Hash commands, with Redis 7.0's replies and errors. A hash replies its
// fields in insertion order, as Redis's small (listpack) hashes do; an
// emptied hash is deleted.

func init() {
	hashSpec := oneKeySpec("hash")
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
	return lookupObj[*values.Hash](ks, key)
}

// hashGet is field's value in h (nil: a missing key).
func hashGet(h *values.Hash, field []byte) ([]byte, bool) {
	if h == nil {
		return nil, false
	}
	return h.Get(field)
}

// createHash adds key, which must be missing, holding an empty hash.
func createHash(ks engine.Keyspace, key []byte) (*values.Hash, string) {
	e, err := ks.Create(key, values.TypeHash)
	if err != nil {
		return nil, errorText(err)
	}
	return e.Obj.(*values.Hash), ""
}

// hashField is the value of field c.Args[2] in key c.Args[1]'s hash and
// whether the field is there; ok is false after replying the error
// (WRONGTYPE): HGET, HEXISTS and HSTRLEN.
func hashField(c *Cmd, ks engine.Keyspace, w *Writer) (v []byte, found, ok bool) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return nil, false, false
	}
	v, found = hashGet(h, c.Args[2])
	return v, found, true
}

func hget(c *Cmd, ks engine.Keyspace, w *Writer) {
	switch v, found, ok := hashField(c, ks, w); {
	case !ok:
	case found:
		w.Bulk(v)
	default:
		w.Nil()
	}
}

func hmget(c *Cmd, ks engine.Keyspace, w *Writer) {
	h, msg := lookupHash(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	w.Array(len(c.Args) - 2)
	for _, f := range c.Args[2:] {
		if v, ok := hashGet(h, f); ok {
			w.Bulk(v)
			continue
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
	added, msg := hashSet(ks, key, h, c.Args[2:])
	if msg != "" {
		w.Error(msg)
		return
	}
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
	for i := 0; i+1 < len(pairs); i += 2 {
		if len(pairs[i]) > values.MaxElementLen || len(pairs[i+1]) > values.MaxElementLen {
			return errorText(values.ErrElementTooLong)
		}
	}
	if n+len(pairs)/2 <= values.MaxElements {
		return "" // room even if every field is new
	}
	var fresh map[string]struct{}
	for i := 0; i+1 < len(pairs); i += 2 {
		f := pairs[i]
		if _, ok := hashGet(h, f); ok {
			continue
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
	if _, ok := hashGet(h, c.Args[2]); ok {
		w.Int(0)
		return
	}
	if _, msg := hashSet(ks, key, h, c.Args[2:4]); msg != "" {
		w.Error(msg)
		return
	}
	w.Int(1)
}

func hdel(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	h, ok := lookupOrZero[*values.Hash](ks, w, key)
	if !ok {
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
	switch _, found, ok := hashField(c, ks, w); {
	case !ok:
	case found:
		w.Int(1)
	default:
		w.Int(0)
	}
}

func hlen(c *Cmd, ks engine.Keyspace, w *Writer) {
	if h, ok := lookupOrZero[*values.Hash](ks, w, c.Args[1]); ok {
		w.Int(int64(h.Len()))
	}
}

func hstrlen(c *Cmd, ks engine.Keyspace, w *Writer) {
	if v, _, ok := hashField(c, ks, w); ok {
		w.Int(int64(len(v)))
	}
}

// hashSet sets the pairs (field, value, ...) in key's hash h (nil:
// create the key), checking the bounds first; it returns the number of
// new fields, or the error text.
func hashSet(ks engine.Keyspace, key []byte, h *values.Hash, pairs [][]byte) (int, string) {
	if msg := hashRoom(h, pairs); msg != "" {
		return 0, msg
	}
	if h == nil {
		var msg string
		if h, msg = createHash(ks, key); msg != "" {
			return 0, msg
		}
	}
	added := 0
	for i := 0; i+1 < len(pairs); i += 2 {
		if isNew, _ := h.Set(pairs[i], pairs[i+1]); isNew {
			added++
		}
	}
	ks.Changed(key)
	return added, ""
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
	if v, ok := hashGet(h, field); ok {
		if cur, ok = values.ParseInt(v); !ok {
			w.Error(ErrHashNotInt)
			return
		}
	}
	if (incr < 0 && cur < 0 && incr < math.MinInt64-cur) ||
		(incr > 0 && cur > 0 && incr > math.MaxInt64-cur) {
		w.Error(ErrOverflow)
		return
	}
	n := cur + incr
	var buf [20]byte
	if _, msg := hashSet(ks, key, h, [][]byte{field, strconv.AppendInt(buf[:0], n, 10)}); msg != "" {
		w.Error(msg)
		return
	}
	w.Int(n)
}

func hincrbyfloat(c *Cmd, ks engine.Keyspace, w *Writer) {
	key, field := c.Args[1], c.Args[2]
	incr, ok := parseLongDouble(c.Args[3])
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
	cur := newLongDouble()
	if v, ok := hashGet(h, field); ok {
		if cur, ok = parseLongDouble(v); !ok {
			w.Error(ErrHashNotFloat)
			return
		}
	}
	text, ok := addLongDouble(cur, incr)
	if !ok {
		w.Error(ErrNaN)
		return
	}
	if _, msg := hashSet(ks, key, h, [][]byte{field, text}); msg != "" {
		w.Error(msg)
		return
	}
	w.Bulk(text)
}
