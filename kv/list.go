package kv

import (
	"errors"
	"math"
	"math/big"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// List commands, with Redis 7.0's replies and errors. An emptied list is
// deleted. A list holds at most values.MaxElements elements of at most
// values.MaxElementLen bytes; a push past a bound changes nothing.
//
// Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP) answer at
// once as their non-blocking forms when there is an element to take; when
// there is none they answer the null Redis gives them inside MULTI or a
// script (a null bulk for BLMOVE and BRPOPLPUSH, a null array for the
// rest): the engine never parks a client. Outside MULTI the edge (package
// server) parks the client on that null and runs the command again after
// later writes, until one returns an element or the timeout passes.

// Texts of the list and set commands' errors.
const (
	ErrListSetElemLong = "ERR list element or set member is longer than the limit of 512 bytes"
	ErrListSetTooMany  = "ERR the list or set would hold more than 10000 elements"
	ErrIndexRange      = "ERR index out of range"
	ErrRangePositive   = "ERR value is out of range, must be positive"
	ErrRankZero        = "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"
	ErrCountNegative   = "ERR COUNT can't be negative"
	ErrMaxlenNegative  = "ERR MAXLEN can't be negative"
	ErrNumkeys         = "ERR numkeys should be greater than 0"
	ErrCountPositive   = "ERR count should be greater than 0"
	ErrTimeoutFloat    = "ERR timeout is not a float or out of range"
	ErrTimeoutNegative = "ERR timeout is negative"
	ErrTimeoutRange    = "ERR timeout is out of range"
)

// listSetError is the reply text of a bound a list or set command met.
func listSetError(err error) string {
	switch {
	case errors.Is(err, values.ErrElementTooLong):
		return ErrListSetElemLong
	case errors.Is(err, values.ErrTooMany):
		return ErrListSetTooMany
	}
	return errorText(err)
}

func init() {
	listSpec := oneKeySpec("list")
	var (
		wDenyF = []string{"write", "denyoom", "fast"}
		wFast  = []string{"write", "fast"}
		wDeny  = []string{"write", "denyoom"}
		wr     = []string{"write"}
		roFast = []string{"readonly", "fast"}
		ro     = []string{"readonly"}
		aclWF  = []string{"@write", "@list", "@fast"}
		aclWS  = []string{"@write", "@list", "@slow"}
		aclRF  = []string{"@read", "@list", "@fast"}
		aclRS  = []string{"@read", "@list", "@slow"}
		aclBl  = []string{"@write", "@list", "@slow", "@blocking"}
	)
	push := func(head, xx bool) func(*Cmd, engine.Keyspace, *Writer) {
		return func(c *Cmd, ks engine.Keyspace, w *Writer) { lpush(c, ks, w, head, xx) }
	}
	pop := func(head bool) func(*Cmd, engine.Keyspace, *Writer) {
		return func(c *Cmd, ks engine.Keyspace, w *Writer) { lpop(c, ks, w, head) }
	}
	twoKeys := func(s *Spec) *Spec { s.LastKey = 2; return s }
	register(
		listSpec("lpush", -3, wDenyF, aclWF, "1.0.0", "Prepend one or multiple elements to a list", push(true, false)),
		listSpec("rpush", -3, wDenyF, aclWF, "1.0.0", "Append one or multiple elements to a list", push(false, false)),
		listSpec("lpushx", -3, wDenyF, aclWF, "2.2.0", "Prepend an element to a list, only if the list exists", push(true, true)),
		listSpec("rpushx", -3, wDenyF, aclWF, "2.2.0", "Append an element to a list, only if the list exists", push(false, true)),
		listSpec("lpop", -2, wFast, aclWF, "1.0.0", "Remove and get the first elements in a list", pop(true)),
		listSpec("rpop", -2, wFast, aclWF, "1.0.0", "Remove and get the last elements in a list", pop(false)),
		listSpec("llen", 2, roFast, aclRF, "1.0.0", "Get the length of a list", llen),
		listSpec("lindex", 3, ro, aclRS, "1.0.0", "Get an element from a list by its index", lindex),
		listSpec("lset", 4, wDeny, aclWS, "1.0.0", "Set the value of an element in a list by its index", lset),
		listSpec("lrange", 4, ro, aclRS, "1.0.0", "Get a range of elements from a list", lrange),
		listSpec("ltrim", 4, wr, aclWS, "1.0.0", "Trim a list to the specified range", ltrim),
		listSpec("lrem", 4, wr, aclWS, "1.0.0", "Remove elements from a list", lrem),
		listSpec("linsert", 5, wDeny, aclWS, "2.2.0", "Insert an element before or after another element in a list", linsert),
		listSpec("lpos", -3, ro, aclRS, "6.0.6", "Return the index of matching elements on a list", lpos),
		twoKeys(listSpec("lmove", 5, wDeny, aclWS, "6.2.0", "Pop an element from a list, push it to another list and return it", lmoveCmd)),
		twoKeys(listSpec("rpoplpush", 3, wDeny, aclWS, "1.2.0", "Remove the last element in a list, prepend it to another list and return it", lmoveCmd)),
		&Spec{Name: "lmpop", Arity: -4, NumKeysAt: 1, Flags: []string{"write", "movablekeys"}, ACL: aclWS, Group: "list",
			Since: "7.0.0", Summary: "Pop elements from a list", run: lmpop},
		&Spec{Name: "blpop", Arity: -3, FirstKey: 1, LastKey: -2, KeyStep: 1, Flags: []string{"write", "noscript", "blocking"},
			ACL: aclBl, Group: "list", Since: "2.0.0", Summary: "Remove and get the first element in a list, or block until one is available", run: bpop(true)},
		&Spec{Name: "brpop", Arity: -3, FirstKey: 1, LastKey: -2, KeyStep: 1, Flags: []string{"write", "noscript", "blocking"},
			ACL: aclBl, Group: "list", Since: "2.0.0", Summary: "Remove and get the last element in a list, or block until one is available", run: bpop(false)},
		&Spec{Name: "blmove", Arity: 6, FirstKey: 1, LastKey: 2, KeyStep: 1, Flags: []string{"write", "denyoom", "noscript", "blocking"},
			ACL: aclBl, Group: "list", Since: "6.2.0", Summary: "Pop an element from a list, push it to another list and return it; or block until one is available", run: lmoveCmd},
		&Spec{Name: "brpoplpush", Arity: 4, FirstKey: 1, LastKey: 2, KeyStep: 1, Flags: []string{"write", "denyoom", "noscript", "blocking"},
			ACL: aclBl, Group: "list", Since: "2.2.0", Summary: "Pop an element from a list, push it to another list and return it; or block until one is available", run: lmoveCmd},
		&Spec{Name: "blmpop", Arity: -5, NumKeysAt: 2, Flags: []string{"write", "blocking", "movablekeys"},
			ACL: aclBl, Group: "list", Since: "7.0.0", Summary: "Pop elements from a list, or block until one is available", run: lmpop},
	)
}

// lookupList returns key's list, nil when missing, or WRONGTYPE's text.
func lookupList(ks engine.Keyspace, key []byte) (*values.List, string) {
	return lookupObj[*values.List](ks, key)
}

// listIndex parses an index argument.
func listIndex(b []byte) (int64, bool) { return values.ParseInt(b) }

// deleteIfEmpty removes key when its list or set has no element left,
// and otherwise records the change.
func deleteIfEmpty(ks engine.Keyspace, key []byte, n int) {
	if n == 0 {
		ks.Delete(key)
		return
	}
	ks.Changed(key)
}

func lpush(c *Cmd, ks engine.Keyspace, w *Writer, head, xx bool) {
	key := c.Args[1]
	l, msg := lookupList(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if l == nil {
		if xx {
			w.Int(0)
			return
		}
		if err := values.NewList().Room(c.Args[2:]); err != nil {
			w.Error(listSetError(err))
			return
		}
		e, err := ks.Create(key, values.TypeList)
		if err != nil {
			w.Error(errorText(err))
			return
		}
		l = e.Obj.(*values.List)
	} else if err := l.Room(c.Args[2:]); err != nil {
		w.Error(listSetError(err))
		return
	}
	for _, v := range c.Args[2:] {
		at := l.Len()
		if head {
			at = 0
		}
		l.Insert(at, v)
	}
	ks.Changed(key)
	w.Int(int64(l.Len()))
}

// popN removes n elements from l's head or tail, in pop order.
func popN(l *values.List, head bool, n int) [][]byte {
	if head {
		return l.Delete(0, n)
	}
	out := l.Delete(l.Len()-n, l.Len())
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func lpop(c *Cmd, ks engine.Keyspace, w *Writer, head bool) {
	if len(c.Args) > 3 {
		w.Error(errArity(c.spec.Name))
		return
	}
	hasCount := len(c.Args) == 3
	count := int64(0)
	if hasCount {
		n, ok := values.ParseInt(c.Args[2])
		if !ok || n < 0 {
			w.Error(ErrRangePositive)
			return
		}
		count = n
	}
	key := c.Args[1]
	l, msg := lookupList(ks, key)
	switch {
	case msg != "":
		w.Error(msg)
		return
	case l == nil && hasCount:
		w.NilArray()
		return
	case l == nil:
		w.Nil()
		return
	case hasCount && count == 0:
		w.Array(0)
		return
	}
	if !hasCount {
		w.Bulk(popN(l, head, 1)[0])
	} else {
		out := popN(l, head, int(min(count, int64(l.Len()))))
		w.Array(len(out))
		for _, v := range out {
			w.Bulk(v)
		}
	}
	deleteIfEmpty(ks, key, l.Len())
}

func llen(c *Cmd, ks engine.Keyspace, w *Writer) {
	if l, ok := lookupOrZero[*values.List](ks, w, c.Args[1]); ok {
		w.Int(int64(l.Len()))
	}
}

func lindex(c *Cmd, ks engine.Keyspace, w *Writer) {
	l, msg := lookupList(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if l == nil {
		w.Nil()
		return
	}
	i, ok := listIndex(c.Args[2])
	if !ok {
		w.Error(ErrNotInteger)
		return
	}
	if i < 0 {
		i += int64(l.Len())
	}
	if i < 0 || i >= int64(l.Len()) {
		w.Nil()
		return
	}
	w.Bulk(l.At(int(i)))
}

func lset(c *Cmd, ks engine.Keyspace, w *Writer) {
	l, msg := lookupList(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if l == nil {
		w.Error(ErrNoSuchKey)
		return
	}
	i, ok := listIndex(c.Args[2])
	if !ok {
		w.Error(ErrNotInteger)
		return
	}
	if i < 0 {
		i += int64(l.Len())
	}
	if i < 0 || i >= int64(l.Len()) {
		w.Error(ErrIndexRange)
		return
	}
	if err := l.Set(int(i), c.Args[3]); err != nil {
		w.Error(listSetError(err))
		return
	}
	ks.Changed(c.Args[1])
	w.OK()
}

// listRange resolves Redis's start and stop (negative from the end) over
// n elements to [from, to), empty when from >= to.
func listRange(start, stop int64, n int) (int, int) {
	ln := int64(n)
	if start < 0 {
		start += ln
	}
	if stop < 0 {
		stop += ln
	}
	start = max(start, 0)
	if start > stop || start >= ln {
		return 0, 0
	}
	stop = min(stop, ln-1)
	return int(start), int(stop + 1)
}

func lrange(c *Cmd, ks engine.Keyspace, w *Writer) {
	start, ok1 := listIndex(c.Args[2])
	stop, ok2 := listIndex(c.Args[3])
	if !ok1 || !ok2 {
		w.Error(ErrNotInteger)
		return
	}
	l, msg := lookupList(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if l == nil {
		w.Array(0)
		return
	}
	from, to := listRange(start, stop, l.Len())
	w.Array(to - from)
	for _, v := range l.Items()[from:to] {
		w.Bulk(v)
	}
}

func ltrim(c *Cmd, ks engine.Keyspace, w *Writer) {
	start, ok1 := listIndex(c.Args[2])
	stop, ok2 := listIndex(c.Args[3])
	if !ok1 || !ok2 {
		w.Error(ErrNotInteger)
		return
	}
	key := c.Args[1]
	l, msg := lookupList(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if l == nil {
		w.OK()
		return
	}
	from, to := listRange(start, stop, l.Len())
	l.Delete(to, l.Len())
	l.Delete(0, from)
	deleteIfEmpty(ks, key, l.Len())
	w.OK()
}

func lrem(c *Cmd, ks engine.Keyspace, w *Writer) {
	count, ok := values.ParseInt(c.Args[2])
	if !ok {
		w.Error(ErrNotInteger)
		return
	}
	key, elem := c.Args[1], c.Args[3]
	l, msg := lookupList(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if l == nil {
		w.Int(0)
		return
	}
	removed := int64(0)
	if count >= 0 {
		for i := 0; i < l.Len() && (count == 0 || removed < count); {
			if string(l.At(i)) == string(elem) {
				l.Delete(i, i+1)
				removed++
				continue
			}
			i++
		}
	} else {
		for i := l.Len() - 1; i >= 0 && removed < -count; i-- {
			if string(l.At(i)) == string(elem) {
				l.Delete(i, i+1)
				removed++
			}
		}
	}
	if removed > 0 {
		deleteIfEmpty(ks, key, l.Len())
	}
	w.Int(removed)
}

func linsert(c *Cmd, ks engine.Keyspace, w *Writer) {
	var after bool
	switch {
	case is(c.Args[2], "after"):
		after = true
	case is(c.Args[2], "before"):
	default:
		w.Error(ErrSyntax)
		return
	}
	key := c.Args[1]
	l, msg := lookupList(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	if l == nil {
		w.Int(0)
		return
	}
	for i, v := range l.Items() {
		if string(v) != string(c.Args[3]) {
			continue
		}
		if after {
			i++
		}
		if err := l.Insert(i, c.Args[4]); err != nil {
			w.Error(listSetError(err))
			return
		}
		ks.Changed(key)
		w.Int(int64(l.Len()))
		return
	}
	w.Int(-1)
}

func lpos(c *Cmd, ks engine.Keyspace, w *Writer) {
	rank, count, maxlen := int64(1), int64(-1), int64(0)
	for j := 3; j < len(c.Args); j++ {
		opt, more := c.Args[j], j+1 < len(c.Args)
		switch {
		case is(opt, "rank") && more:
			j++
			r, ok := values.ParseInt(c.Args[j])
			if !ok {
				w.Error(ErrNotInteger)
				return
			}
			if r == 0 {
				w.Error(ErrRankZero)
				return
			}
			if r == math.MinInt64 {
				w.Error(ErrLongRange) // Redis 7.2's range (7.0 negated it and overflowed)
				return
			}
			rank = r
		case is(opt, "count") && more:
			j++
			n, ok := values.ParseInt(c.Args[j])
			if !ok || n < 0 {
				w.Error(ErrCountNegative)
				return
			}
			count = n
		case is(opt, "maxlen") && more:
			j++
			n, ok := values.ParseInt(c.Args[j])
			if !ok || n < 0 {
				w.Error(ErrMaxlenNegative)
				return
			}
			maxlen = n
		default:
			w.Error(ErrSyntax)
			return
		}
	}
	fromTail := rank < 0
	if fromTail {
		rank = -rank
	}
	l, msg := lookupList(ks, c.Args[1])
	switch {
	case msg != "":
		w.Error(msg)
		return
	case l == nil && count != -1:
		w.Array(0)
		return
	case l == nil:
		w.Nil()
		return
	}
	n := l.Len()
	var found []int64
	matches := int64(0)
	for idx := 0; idx < n && (maxlen == 0 || int64(idx) < maxlen); idx++ {
		pos := idx
		if fromTail {
			pos = n - 1 - idx
		}
		if string(l.At(pos)) != string(c.Args[2]) {
			continue
		}
		matches++
		if matches < rank {
			continue
		}
		found = append(found, int64(pos))
		if count == -1 || (count != 0 && int64(len(found)) >= count) {
			break
		}
	}
	if count == -1 {
		if len(found) == 0 {
			w.Nil()
		} else {
			w.Int(found[0])
		}
		return
	}
	w.Array(len(found))
	for _, p := range found {
		w.Int(p)
	}
}

// lmoveCmd is LMOVE, RPOPLPUSH, BLMOVE and BRPOPLPUSH.
func lmoveCmd(c *Cmd, ks engine.Keyspace, w *Writer) {
	fromHead, toHead := false, true // RPOPLPUSH
	name := c.spec.Name
	if name == "lmove" || name == "blmove" {
		var ok1, ok2 bool
		fromHead, ok1 = listWhere(c.Args[3])
		toHead, ok2 = listWhere(c.Args[4])
		if !ok1 || !ok2 {
			w.Error(ErrSyntax)
			return
		}
	}
	blocking := name == "blmove" || name == "brpoplpush"
	if blocking {
		if msg := parseTimeout(c.Args[len(c.Args)-1], ks.Now()); msg != "" {
			w.Error(msg)
			return
		}
	}
	src, dst := c.Args[1], c.Args[2]
	l, msg := lookupList(ks, src)
	switch {
	case msg != "":
		w.Error(msg)
		return
	case l == nil:
		w.Nil()
		return
	}
	d, msg := lookupList(ks, dst)
	if msg != "" {
		w.Error(msg)
		return
	}
	if d == nil {
		e, err := ks.Create(dst, values.TypeList)
		if err != nil {
			w.Error(errorText(err))
			return
		}
		d = e.Obj.(*values.List)
	} else if d != l && d.Len() >= values.MaxElements {
		w.Error(ErrListSetTooMany)
		return
	}
	v := popN(l, fromHead, 1)[0]
	at := d.Len()
	if toHead {
		at = 0
	}
	d.Insert(at, v)
	deleteIfEmpty(ks, src, l.Len())
	ks.Changed(dst)
	w.Bulk(v)
}

// listWhere parses LEFT (true) or RIGHT (false).
func listWhere(b []byte) (head, ok bool) {
	switch {
	case is(b, "left"):
		return true, true
	case is(b, "right"):
		return false, true
	}
	return false, false
}

// parseTimeout checks a blocking command's timeout in seconds at nowNs
// (the stamped time), as Redis 7.2's getTimeoutFromObjectOrReply: a long
// double (string2ld: inf and hexadecimal pass); its milliseconds, rounded
// up, not negative and not past LLONG_MAX, counting from now. Redis 7.0
// let such a time overflow and answered "timeout is negative".
func parseTimeout(b []byte, nowNs int64) string {
	f, ok := parseLongDouble(b)
	if !ok {
		return ErrTimeoutFloat
	}
	ms := newLongDouble().Mul(f, big.NewFloat(1000))
	if ms.Cmp(new(big.Float).SetInt64(math.MaxInt64)) > 0 {
		return ErrTimeoutRange
	}
	if ms.Cmp(big.NewFloat(-1)) <= 0 {
		return ErrTimeoutNegative
	}
	tval, acc := ms.Int64()
	if acc == big.Below {
		tval++ // ceil
	}
	if tval > 0 && tval > math.MaxInt64-nowNs/1e6 {
		return ErrTimeoutRange
	}
	return ""
}

// bpop is BLPOP and BRPOP: the first non-empty list's first or last
// element, with its key.
func bpop(head bool) func(*Cmd, engine.Keyspace, *Writer) {
	return func(c *Cmd, ks engine.Keyspace, w *Writer) {
		if msg := parseTimeout(c.Args[len(c.Args)-1], ks.Now()); msg != "" {
			w.Error(msg)
			return
		}
		for _, key := range c.Args[1 : len(c.Args)-1] {
			l, msg := lookupList(ks, key)
			if msg != "" {
				w.Error(msg)
				return
			}
			if l == nil {
				continue
			}
			v := popN(l, head, 1)[0]
			deleteIfEmpty(ks, key, l.Len())
			w.Array(2)
			w.Bulk(key)
			w.Bulk(v)
			return
		}
		w.NilArray()
	}
}

// parseNumKeys reads a numkeys argument at args[at] and returns the
// count, or the error reply (numkeys < 1; not an integer).
func parseNumKeys(args [][]byte, at int) (int, string) {
	n, ok := values.ParseInt(args[at])
	if !ok || n < 1 {
		return 0, ErrNumkeys
	}
	return int(min(n, math.MaxInt32)), ""
}

// lmpop is LMPOP numkeys key... LEFT|RIGHT [COUNT n] and BLMPOP timeout
// numkeys ...: [key, [elements]] of the first non-empty list.
func lmpop(c *Cmd, ks engine.Keyspace, w *Writer) {
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
	head, ok := listWhere(c.Args[whereAt])
	if !ok {
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
	count = max(count, 1)
	for _, key := range c.Args[at+1 : whereAt] {
		l, msg := lookupList(ks, key)
		if msg != "" {
			w.Error(msg)
			return
		}
		if l == nil {
			continue
		}
		out := popN(l, head, int(min(count, int64(l.Len()))))
		deleteIfEmpty(ks, key, l.Len())
		w.Array(2)
		w.Bulk(key)
		w.Array(len(out))
		for _, v := range out {
			w.Bulk(v)
		}
		return
	}
	w.NilArray()
}
