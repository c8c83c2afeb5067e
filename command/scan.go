package command

import (
	"context"
	"math/rand/v2"
	"strconv"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/engine"
)

// SCAN, KEYS and RANDOMKEY: walks over the keys the backend serves
// (Scanner), limiter keys and data keys alike, named by TYPE's names. A
// SCAN cursor is engine.Engine.Scan's: a key present for the whole
// iteration is returned, once, whatever the tables do meanwhile. With
// --groups each node walks the groups it leads, as each Redis Cluster
// master scans its own slots. These read this node's replica without
// the Raft log, as Redis's SCAN reads its own memory.

// Texts of the walks' errors.
const (
	ErrInvalidCursor = "ERR invalid cursor"
	errNoScan        = "ERR this server cannot list its keys"
)

func init() {
	register(
		&Cmd{Name: "scan", Arity: -2, Flags: []string{"readonly"}, ACL: []string{"@keyspace", "@read", "@slow"},
			Summary: "Incrementally iterate the keys space", Group: "generic", Since: "2.8.0", Run: scan},
		&Cmd{Name: "keys", Arity: 2, Flags: []string{"readonly"}, ACL: []string{"@keyspace", "@read", "@slow", "@dangerous"},
			Summary: "Find all keys matching the given pattern", Group: "generic", Since: "1.0.0", Run: keys},
		&Cmd{Name: "randomkey", Arity: 1, Flags: []string{"readonly"}, ACL: []string{"@keyspace", "@read", "@slow"},
			Summary: "Return a random key from the keyspace", Group: "generic", Since: "1.0.0", Run: randomKey},
	)
}

// scan is SCAN cursor [MATCH pattern] [COUNT count] [TYPE type], as
// Redis 7.0 parses it: an unknown TYPE matches nothing.
func scan(x *Call, args [][]byte) {
	if x.Env.Scanner == nil {
		x.fail(errNoScan)
		return
	}
	cursor, err := strconv.ParseUint(string(args[1]), 10, 64)
	if err != nil {
		x.fail(ErrInvalidCursor)
		return
	}
	count, pattern, typ := int64(10), "", ""
	hasPattern, hasType := false, false
	for i := 2; i < len(args); i += 2 {
		if i+1 >= len(args) {
			x.fail(ErrSyntax)
			return
		}
		switch v := args[i+1]; {
		case EqualFold(args[i], "count"):
			n, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				x.fail(ErrNotInteger)
				return
			}
			if n < 1 {
				x.fail(ErrSyntax)
				return
			}
			count = n
		case EqualFold(args[i], "match"):
			pattern, hasPattern = string(v), !(len(v) == 1 && v[0] == '*')
		case EqualFold(args[i], "type"):
			typ, hasType = string(v), true
		default:
			x.fail(ErrSyntax)
			return
		}
	}
	var found [][]byte
	next, err := x.Env.Scanner.Scan(context.Background(), cursor, int(min(count, 1<<20)), func(key []byte, k engine.Kind) {
		if hasType && !EqualFold([]byte(typ), k.String()) {
			return
		}
		if hasPattern && !acl.Glob(pattern, key) {
			return
		}
		found = append(found, append([]byte(nil), key...))
	})
	if err != nil {
		x.fail(Text(err))
		return
	}
	x.W.Array(2)
	x.W.BulkString(strconv.FormatUint(next, 10))
	x.W.Array(len(found))
	for _, k := range found {
		x.W.Bulk(k)
	}
}

// keys is KEYS pattern: a whole walk.
func keys(x *Call, args [][]byte) {
	if x.Env.Scanner == nil {
		x.fail(errNoScan)
		return
	}
	pattern := string(args[1])
	all := pattern == "*"
	var found [][]byte
	cursor := uint64(0)
	for {
		next, err := x.Env.Scanner.Scan(context.Background(), cursor, 1024, func(key []byte, _ engine.Kind) {
			if all || acl.Glob(pattern, key) {
				found = append(found, append([]byte(nil), key...))
			}
		})
		if err != nil {
			x.fail(Text(err))
			return
		}
		if next == 0 {
			break
		}
		cursor = next
	}
	x.W.Array(len(found))
	for _, k := range found {
		x.W.Bulk(k)
	}
}

// randomKey is RANDOMKEY: the first key at or after a random position of
// a random shard among the first eight (there are rarely more), else the
// first key of the walk; a null reply when there is none. Not uniform:
// each key's chance is its gap in hash order.
func randomKey(x *Call, _ [][]byte) {
	if x.Env.Scanner == nil {
		x.fail(errNoScan)
		return
	}
	var key []byte
	take := func(k []byte, _ engine.Kind) {
		if key == nil {
			key = append([]byte{}, k...)
		}
	}
	for _, cursor := range []uint64{engine.JoinCursor(0, rand.IntN(8), rand.Uint64()), 0} {
		for range 64 {
			next, err := x.Env.Scanner.Scan(context.Background(), cursor, 1, take)
			if err != nil {
				x.fail(Text(err))
				return
			}
			if key != nil || next == 0 {
				break
			}
			cursor = next
		}
		if key != nil {
			x.W.Bulk(key)
			return
		}
	}
	x.W.Nil()
}
