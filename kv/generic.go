package kv

import (
	"strconv"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// The keyspace commands that move or describe a key of any kind: RENAME,
// RENAMENX, COPY, TOUCH, OBJECT and MEMORY USAGE, and the scans of one
// value (HSCAN, ZSCAN, SSCAN). A key moves whole, as its snapshot record
// (engine.Keyspace.Record and Put): a limiter key keeps its state, a data
// key its value and expiry.
//
// OBJECT ENCODING names the encoding Redis 7.0 would use for the value:
// "int", "embstr" (up to 44 bytes) or "raw" for strings; "listpack" or
// "hashtable" for hashes and "listpack" or "skiplist" for sorted sets (at
// most 128 elements of at most 64 bytes: listpack; CONFIG SET's
// thresholds, tunables.go); "quicklist" for
// lists; "intset" or "hashtable" for sets; a limiter key's TYPE name. The
// value scans reply the whole value at once with cursor 0, as Redis does
// for its small encodings: values are bounded (values.MaxElements).

// Texts of the keyspace commands' errors.
const (
	ErrNoSuchKey     = "ERR no such key"
	ErrSameObject    = "ERR source and destination objects are the same"
	ErrDBIndex       = "ERR DB index is out of range"
	ErrInvalidCursor = "ERR invalid cursor"
	ErrNoLFU         = "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
)

func init() {
	gen := func(name string, arity, first, last int, flags, acl []string, since, summary string,
		run func(*Cmd, engine.Keyspace, *Writer)) *Spec {
		return &Spec{Name: name, Arity: arity, FirstKey: first, LastKey: last, KeyStep: 1,
			Flags: flags, ACL: acl, Group: "generic", Since: since, Summary: summary, run: run}
	}
	scanSpec := oneKeySpec("")
	register(
		gen("rename", 3, 1, 2, []string{"write"}, []string{"@keyspace", "@write", "@slow"}, "1.0.0",
			"Rename a key", func(c *Cmd, ks engine.Keyspace, w *Writer) { rename(c, ks, w, false) }),
		gen("renamenx", 3, 1, 2, []string{"write", "fast"}, []string{"@keyspace", "@write", "@fast"}, "1.0.0",
			"Rename a key, only if the new key does not exist", func(c *Cmd, ks engine.Keyspace, w *Writer) { rename(c, ks, w, true) }),
		gen("copy", -3, 1, 2, []string{"write", "denyoom"}, []string{"@keyspace", "@write", "@slow"}, "6.2.0",
			"Copy a key", copyKey),
		gen("touch", -2, 1, -1, []string{"readonly", "fast"}, []string{"@keyspace", "@read", "@fast"}, "3.2.1",
			"Alters the last access time of a key(s). Returns the number of existing keys specified.", touch),
		// OBJECT and MEMORY run here with their subcommand first; the
		// command table makes them containers (command/keyspace.go).
		&Spec{Name: "object", Arity: -2, FirstKey: 2, LastKey: 2, KeyStep: 1, Flags: []string{"readonly"},
			ACL: []string{"@keyspace", "@read", "@slow"}, Group: "generic", Since: "2.2.3",
			Summary: "A container for object introspection commands", TxnOnly: true, run: object},
		&Spec{Name: "memory", Arity: -2, FirstKey: 2, LastKey: 2, KeyStep: 1, Flags: []string{"readonly"},
			ACL: []string{"@read", "@slow"}, Group: "server", Since: "4.0.0",
			Summary: "A container for memory diagnostics commands", TxnOnly: true, run: memory},
	)
	for _, s := range []struct{ name, group, acl, since, summary string }{
		{"hscan", "hash", "@hash", "2.8.0", "Incrementally iterate hash fields and associated values"},
		{"zscan", "sorted-set", "@sortedset", "2.8.0", "Incrementally iterate sorted sets elements and associated scores"},
		{"sscan", "set", "@set", "2.8.0", "Incrementally iterate Set elements"},
	} {
		sp := scanSpec(s.name, -3, []string{"readonly"}, []string{"@read", s.acl, "@slow"}, s.since, s.summary, valueScan)
		sp.Group = s.group
		register(sp)
	}
}

// rename is RENAME and RENAMENX (nx): the source's record put under the
// destination, replacing what it held (RENAME) or only when missing.
func rename(c *Cmd, ks engine.Keyspace, w *Writer, nx bool) {
	src, dst := c.Args[1], c.Args[2]
	rec, ok := ks.Record(src)
	if !ok {
		w.Error(ErrNoSuchKey)
		return
	}
	if string(src) == string(dst) {
		if nx {
			w.Int(0)
		} else {
			w.OK()
		}
		return
	}
	if nx && ks.Kind(dst) != engine.KindNone {
		w.Int(0)
		return
	}
	rec.Key = string(dst)
	if err := ks.Put(rec); err != nil {
		w.Error(errorText(err))
		return
	}
	ks.Delete(src)
	if nx {
		w.Int(1)
	} else {
		w.OK()
	}
}

// copyKey is COPY source destination [DB 0] [REPLACE].
func copyKey(c *Cmd, ks engine.Keyspace, w *Writer) {
	src, dst := c.Args[1], c.Args[2]
	replace := false
	for i := 3; i < len(c.Args); i++ {
		switch {
		case is(c.Args[i], "replace"):
			replace = true
		case is(c.Args[i], "db") && i+1 < len(c.Args):
			i++
			db, ok := values.ParseInt(c.Args[i])
			if !ok {
				w.Error(ErrNotInteger)
				return
			}
			if db != 0 {
				w.Error(ErrDBIndex)
				return
			}
		default:
			w.Error(ErrSyntax)
			return
		}
	}
	if string(src) == string(dst) {
		w.Error(ErrSameObject)
		return
	}
	rec, ok := ks.Record(src)
	if !ok {
		w.Int(0)
		return
	}
	if ks.Kind(dst) != engine.KindNone {
		if !replace {
			w.Int(0)
			return
		}
	}
	rec.Key = string(dst)
	if err := ks.Put(rec); err != nil {
		w.Error(errorText(err))
		return
	}
	w.Int(1)
}

// touch counts the keys that exist (a key named twice twice) and stamps
// the data keys as used.
func touch(c *Cmd, ks engine.Keyspace, w *Writer) {
	n := int64(0)
	for _, k := range c.keys {
		if ks.Kind(k) != engine.KindNone {
			ks.Get(k)
			n++
		}
	}
	w.Int(n)
}

// Encoding is the name OBJECT ENCODING gives the data entry e, as Redis
// 7.0 with its default thresholds would.
func Encoding(e *values.Entry) string {
	switch v := e.Obj.(type) {
	case nil:
		return "int"
	case *values.Str:
		if len(v.B) <= 44 && !v.Raw {
			return "embstr"
		}
		return "raw"
	case *values.Hash:
		entries, value := tunable("hash-max-listpack-entries"), tunable("hash-max-listpack-value")
		small := int64(v.Len()) <= entries
		v.Each(func(k, val []byte) { small = small && int64(len(k)) <= value && int64(len(val)) <= value })
		if small {
			return "listpack"
		}
		return "hashtable"
	case *values.ZSet:
		entries, value := tunable("zset-max-listpack-entries"), tunable("zset-max-listpack-value")
		small := int64(v.Len()) <= entries
		for _, m := range v.Elems() {
			small = small && int64(len(m.Member)) <= value
		}
		if small {
			return "listpack"
		}
		return "skiplist"
	case *values.List:
		return "quicklist"
	case *values.Set:
		if v.Intset() {
			return "intset"
		}
		return "hashtable"
	}
	return "raw"
}

var objectHelp = []string{
	"OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"ENCODING <key>",
	"    Return the kind of internal representation used in order to store the value",
	"    associated with a <key>.",
	"FREQ <key>",
	"    Return the access logarithmic access frequency counter associated with a",
	"    <key>.",
	"IDLETIME <key>",
	"    Return the idle time associated with a <key>.",
	"REFCOUNT <key>",
	"    Return the number of references of the value associated with the specified",
	"    <key>.",
	"HELP",
	"    Print this help.",
}

var memoryHelp = []string{
	"MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"DOCTOR",
	"    Return memory problems reports.",
	"MALLOC-STATS",
	"    Return internal statistics report from the memory allocator.",
	"PURGE",
	"    Attempt to purge dirty pages for reclamation by the allocator.",
	"STATS",
	"    Return information about the memory usage of the server.",
	"USAGE <key> [SAMPLES <count>]",
	"    Return memory in bytes used by <key> and its value. Nested values are",
	"    sampled up to <count> times (default: 5, 0 means sample all).",
	"HELP",
	"    Print this help.",
}

func writeHelp(w *Writer, lines []string) {
	w.Array(len(lines))
	for _, l := range lines {
		w.Status(l)
	}
}

// unknownSub is Redis's text for a subcommand a container lacks.
func unknownSub(sub []byte, container string) string {
	return "ERR unknown subcommand '" + string(sub) + "'. Try " + container + " HELP."
}

// object is OBJECT ENCODING|FREQ|IDLETIME|REFCOUNT key and OBJECT HELP.
// IDLETIME is the seconds since a command last read or wrote the key, 0
// for a limiter key (which keeps no such time); FREQ needs an LFU policy,
// which rlserver has not; an integer string below 10000 is shared in
// Redis, whose REFCOUNT is then INT_MAX.
func object(c *Cmd, ks engine.Keyspace, w *Writer) {
	sub := c.Args[1]
	if is(sub, "help") && len(c.Args) == 2 {
		writeHelp(w, objectHelp)
		return
	}
	if len(c.Args) != 3 || !(is(sub, "encoding") || is(sub, "freq") || is(sub, "idletime") || is(sub, "refcount")) {
		w.Error(unknownSub(sub, "OBJECT"))
		return
	}
	key := c.Args[2]
	kind := ks.Kind(key)
	if kind == engine.KindNone {
		w.Nil()
		return
	}
	var e *values.Entry
	var used int64
	if kind.IsData() {
		e, _ = ks.Get(key)
		if e == nil {
			w.Nil()
			return
		}
		used = e.Used
	}
	switch {
	case is(sub, "encoding"):
		if e == nil {
			w.BulkString(kind.String())
			return
		}
		w.BulkString(Encoding(e))
	case is(sub, "freq"):
		w.Error(ErrNoLFU)
	case is(sub, "idletime"):
		if e == nil {
			w.Int(0)
			return
		}
		w.Int(max(ks.Now()-used, 0) / int64(time.Second))
	default:
		if e != nil && e.Obj == nil && e.Int >= 0 && e.Int < 10000 {
			w.Int(2147483647)
			return
		}
		w.Int(1)
	}
}

// Usage is MEMORY USAGE's estimate of the bytes a key takes: its slot
// (16), its bytes, and its state (the data entry and its value, or the
// limiter's record).
func Usage(key []byte, kind engine.Kind, e *values.Entry, rec engine.Record) int64 {
	n := int64(16 + len(key))
	if e != nil {
		return n + 48 + int64(e.Size())
	}
	return n + 8*int64(len(rec.Fields))
}

// memory is MEMORY USAGE key [SAMPLES n] and MEMORY HELP; the edge
// answers MEMORY STATS and DOCTOR.
func memory(c *Cmd, ks engine.Keyspace, w *Writer) {
	sub := c.Args[1]
	if is(sub, "help") && len(c.Args) == 2 {
		writeHelp(w, memoryHelp)
		return
	}
	if !is(sub, "usage") || len(c.Args) < 3 {
		w.Error(unknownSub(sub, "MEMORY"))
		return
	}
	for i := 3; i < len(c.Args); i += 2 {
		if !is(c.Args[i], "samples") || i+1 >= len(c.Args) {
			w.Error(ErrSyntax)
			return
		}
		if n, ok := values.ParseInt(c.Args[i+1]); !ok || n < 0 {
			w.Error(ErrNotInteger)
			return
		}
	}
	key := c.Args[2]
	kind := ks.Kind(key)
	switch {
	case kind == engine.KindNone:
		w.Nil()
	case kind.IsData():
		e, _ := ks.Get(key)
		if e == nil {
			w.Nil()
			return
		}
		w.Int(Usage(key, kind, e, engine.Record{}))
	default:
		rec, _ := ks.Record(key)
		w.Int(Usage(key, kind, nil, rec))
	}
}

// valueScan is HSCAN, ZSCAN and SSCAN key cursor [MATCH pattern] [COUNT
// n]: the whole value in one reply, cursor 0.
func valueScan(c *Cmd, ks engine.Keyspace, w *Writer) {
	if _, err := strconv.ParseUint(string(c.Args[2]), 10, 64); err != nil {
		w.Error(ErrInvalidCursor)
		return
	}
	e, err := ks.Get(c.Args[1])
	if err != nil {
		w.Error(errorText(err))
		return
	}
	want := map[string]values.Type{"hscan": values.TypeHash, "zscan": values.TypeZSet, "sscan": values.TypeSet}[c.spec.Name]
	if e != nil && e.Type() != want {
		w.Error(ErrWrongType)
		return
	}
	if e == nil {
		w.Array(2)
		w.BulkString("0")
		w.Array(0)
		return
	}
	pattern := ""
	for i := 3; i < len(c.Args); i += 2 {
		if i+1 >= len(c.Args) {
			w.Error(ErrSyntax)
			return
		}
		switch v := c.Args[i+1]; {
		case is(c.Args[i], "count"):
			n, ok := values.ParseInt(v)
			if !ok {
				w.Error(ErrNotInteger)
				return
			}
			if n < 1 {
				w.Error(ErrSyntax)
				return
			}
		case is(c.Args[i], "match"):
			pattern = string(v)
			if pattern == "*" {
				pattern = ""
			}
		default:
			w.Error(ErrSyntax)
			return
		}
	}
	match := func(b []byte) bool { return pattern == "" || glob(pattern, b) }
	var items [][]byte
	if e != nil {
		switch v := e.Obj.(type) {
		case *values.Hash:
			v.Each(func(k, val []byte) {
				if match(k) {
					items = append(items, k, val)
				}
			})
		case *values.ZSet:
			for _, m := range v.Elems() {
				if match(m.Member) {
					items = append(items, m.Member, AppendDouble(nil, m.Score))
				}
			}
		case *values.Set:
			for _, m := range v.Ordered() {
				if match(m) {
					items = append(items, m)
				}
			}
		}
	}
	w.Array(2)
	w.BulkString("0")
	w.Array(len(items))
	for _, it := range items {
		w.Bulk(it)
	}
}
