package kv

import (
	"bytes"
	"math"
	"slices"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// SORT and SORT_RO, as Redis 7.0's sort.c answers them, for the key's own
// elements: ASC/DESC, ALPHA, LIMIT, STORE (SORT only), BY with a constant
// (no sorting) and GET #. A BY or GET pattern names other keys, which are
// only known while the command runs: a command's keys must be known
// before it reaches its shard (or its slot's group), so rlserver refuses
// them, as Redis Cluster refuses them.

// Texts of SORT's errors.
const (
	ErrSortBy     = "ERR BY option of SORT denied: rlserver does not read keys formed by a pattern."
	ErrSortGet    = "ERR GET option of SORT denied: rlserver does not read keys formed by a pattern (only GET # is served)."
	ErrSortDouble = "ERR One or more scores can't be converted into double"
)

func init() {
	acl := func(rw string) []string { return []string{rw, "@set", "@sortedset", "@list", "@slow", "@dangerous"} }
	register(
		&Spec{Name: "sort", Arity: -2, FirstKey: 1, LastKey: 1, KeyStep: 1, Flags: []string{"write", "denyoom", "movablekeys"},
			ACL: acl("@write"), Group: "generic", Since: "1.0.0",
			Summary: "Sort the elements in a list, set or sorted set", run: func(c *Cmd, ks engine.Keyspace, w *Writer) { sortCmd(c, ks, w, false) },
			keysAfter: sortStoreKey},
		&Spec{Name: "sort_ro", Arity: -2, FirstKey: 1, LastKey: 1, KeyStep: 1, Flags: []string{"readonly", "movablekeys"},
			ACL: acl("@read"), Group: "generic", Since: "7.0.0",
			Summary: "Sort the elements in a list, set or sorted set. Read-only variant of SORT.", run: func(c *Cmd, ks engine.Keyspace, w *Writer) { sortCmd(c, ks, w, true) }},
	)
}

// sortStoreKey is the position of SORT's STORE destination (the last
// STORE's, as Redis's sortGetKeys), 0 when there is none.
func sortStoreKey(args [][]byte) (first, last int) {
	pos := 0
	for j := 2; j < len(args); j++ {
		left := len(args) - j - 1
		switch {
		case is(args[j], "limit") && left >= 2:
			j += 2
		case (is(args[j], "by") || is(args[j], "get")) && left >= 1:
			j++
		case is(args[j], "store") && left >= 1:
			pos = j + 1
			j++
		}
	}
	return pos, pos
}

func sortCmd(c *Cmd, ks engine.Keyspace, w *Writer, readonly bool) {
	var desc, alpha, dontSort bool
	limitStart, limitCount := int64(0), int64(-1)
	var store []byte
	getOps := 0
	args := c.Args
	for j := 2; j < len(args); j++ {
		left := len(args) - j - 1
		switch {
		case is(args[j], "asc"):
			desc = false
		case is(args[j], "desc"):
			desc = true
		case is(args[j], "alpha"):
			alpha = true
		case is(args[j], "limit") && left >= 2:
			var ok1, ok2 bool
			limitStart, ok1 = values.ParseInt(args[j+1])
			limitCount, ok2 = values.ParseInt(args[j+2])
			if !ok1 || !ok2 {
				w.Error(ErrNotInteger)
				return
			}
			j += 2
		case !readonly && is(args[j], "store") && left >= 1:
			store = args[j+1]
			j++
		case is(args[j], "by") && left >= 1:
			if bytes.IndexByte(args[j+1], '*') < 0 {
				dontSort = true
			} else {
				w.Error(ErrSortBy)
				return
			}
			j++
		case is(args[j], "get") && left >= 1:
			if string(args[j+1]) != "#" {
				w.Error(ErrSortGet)
				return
			}
			getOps++
			j++
		default:
			w.Error(ErrSyntax)
			return
		}
	}
	e, err := ks.Get(args[1])
	if err != nil {
		w.Error(errorText(err))
		return
	}
	var elems [][]byte // what Redis loads into its vector
	var isSet, ordered bool
	if e != nil {
		switch v := e.Obj.(type) {
		case *values.List:
			elems, ordered = v.Items(), true
		case *values.Set:
			elems, isSet = v.Ordered(), true
		case *values.ZSet:
			ordered = true
			for _, m := range v.Elems() {
				elems = append(elems, m.Member)
			}
		default:
			w.Error(ErrWrongType)
			return
		}
	}
	if dontSort && isSet && (store != nil || c.Script) {
		// A set's order is not one replicas share: sort it when storing,
		// and for a script, as Redis does.
		dontSort, alpha = false, true
	}
	n := int64(len(elems))
	start := min(max(limitStart, 0), n)
	limitCount = min(max(limitCount, -1), n)
	end := n - 1
	if limitCount >= 0 {
		end = start + limitCount - 1
	}
	if start >= n {
		start, end = n-1, n-2
	}
	end = min(end, n-1)

	var out [][]byte
	switch {
	case dontSort && ordered:
		// The key's own order, DESC from its end, LIMIT applied to it.
		if end >= start {
			for i := start; i <= end; i++ {
				if desc {
					out = append(out, elems[n-1-i])
				} else {
					out = append(out, elems[i])
				}
			}
		}
	case dontSort:
		if end >= start {
			out = elems[start : end+1]
		}
	default:
		sorted := slices.Clone(elems)
		if alpha {
			slices.SortFunc(sorted, func(a, b []byte) int {
				if desc {
					return bytes.Compare(b, a)
				}
				return bytes.Compare(a, b)
			})
		} else {
			scores := make(map[string]float64, len(sorted))
			for _, m := range sorted {
				f, ok, outOfRange := strtodAll(string(m))
				if !ok || outOfRange || math.IsNaN(f) {
					w.Error(ErrSortDouble)
					return
				}
				scores[string(m)] = f
			}
			slices.SortFunc(sorted, func(a, b []byte) int {
				x, y := scores[string(a)], scores[string(b)]
				c := 0
				switch {
				case x > y:
					c = 1
				case x < y:
					c = -1
				default:
					c = bytes.Compare(a, b)
				}
				if desc {
					return -c
				}
				return c
			})
		}
		if end >= start {
			out = sorted[start : end+1]
		}
	}
	if getOps > 1 { // each GET # repeats the element
		rep := make([][]byte, 0, len(out)*getOps)
		for _, m := range out {
			for range getOps {
				rep = append(rep, m)
			}
		}
		out = rep
	}
	if store == nil {
		w.Array(len(out))
		for _, m := range out {
			w.Bulk(m)
		}
		return
	}
	storeList(ks, w, store, out)
}

// storeList replaces dst by a list of elems (deletes it when there are
// none) and replies their count, as SORT ... STORE.
func storeList(ks engine.Keyspace, w *Writer, dst []byte, elems [][]byte) {
	if k := ks.Kind(dst); k != engine.KindNone && !k.IsData() {
		w.Error(ErrWrongType) // limiter state is not replaced, as SET does not replace it
		return
	}
	l := values.NewList()
	if err := l.Room(elems); err != nil {
		w.Error(listSetError(err))
		return
	}
	for i, m := range elems {
		l.Insert(i, m)
	}
	ks.Delete(dst)
	if len(elems) == 0 {
		w.Int(0)
		return
	}
	e, err := ks.Create(dst, values.TypeList)
	if err != nil {
		w.Error(errorText(err))
		return
	}
	e.Obj = l
	ks.Changed(dst)
	w.Int(int64(len(elems)))
}
