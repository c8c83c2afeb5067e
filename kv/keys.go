package kv

import (
	"math"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// The key commands: expiry of data keys (strings, hashes, sorted sets),
// and the generic commands the server answers itself outside a
// transaction (TxnOnly: TTL, PTTL, DEL, UNLINK, EXISTS, TYPE, PING, ECHO,
// TIME), which kv runs inside one with the same replies.
//
// A data key's expiry is a whole millisecond (Unix ns in the entry), as
// in Redis. A limiter key has no expiry of its own: it is dropped when its
// state is empty again, so TTL and PTTL report the time until then,
// rounded up as the server's TTL does, and EXPIRE and PERSIST on it are
// WRONGTYPE.

func init() {
	expireSpec := func(name, since, summary string, sec, relative bool) *Spec {
		return &Spec{Name: name, Arity: -3, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "fast"}, ACL: []string{"@keyspace", "@write", "@fast"},
			Group: "generic", Since: since, Summary: summary, run: runExpire(sec, relative)}
	}
	readSpec := func(name, since, summary string, txnOnly bool, run func(*Cmd, engine.Keyspace, *Writer)) *Spec {
		return &Spec{Name: name, Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"readonly", "fast"}, ACL: []string{"@keyspace", "@read", "@fast"},
			Group: "generic", Since: since, Summary: summary, TxnOnly: txnOnly, run: run}
	}
	register(
		expireSpec("expire", "1.0.0", "Set a key's time to live in seconds", true, true),
		expireSpec("pexpire", "2.6.0", "Set a key's time to live in milliseconds", false, true),
		expireSpec("expireat", "1.2.0", "Set the expiration for a key as a UNIX timestamp", true, false),
		expireSpec("pexpireat", "2.6.0", "Set the expiration for a key as a UNIX timestamp specified in milliseconds", false, false),
		readSpec("ttl", "1.0.0", "Get the time to live for a key in seconds", true, runTTL(false)),
		readSpec("pttl", "2.6.0", "Get the time to live for a key in milliseconds", true, runTTL(true)),
		readSpec("expiretime", "7.0.0", "Get the expiration Unix timestamp for a key", false, runExpireTime(false)),
		readSpec("pexpiretime", "7.0.0", "Get the expiration Unix timestamp for a key in milliseconds", false, runExpireTime(true)),
		&Spec{Name: "persist", Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"write", "fast"}, ACL: []string{"@keyspace", "@write", "@fast"},
			Group: "generic", Since: "2.2.0", Summary: "Remove the expiration from a key", run: runPersist},

		&Spec{Name: "del", Arity: -2, FirstKey: 1, LastKey: -1, KeyStep: 1,
			Flags: []string{"write"}, ACL: []string{"@keyspace", "@write", "@slow"},
			Group: "generic", Since: "1.0.0", Summary: "Delete a key", TxnOnly: true, run: runDel},
		&Spec{Name: "unlink", Arity: -2, FirstKey: 1, LastKey: -1, KeyStep: 1,
			Flags: []string{"write", "fast"}, ACL: []string{"@keyspace", "@write", "@fast"},
			Group: "generic", Since: "4.0.0", Summary: "Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.", TxnOnly: true, run: runDel},
		&Spec{Name: "exists", Arity: -2, FirstKey: 1, LastKey: -1, KeyStep: 1,
			Flags: []string{"readonly", "fast"}, ACL: []string{"@keyspace", "@read", "@fast"},
			Group: "generic", Since: "1.0.0", Summary: "Determine if a key exists", TxnOnly: true, run: runExists},
		&Spec{Name: "type", Arity: 2, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: []string{"readonly", "fast"}, ACL: []string{"@keyspace", "@read", "@fast"},
			Group: "generic", Since: "1.0.0", Summary: "Determine the type stored at key", TxnOnly: true, run: runType},
		&Spec{Name: "ping", Arity: -1,
			Flags: []string{"fast"}, ACL: []string{"@fast", "@connection"},
			Group: "connection", Since: "1.0.0", Summary: "Ping the server", TxnOnly: true, run: runPing},
		&Spec{Name: "echo", Arity: 2,
			Flags: []string{"loading", "stale", "fast"}, ACL: []string{"@fast", "@connection"},
			Group: "connection", Since: "1.0.0", Summary: "Echo the given string", TxnOnly: true, run: runEcho},
		&Spec{Name: "time", Arity: 1,
			Flags: []string{"loading", "stale", "fast"}, ACL: []string{"@fast"},
			Group: "server", Since: "2.6.0", Summary: "Return the current server time", TxnOnly: true, run: runTime},
	)
}

// Options of EXPIRE and its kin.
const (
	expNX = 1 << iota
	expXX
	expGT
	expLT
)

// parseExpireOpts parses EXPIRE's options as Redis's
// parseExtendedExpireArgumentsOrReply: every option is read before the
// conflicts are checked. It returns the flags or the error reply.
func parseExpireOpts(args [][]byte) (int, string) {
	flags := 0
	for _, opt := range args {
		switch {
		case is(opt, "nx"):
			flags |= expNX
		case is(opt, "xx"):
			flags |= expXX
		case is(opt, "gt"):
			flags |= expGT
		case is(opt, "lt"):
			flags |= expLT
		default:
			return 0, errUnsupportedOption(opt)
		}
	}
	if flags&expNX != 0 && flags&(expXX|expGT|expLT) != 0 {
		return 0, ErrExpireNX
	}
	if flags&expGT != 0 && flags&expLT != 0 {
		return 0, ErrExpireGTLT
	}
	return flags, ""
}

// runExpire is Redis's expireGenericCommand: sec reads the time in
// seconds, relative adds it to now. A time already due deletes the key.
func runExpire(sec, relative bool) func(c *Cmd, ks engine.Keyspace, w *Writer) {
	return func(c *Cmd, ks engine.Keyspace, w *Writer) {
		key, name := c.Args[1], c.spec.Name
		flags, msg := parseExpireOpts(c.Args[3:])
		if msg != "" {
			w.Error(msg)
			return
		}
		when, ok := values.ParseInt(c.Args[2])
		if !ok {
			w.Error(ErrNotInteger)
			return
		}
		if sec {
			if when > math.MaxInt64/1000 || when < math.MinInt64/1000 {
				w.Error(errInvalidExpire(name))
				return
			}
			when *= 1000
		}
		now := nowMillis(ks)
		if relative {
			if when > math.MaxInt64-now {
				w.Error(errInvalidExpire(name))
				return
			}
			when += now
		}
		e, err := ks.Get(key)
		if err != nil {
			w.Error(errorText(err))
			return
		}
		if e == nil {
			w.Int(0)
			return
		}
		if flags != 0 {
			// No expiry counts as an infinite one: GT never passes,
			// LT always does.
			cur := e.Expire / nanosPerMilli
			switch {
			case flags&expNX != 0 && e.Expire != 0,
				flags&expXX != 0 && e.Expire == 0,
				flags&expGT != 0 && (e.Expire == 0 || when <= cur),
				flags&expLT != 0 && e.Expire != 0 && when >= cur:
				w.Int(0)
				return
			}
		}
		if when <= now {
			ks.Delete(key)
			w.Int(1)
			return
		}
		ns, ok := millisToNanos(when)
		if !ok {
			w.Error(errInvalidExpire(name))
			return
		}
		e.Expire = ns
		ks.Changed(key)
		w.Int(1)
	}
}

// ttlCeilDiv is a/b rounded up, for a >= 0 and b > 0.
func ttlCeilDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}

// runTTL is TTL (in seconds, rounded to nearest as Redis does) or PTTL
// (ms). A limiter key's time until its state is empty is rounded up.
func runTTL(ms bool) func(c *Cmd, ks engine.Keyspace, w *Writer) {
	return func(c *Cmd, ks engine.Keyspace, w *Writer) {
		key := c.Args[1]
		e, err := ks.Get(key)
		switch {
		case err != nil:
			t := ks.TTL(key)
			switch {
			case t < 0:
			case ms:
				t = ttlCeilDiv(t, nanosPerMilli)
			default:
				t = ttlCeilDiv(t, int64(time.Second))
			}
			w.Int(t)
		case e == nil:
			w.Int(-2)
		case e.Expire == 0:
			w.Int(-1)
		default:
			// The expiry is a whole millisecond: rounding the rest up
			// is Redis's expire - mstime().
			t := ttlCeilDiv(max(e.Expire-ks.Now(), 0), nanosPerMilli)
			if !ms {
				t = (t + 500) / 1000
			}
			w.Int(t)
		}
	}
}

// runExpireTime is EXPIRETIME (Unix seconds) or PEXPIRETIME (Unix ms). A
// limiter key's is when its state is empty again, rounded up.
func runExpireTime(ms bool) func(c *Cmd, ks engine.Keyspace, w *Writer) {
	return func(c *Cmd, ks engine.Keyspace, w *Writer) {
		key := c.Args[1]
		e, err := ks.Get(key)
		unit := int64(time.Second)
		if ms {
			unit = nanosPerMilli
		}
		switch {
		case err != nil:
			t := ks.TTL(key)
			if t >= 0 {
				t = ttlCeilDiv(ks.Now()+t, unit)
			}
			w.Int(t)
		case e == nil:
			w.Int(-2)
		case e.Expire == 0:
			w.Int(-1)
		case ms:
			w.Int(e.Expire / nanosPerMilli)
		default:
			// Redis rounds its milliseconds to the nearest second.
			w.Int((e.Expire/nanosPerMilli + 500) / 1000)
		}
	}
}

func runPersist(c *Cmd, ks engine.Keyspace, w *Writer) {
	e, err := ks.Get(c.Args[1])
	switch {
	case err != nil:
		w.Error(errorText(err))
	case e == nil || e.Expire == 0:
		w.Int(0)
	default:
		e.Expire = 0
		ks.Changed(c.Args[1])
		w.Int(1)
	}
}

// runDel is DEL and UNLINK: keys of every kind.
func runDel(c *Cmd, ks engine.Keyspace, w *Writer) {
	n := int64(0)
	for _, k := range c.keys {
		if ks.Delete(k) {
			n++
		}
	}
	w.Int(n)
}

// runExists counts the keys that exist, a key named twice twice.
func runExists(c *Cmd, ks engine.Keyspace, w *Writer) {
	n := int64(0)
	for _, k := range c.keys {
		if ks.Kind(k) != engine.KindNone {
			n++
		}
	}
	w.Int(n)
}

func runType(c *Cmd, ks engine.Keyspace, w *Writer) {
	w.Status(ks.Kind(c.Args[1]).String())
}

func runPing(c *Cmd, _ engine.Keyspace, w *Writer) {
	switch len(c.Args) {
	case 1:
		w.Status("PONG")
	case 2:
		w.Bulk(c.Args[1])
	default:
		w.Error(errArity("ping"))
	}
}

func runEcho(c *Cmd, _ engine.Keyspace, w *Writer) { w.Bulk(c.Args[1]) }

// runTime replies the command's stamped time as Redis's TIME: seconds and
// microseconds, as bulk strings.
func runTime(_ *Cmd, ks engine.Keyspace, w *Writer) {
	now := ks.Now()
	w.Array(2)
	w.BulkInt(now / int64(time.Second))
	w.BulkInt(now % int64(time.Second) / int64(time.Microsecond))
}
