package kv

import (
	"math"
	"strconv"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// The string commands. A string holding an integer's canonical text is
// stored as the entry's Int (values.Entry.SetString), so INCR and its kin
// never allocate.
//
// Limiter keys: rlserver keeps limiter state (RL.*, GCRA...) apart from
// Redis's data values, and no string command reads or overwrites it. A
// command that would read it as a string or replace it (GET, SET, GETSET,
// INCR, APPEND, MSET...) replies WRONGTYPE; a command that only writes
// when the key is missing (SETNX, SET NX, MSETNX) sees it as an existing
// key and does not write; MGET reads it as nil, as it reads a hash.
//
// Times are the command's stamped time (Keyspace.Now, Unix ns), read in
// whole milliseconds as Redis reads mstime(): an expiry set here is a
// whole millisecond, so PEXPIRETIME and PTTL answer what Redis answers.

func init() {
	register(
		&Spec{Name: "get", Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"readonly", "fast"}, ACL: []string{"@read", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Get the value of a key", run: runGet},
		&Spec{Name: "set", Arity: -3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom"}, ACL: []string{"@write", "@string", "@slow"},
			Group: "string", Since: "1.0.0", Summary: "Set the string value of a key", run: runSet},
		&Spec{Name: "setnx", Arity: 3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Set the value of a key, only if the key does not exist", run: runSetNX},
		&Spec{Name: "setex", Arity: 4, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom"}, ACL: []string{"@write", "@string", "@slow"},
			Group: "string", Since: "2.0.0", Summary: "Set the value and expiration of a key", run: runSetEX(optEX)},
		&Spec{Name: "psetex", Arity: 4, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom"}, ACL: []string{"@write", "@string", "@slow"},
			Group: "string", Since: "2.6.0", Summary: "Set the value and expiration in milliseconds of a key", run: runSetEX(optPX)},
		&Spec{Name: "getset", Arity: 3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Set the string value of a key and return its old value", run: runGetSet},
		&Spec{Name: "getdel", Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "6.2.0", Summary: "Get the value of a key and delete the key", run: runGetDel},
		&Spec{Name: "getex", Arity: -2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "6.2.0", Summary: "Get the value of a key and optionally set its expiration", run: runGetEx},
		&Spec{Name: "mget", Arity: -2, FirstKey: 1, LastKey: -1, KeyStep: 1,
			Flags: []string{"readonly", "fast"}, ACL: []string{"@read", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Get the values of all the given keys", run: runMGet},
		&Spec{Name: "mset", Arity: -3, FirstKey: 1, LastKey: -1, KeyStep: 2,
			Flags: []string{"write", "denyoom"}, ACL: []string{"@write", "@string", "@slow"},
			Group: "string", Since: "1.0.1", Summary: "Set multiple keys to multiple values", run: runMSet},
		&Spec{Name: "msetnx", Arity: -3, FirstKey: 1, LastKey: -1, KeyStep: 2,
			Flags: []string{"write", "denyoom"}, ACL: []string{"@write", "@string", "@slow"},
			Group: "string", Since: "1.0.1", Summary: "Set multiple keys to multiple values, only if none of the keys exist", run: runMSetNX},
		&Spec{Name: "incr", Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Increment the integer value of a key by one", run: runIncr(1)},
		&Spec{Name: "decr", Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Decrement the integer value of a key by one", run: runIncr(-1)},
		&Spec{Name: "incrby", Arity: 3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Increment the integer value of a key by the given amount", run: runIncrBy(false)},
		&Spec{Name: "decrby", Arity: 3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "1.0.0", Summary: "Decrement the integer value of a key by the given number", run: runIncrBy(true)},
		&Spec{Name: "incrbyfloat", Arity: 3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "2.6.0", Summary: "Increment the float value of a key by the given amount", run: runIncrByFloat},
		&Spec{Name: "strlen", Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"readonly", "fast"}, ACL: []string{"@read", "@string", "@fast"},
			Group: "string", Since: "2.2.0", Summary: "Get the length of the value stored in a key", run: runStrlen},
		&Spec{Name: "append", Arity: 3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "denyoom", "fast"}, ACL: []string{"@write", "@string", "@fast"},
			Group: "string", Since: "2.0.0", Summary: "Append a value to a key", run: runAppend},
	)
}

const nanosPerMilli = int64(time.Millisecond)

// nowMillis is the command's time in Unix milliseconds (Redis's mstime()).
func nowMillis(ks engine.Keyspace) int64 { return ks.Now() / nanosPerMilli }

// millisToNanos converts an expiry in Unix ms to the entry's Unix ns.
// Redis accepts expiries up to the largest int64 of milliseconds; an entry
// holds nanoseconds, so an expiry after the year 2262 is refused.
func millisToNanos(ms int64) (int64, bool) {
	if ms > math.MaxInt64/nanosPerMilli {
		return 0, false
	}
	return ms * nanosPerMilli, true
}

// Options of SET and GETEX (Redis's OBJ_SET_* flags).
const (
	optNX = 1 << iota
	optXX
	optGET
	optKeepTTL
	optPersist
	optEX
	optPX
	optEXAT
	optPXAT
)

// parseStringOpts parses the options of SET (set) or GETEX (!set) as
// Redis's parseExtendedStringArgumentsOrReply: an option that conflicts
// with one before it, or one the command does not take, is a syntax
// error; a repeated option is not. It returns the flags and the expiry
// argument (nil without one).
func parseStringOpts(args [][]byte, set bool) (flags int, expire []byte, ok bool) {
	const expiries = optEX | optPX | optEXAT | optPXAT
	for j := 0; j < len(args); j++ {
		opt := args[j]
		hasNext := j+1 < len(args)
		var bit, conflicts int
		switch {
		case set && is(opt, "nx"):
			bit, conflicts = optNX, optXX
		case set && is(opt, "xx"):
			bit, conflicts = optXX, optNX
		case set && is(opt, "get"):
			bit = optGET
		case set && is(opt, "keepttl"):
			bit, conflicts = optKeepTTL, optPersist|expiries
		case !set && is(opt, "persist"):
			bit, conflicts = optPersist, optKeepTTL|expiries
		case is(opt, "ex"):
			bit, conflicts = optEX, optKeepTTL|optPersist|expiries&^optEX
		case is(opt, "px"):
			bit, conflicts = optPX, optKeepTTL|optPersist|expiries&^optPX
		case is(opt, "exat"):
			bit, conflicts = optEXAT, optKeepTTL|optPersist|expiries&^optEXAT
		case is(opt, "pxat"):
			bit, conflicts = optPXAT, optKeepTTL|optPersist|expiries&^optPXAT
		default:
			return 0, nil, false
		}
		if flags&conflicts != 0 {
			return 0, nil, false
		}
		if bit&expiries != 0 {
			if !hasNext {
				return 0, nil, false
			}
			j++
			expire = args[j]
		}
		flags |= bit
	}
	return flags, expire, true
}

// expireArg is the expiry (Unix ns) that arg sets under flags' unit
// (optEX, optPX, optEXAT or optPXAT), or the error reply, as Redis's
// getExpireMillisecondsOrReply: a count that is not positive, or that
// overflows once in milliseconds and added to now, is refused.
func expireArg(ks engine.Keyspace, name string, arg []byte, flags int) (int64, string) {
	ms, ok := values.ParseInt(arg)
	if !ok {
		return 0, ErrNotInteger
	}
	sec := flags&(optEX|optEXAT) != 0
	if ms <= 0 || sec && ms > math.MaxInt64/1000 {
		return 0, errInvalidExpire(name)
	}
	if sec {
		ms *= 1000
	}
	if flags&(optEX|optPX) != 0 {
		now := nowMillis(ks)
		if ms > math.MaxInt64-now {
			return 0, errInvalidExpire(name)
		}
		ms += now
	}
	ns, ok := millisToNanos(ms)
	if !ok {
		return 0, errInvalidExpire(name)
	}
	return ns, ""
}

// getString returns key's string entry (nil when missing), or the error
// reply when the key holds another type or limiter state.
func getString(ks engine.Keyspace, key []byte) (*values.Entry, string) {
	e, err := ks.Get(key)
	if err != nil {
		return nil, errorText(err)
	}
	if e != nil && e.Type() != values.TypeString {
		return nil, ErrWrongType
	}
	return e, ""
}

// stringOrNil returns key's string entry, or nil after replying the
// error (another type) or a nil (a missing key): GET and its kin.
func stringOrNil(ks engine.Keyspace, w *Writer, key []byte) *values.Entry {
	e, msg := getString(ks, key)
	switch {
	case msg != "":
		w.Error(msg)
		return nil
	case e == nil:
		w.Nil()
	}
	return e
}

// writeString writes a string entry's value as a bulk string.
func writeString(w *Writer, e *values.Entry) {
	if e.Obj == nil {
		w.BulkInt(e.Int)
		return
	}
	w.Bulk(e.Obj.(*values.Str).B)
}

// stringLen is the length of a string entry's value.
func stringLen(e *values.Entry) int {
	if e.Obj == nil {
		var buf [20]byte
		return len(strconv.AppendInt(buf[:0], e.Int, 10))
	}
	return len(e.Obj.(*values.Str).B)
}

// store sets key to the string val expiring at exp (Unix ns, 0: never);
// e is key's data entry, nil when missing. A value of another type is
// replaced (deleted, then created as a string); an expiry already due
// deletes the key, as Redis does.
//
// The engine refuses creation (ErrOOM) in no-create mode on every shard
// alike, so a command that creates a missing key before changing any
// other fails whole; replacing a hash or sorted set in that mode deletes
// it and then fails to create the string (the Keyspace has no way to
// change an entry's type in place).
func store(ks engine.Keyspace, key []byte, e *values.Entry, val []byte, exp int64) error {
	if exp != 0 && exp <= ks.Now() {
		if e != nil {
			ks.Delete(key)
		}
		return nil
	}
	if e != nil && e.Type() != values.TypeString {
		ks.Delete(key)
		e = nil
	}
	if e == nil {
		var err error
		if e, err = ks.Create(key, values.TypeString); err != nil {
			return err
		}
	}
	e.SetString(val)
	e.Expire = exp
	ks.Changed(key)
	return nil
}

func runGet(c *Cmd, ks engine.Keyspace, w *Writer) {
	if e := stringOrNil(ks, w, c.Args[1]); e != nil {
		writeString(w, e)
	}
}

func runSet(c *Cmd, ks engine.Keyspace, w *Writer) {
	flags, exp, ok := parseStringOpts(c.Args[3:], true)
	if !ok {
		w.Error(ErrSyntax)
		return
	}
	setGeneric(ks, w, "set", c.Args[1], c.Args[2], flags, exp, false)
}

func runSetNX(c *Cmd, ks engine.Keyspace, w *Writer) {
	setGeneric(ks, w, "setnx", c.Args[1], c.Args[2], optNX, nil, true)
}

func runSetEX(unit int) func(c *Cmd, ks engine.Keyspace, w *Writer) {
	return func(c *Cmd, ks engine.Keyspace, w *Writer) {
		setGeneric(ks, w, c.spec.Name, c.Args[1], c.Args[3], unit, c.Args[2], false)
	}
}

func runGetSet(c *Cmd, ks engine.Keyspace, w *Writer) {
	setGeneric(ks, w, "getset", c.Args[1], c.Args[2], optGET, nil, false)
}

// setGeneric is Redis's setGenericCommand: SET with flags and expiry
// argument expArg (nil: none). It replies +OK when it sets and a nil when
// NX or XX stops it, or, with ints (SETNX), 1 and 0; with optGET it
// replies the old value instead.
func setGeneric(ks engine.Keyspace, w *Writer, name string, key, val []byte, flags int, expArg []byte, ints bool) {
	var exp int64
	if expArg != nil {
		var msg string
		if exp, msg = expireArg(ks, name, expArg, flags); msg != "" {
			w.Error(msg)
			return
		}
	}
	if len(val) > values.MaxValueLen {
		w.Error(errorText(values.ErrTooLong))
		return
	}
	abort := func() {
		if ints {
			w.Int(0)
		} else {
			w.Nil()
		}
	}
	mark := len(w.B)
	e, err := ks.Get(key)
	if err != nil {
		// Limiter state: NX sees an existing key and writes nothing;
		// anything that would read or replace it is WRONGTYPE.
		if flags&optNX != 0 && flags&optGET == 0 {
			abort()
			return
		}
		w.Error(errorText(err))
		return
	}
	if flags&optGET != 0 {
		switch {
		case e == nil:
			w.Nil()
		case e.Type() != values.TypeString:
			w.Error(ErrWrongType)
			return
		default:
			writeString(w, e)
		}
	}
	found := e != nil
	if flags&optNX != 0 && found || flags&optXX != 0 && !found {
		if flags&optGET == 0 {
			abort()
		}
		return
	}
	if flags&optKeepTTL != 0 && found {
		exp = e.Expire
	}
	if err := store(ks, key, e, val, exp); err != nil {
		w.B = w.B[:mark]
		w.Error(errorText(err))
		return
	}
	switch {
	case flags&optGET != 0:
	case ints:
		w.Int(1)
	default:
		w.OK()
	}
}

func runGetDel(c *Cmd, ks engine.Keyspace, w *Writer) {
	if e := stringOrNil(ks, w, c.Args[1]); e != nil {
		writeString(w, e)
		ks.Delete(c.Args[1])
	}
}

func runGetEx(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	flags, expArg, ok := parseStringOpts(c.Args[2:], false)
	if !ok {
		w.Error(ErrSyntax)
		return
	}
	e := stringOrNil(ks, w, key)
	if e == nil {
		return
	}
	var exp int64
	if expArg != nil {
		var msg string
		if exp, msg = expireArg(ks, "getex", expArg, flags); msg != "" {
			w.Error(msg)
			return
		}
	}
	writeString(w, e)
	switch {
	case expArg != nil && exp <= ks.Now():
		// EXAT or PXAT in the past (EX and PX are always ahead).
		ks.Delete(key)
	case expArg != nil:
		e.Expire = exp
		ks.Changed(key)
	case flags&optPersist != 0 && e.Expire != 0:
		e.Expire = 0
		ks.Changed(key)
	}
}

func runMGet(c *Cmd, ks engine.Keyspace, w *Writer) {
	w.Array(len(c.keys))
	for _, k := range c.keys {
		e, err := ks.Get(k)
		if err != nil || e == nil || e.Type() != values.TypeString {
			w.Nil()
			continue
		}
		writeString(w, e)
	}
}

// msetCheck is MSET's and MSETNX's check before they write anything: the
// argument count, and every value's length.
func msetCheck(c *Cmd, w *Writer) bool {
	if len(c.Args)%2 == 0 {
		w.Error(errArity(c.spec.Name))
		return false
	}
	for j := 2; j < len(c.Args); j += 2 {
		if len(c.Args[j]) > values.MaxValueLen {
			w.Error(errorText(values.ErrTooLong))
			return false
		}
	}
	return true
}

func runMSet(c *Cmd, ks engine.Keyspace, w *Writer) {
	if !msetCheck(c, w) {
		return
	}
	for j := 1; j < len(c.Args); j += 2 {
		if _, err := ks.Get(c.Args[j]); err != nil {
			w.Error(errorText(err))
			return
		}
	}
	// Create the missing keys first: in no-create mode the first Create
	// fails before anything has changed.
	for j := 1; j < len(c.Args); j += 2 {
		if e, _ := ks.Get(c.Args[j]); e == nil {
			if _, err := ks.Create(c.Args[j], values.TypeString); err != nil {
				w.Error(errorText(err))
				return
			}
		}
	}
	if msetStore(c, ks, w) {
		w.OK()
	}
}

// msetStore sets every key of MSET's (or MSETNX's) pairs to its value,
// with no expiry; false after replying an error.
func msetStore(c *Cmd, ks engine.Keyspace, w *Writer) bool {
	for j := 1; j < len(c.Args); j += 2 {
		e, _ := ks.Get(c.Args[j])
		if err := store(ks, c.Args[j], e, c.Args[j+1], 0); err != nil {
			w.Error(errorText(err))
			return false
		}
	}
	return true
}

func runMSetNX(c *Cmd, ks engine.Keyspace, w *Writer) {
	if !msetCheck(c, w) {
		return
	}
	for j := 1; j < len(c.Args); j += 2 {
		if ks.Kind(c.Args[j]) != engine.KindNone {
			w.Int(0)
			return
		}
	}
	if msetStore(c, ks, w) {
		w.Int(1)
	}
}

// stringInt is the integer a string entry holds, if it holds one.
func stringInt(e *values.Entry) (int64, bool) {
	if e.Obj == nil {
		return e.Int, true
	}
	return values.ParseInt(e.Obj.(*values.Str).B)
}

// incrBy is Redis's incrDecrCommand: add by to key's integer.
func incrBy(ks engine.Keyspace, w *Writer, key []byte, by int64) {
	e, msg := getString(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if e == nil {
		e, err := ks.Create(key, values.TypeString)
		if err != nil {
			w.Error(errorText(err))
			return
		}
		e.Int = by
		ks.Changed(key)
		w.Int(by)
		return
	}
	old, ok := stringInt(e)
	if !ok {
		w.Error(ErrNotInteger)
		return
	}
	if by < 0 && old < 0 && by < math.MinInt64-old || by > 0 && old > 0 && by > math.MaxInt64-old {
		w.Error(ErrOverflow)
		return
	}
	e.Int, e.Obj = old+by, nil
	ks.Changed(key)
	w.Int(old + by)
}

func runIncr(by int64) func(c *Cmd, ks engine.Keyspace, w *Writer) {
	return func(c *Cmd, ks engine.Keyspace, w *Writer) { incrBy(ks, w, c.Args[1], by) }
}

func runIncrBy(decr bool) func(c *Cmd, ks engine.Keyspace, w *Writer) {
	return func(c *Cmd, ks engine.Keyspace, w *Writer) {
		by, ok := values.ParseInt(c.Args[2])
		if !ok {
			w.Error(ErrNotInteger)
			return
		}
		if decr {
			if by == math.MinInt64 {
				w.Error(ErrDecrOverflow)
				return
			}
			by = -by
		}
		incrBy(ks, w, c.Args[1], by)
	}
}

func runStrlen(c *Cmd, ks engine.Keyspace, w *Writer) {
	e, msg := getString(ks, c.Args[1])
	switch {
	case msg != "":
		w.Error(msg)
	case e == nil:
		w.Int(0)
	default:
		w.Int(int64(stringLen(e)))
	}
}

func runAppend(c *Cmd, ks engine.Keyspace, w *Writer) {
	key, add := c.Args[1], c.Args[2]
	e, msg := getString(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	n := len(add)
	if e != nil {
		n += stringLen(e)
	}
	if n > values.MaxValueLen {
		w.Error(errorText(values.ErrTooLong))
		return
	}
	if e == nil {
		if err := store(ks, key, nil, add, 0); err != nil {
			w.Error(errorText(err))
			return
		}
		w.Int(int64(n))
		return
	}
	if s, ok := e.Obj.(*values.Str); ok {
		// Grow the text in place; it may become an integer's text ("-"
		// then "5").
		s.B, s.Raw = append(s.B, add...), true
		if v, isInt := values.ParseInt(s.B); isInt {
			e.Int, e.Obj = v, nil
		}
	} else {
		b := append(strconv.AppendInt(make([]byte, 0, n), e.Int, 10), add...)
		if v, isInt := values.ParseInt(b); isInt {
			e.Int = v
		} else {
			e.Int, e.Obj = 0, &values.Str{B: b, Raw: true}
		}
	}
	ks.Changed(key)
	w.Int(int64(n))
}

func runIncrByFloat(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	e, msg := getString(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	cur := newLongDouble()
	if e != nil {
		if e.Obj == nil {
			cur.SetInt64(e.Int)
		} else {
			var ok bool
			if cur, ok = parseLongDouble(e.Obj.(*values.Str).B); !ok {
				w.Error(ErrNotFloat)
				return
			}
		}
	}
	incr, ok := parseLongDouble(c.Args[2])
	if !ok {
		w.Error(ErrNotFloat)
		return
	}
	text, ok := addLongDouble(cur, incr)
	if !ok {
		w.Error(ErrNaN)
		return
	}
	if err := store(ks, key, e, text, expireOf(e)); err != nil {
		w.Error(errorText(err))
		return
	}
	w.Bulk(text)
}

// expireOf is e's expiry, 0 for a missing key.
func expireOf(e *values.Entry) int64 {
	if e == nil {
		return 0
	}
	return e.Expire
}
