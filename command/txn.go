package command

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/slots"
)

// Transactions: MULTI queues data, limiter and script commands; EXEC
// runs the data commands as one engine command (kv.Txn), atomically on
// their keys' shards and, in a cluster, as one Raft log entry, or, when a
// script or a limiter command is queued, every command on one copy of
// the transaction's keys (Scripts.Exec). WATCH reads a digest of each
// key's state; EXEC fails (a null array) when one changed.

// Queued is a command queued inside MULTI; its args are its own copy.
// With none of Spec, Limiter and Script set, it is UNWATCH, whose reply
// in EXEC's is +OK.
type Queued struct {
	Spec    *kv.Spec // a data command
	Limiter *Cmd     // a limiter command
	Script  bool     // an EVAL-family command
	Args    [][]byte
}

// Txn is one connection's transaction: MULTI's queue and WATCH's keys.
// Its zero value is not ready: Init it.
type Txn struct {
	On      bool     // between MULTI and EXEC or DISCARD
	Dirty   bool     // a command was refused while queuing: EXEC aborts
	Queued  []Queued // in order
	slot    int      // the hash slot of the queued keys (sharded), -1 none yet
	Watches []kv.Watch

	// What CLIENT LIST shows of it, read by other connections: the
	// commands queued (-1 outside MULTI) and the keys watched.
	shownMulti, shownWatch atomic.Int32
}

// Init readies a transaction that is not open.
func (t *Txn) Init() {
	t.slot = -1
	t.shownMulti.Store(-1)
}

// Shown is what CLIENT LIST shows, safe from any goroutine: the commands
// queued (-1 outside MULTI) and the keys watched.
func (t *Txn) Shown() (multi, watch int) {
	return int(t.shownMulti.Load()), int(t.shownWatch.Load())
}

// show publishes the counts Shown reads.
func (t *Txn) show() {
	m := int32(-1)
	if t.On {
		m = int32(len(t.Queued))
	}
	t.shownMulti.Store(m)
	t.shownWatch.Store(int32(len(t.Watches)))
}

// Reset ends the transaction and forgets the watched keys.
func (t *Txn) Reset() {
	t.On, t.Dirty, t.slot = false, false, -1
	clear(t.Queued)
	t.Queued = t.Queued[:0]
	t.Watches = nil
	t.show()
}

// Begin opens a transaction (MULTI).
func (t *Txn) Begin() {
	t.On, t.slot = true, -1
	t.show()
}

// Multi is MULTI: the error text when one is open already.
func (t *Txn) Multi() string {
	if t.On {
		return errMultiNested
	}
	t.Begin()
	return ""
}

// Discard is DISCARD: the error text when none is open.
func (t *Txn) Discard() string {
	if !t.On {
		return errDiscardNoMulti
	}
	t.Reset()
	return ""
}

// Unwatch is UNWATCH outside MULTI.
func (t *Txn) Unwatch() {
	t.Watches = nil
	t.show()
}

// Watch is WATCH keys: it reads their digests through do, or returns
// the error text.
func (t *Txn) Watch(do kv.Do, keys [][]byte) string {
	if t.On {
		return errWatchInMulti
	}
	ds, err := kv.ReadDigests(do, keys)
	if err != nil {
		return Text(err)
	}
	for i, k := range keys {
		t.Watches = append(t.Watches, kv.Watch{Key: append([]byte(nil), k...), Digest: ds[i]})
	}
	t.show()
	return ""
}

// Refused marks an open transaction to abort: one of its commands was
// refused.
func (t *Txn) Refused() {
	if t.On {
		t.Dirty = true
	}
}

// Queue adds a command to the open transaction, or returns why it cannot
// (the caller refuses it: Refused). sharded: the keys of a transaction
// must share one slot.
func (t *Txn) Queue(args [][]byte, sharded bool) string {
	q, text := Queue(args)
	if text != "" {
		return text
	}
	if sharded {
		if keys := q.Keys(); len(keys) > 0 {
			sl := slots.Of(keys[0])
			if t.slot >= 0 && sl != t.slot {
				return ErrCrossSlot
			}
			t.slot = sl
		}
	}
	t.Queued = append(t.Queued, q)
	if q.Args != nil { // not UNWATCH
		t.show()
	}
	return ""
}

// Batchable reports whether EXEC can join the pipeline's batch as one
// engine request (Request): the transaction holds only data commands.
func (t *Txn) Batchable() bool {
	if !t.On || t.Dirty {
		return false
	}
	for _, q := range t.Queued {
		if q.Spec == nil {
			return false // UNWATCH, a script or a limiter command
		}
	}
	return true
}

// Request is the engine request of a Batchable transaction; the
// transaction ends.
func (t *Txn) Request(resp3 bool) engine.Request {
	k, _ := Build(t.Queued, t.Watches, resp3)
	t.Reset()
	return k.Request()
}

// Exec is EXEC: the transaction runs (through do, or on a copy of its
// keys by st when it holds a script or a limiter command) and ends.
// scripts is called only then.
func (t *Txn) Exec(do kv.Do, scripts func() *Scripts, o Run) Outcome {
	if !t.On {
		return failed(errExecNoMulti)
	}
	defer t.Reset()
	if t.Dirty {
		return failed(kv.ErrExecAbort)
	}
	if OnCopy(t.Queued) {
		return scripts().Exec(t.Queued, t.Watches, o)
	}
	return Exec(do, t.Queued, t.Watches, o.RESP3)
}

// scriptCommands may be queued too: a transaction that holds one runs on
// a copy of its keys (Scripts.Exec).
var scriptCommands = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true}

// Queue classifies a command for MULTI's queue (args are copied), or
// returns why it cannot be queued.
func Queue(args [][]byte) (Queued, string) {
	lower := appendLower(nil, args[0])
	if string(lower) == "unwatch" {
		// Redis queues UNWATCH too: EXEC checks the watched keys before
		// running anything, so it only adds +OK to EXEC's reply.
		return Queued{}, ""
	}
	q := Queued{Script: scriptCommands[string(lower)]}
	spec, ok := kv.Lookup(args[0])
	switch {
	case ok:
		q.Spec = spec
	case q.Script:
	default:
		if q.Limiter = lookupLimiter(lower); q.Limiter == nil {
			return Queued{}, notInTransaction(args[0])
		}
	}
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	q.Args = make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		q.Args[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	return q, ""
}

// Keys lists the keys of a queued command.
func (q *Queued) Keys() [][]byte {
	var first, last, step int
	switch {
	case q.Spec != nil:
		return q.Spec.KeysOf(q.Args)
	case q.Script:
		first, last, step = EvalKeys(q.Args)
	case q.Limiter != nil:
		first, last, step = q.Limiter.FirstKey, q.Limiter.LastKey, q.Limiter.KeyStep
		if last < 0 {
			last += len(q.Args)
		}
	}
	var keys [][]byte
	if first > 0 {
		for i := first; i <= last && i < len(q.Args); i += step {
			keys = append(keys, q.Args[i])
		}
	}
	return keys
}

// OnCopy reports whether a script or a limiter command is queued: the
// transaction then runs on a copy of its keys (Scripts.Exec).
func OnCopy(queued []Queued) bool {
	for _, q := range queued {
		if q.Script || q.Limiter != nil {
			return true
		}
	}
	return false
}

// Build returns the transaction of the queued data commands (UNWATCH,
// queued too, is not one) and how many there are.
func Build(queued []Queued, watches []kv.Watch, resp3 bool) (*kv.Txn, int) {
	cmds := make([]*kv.Cmd, 0, len(queued))
	for _, q := range queued {
		if q.Spec != nil {
			cmds = append(cmds, kv.New(q.Spec, q.Args, resp3))
		}
	}
	return kv.NewTxn(cmds, watches, resp3), len(cmds)
}

// Exec runs a transaction of data commands (and UNWATCHes: OnCopy is
// false) through do.
func Exec(do kv.Do, queued []Queued, watches []kv.Watch, resp3 bool) Outcome {
	t, n := Build(queued, watches, resp3)
	res, err := do(t.Request())
	if err == nil {
		err = res.Err
	}
	if err != nil {
		return failed(Text(err))
	}
	reply := res.Reply
	if n < len(queued) {
		var ok bool
		if reply, ok = withUnwatches(reply, queued, n); !ok {
			return failed(errExecReply)
		}
	}
	return Outcome{Reply: []byte(reply)}
}

// withUnwatches puts the +OK of each queued UNWATCH into the reply of
// the transaction's other n commands, in queuing order. A reply that is
// not an array of n (the null array of a changed watched key) is left as
// it is.
func withUnwatches(reply string, queued []Queued, n int) (string, bool) {
	head := "*" + strconv.Itoa(n) + "\r\n"
	if !strings.HasPrefix(reply, head) {
		return reply, true
	}
	var b strings.Builder
	b.Grow(len(reply) + 5*(len(queued)-n) + 4)
	b.WriteString("*" + strconv.Itoa(len(queued)) + "\r\n")
	at := len(head)
	for _, q := range queued {
		if q.Spec == nil {
			b.WriteString("+OK\r\n")
			continue
		}
		end, ok := skipValue(reply, at)
		if !ok {
			return "", false
		}
		b.WriteString(reply[at:end])
		at = end
	}
	return b.String(), at == len(reply)
}

// skipValue returns the end of the RESP2 or RESP3 value that starts at i.
func skipValue(b string, i int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	e := strings.Index(b[i:], "\r\n")
	if e < 0 {
		return 0, false
	}
	line, next := b[i+1:i+e], i+e+2
	switch b[i] {
	case '+', '-', ':', ',', '(', '#', '_':
		return next, true
	case '$', '=', '!':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 {
			return 0, false
		}
		if n < 0 {
			return next, true
		}
		end := next + n + 2
		return end, end <= len(b) && b[end-2:end] == "\r\n"
	case '*', '~', '>', '%':
		n, err := strconv.Atoi(line)
		if err != nil || n < -1 {
			return 0, false
		}
		if b[i] == '%' && n > 0 {
			n *= 2
		}
		for range n {
			var ok bool
			if next, ok = skipValue(b, next); !ok {
				return 0, false
			}
		}
		return next, true
	}
	return 0, false
}

// Exec runs a transaction that holds scripts or limiter commands: every
// queued command runs in order on one copy of the transaction's keys,
// and the writes of all of them apply as one set of effects, so the
// transaction is atomic as a whole, as in Redis.
func (st *Scripts) Exec(queued []Queued, watches []kv.Watch, o Run) Outcome {
	var keys [][]byte
	for _, w := range watches {
		keys = append(keys, w.Key)
	}
	for i := range queued {
		keys = append(keys, queued[i].Keys()...)
	}
	run := st.start(keys)
	defer st.remove(run)
	return st.onOverlay(keys, watches, o.RESP3, func(ov *kv.Overlay, out []byte) ([]byte, bool) {
		w := kv.Writer{B: out, RESP3: o.RESP3}
		w.Array(len(queued))
		out = w.B
		for _, q := range queued {
			switch {
			case q.Spec != nil:
				out = kv.New(q.Spec, q.Args, o.RESP3).Exec(ov, out)
			case q.Script:
				out = st.queuedScript(ov, run, q.Args, o, out)
			case q.Limiter != nil:
				sc := &caller{st: st, ov: ov, run: run.run, slot: -1}
				out = sc.limiter(q.Limiter, q.Args, o.RESP3, out)
			default: // UNWATCH
				out = append(out, "+OK\r\n"...)
			}
		}
		return out, false
	})
}

// queuedScript runs a queued EVAL-family command: its numkeys and script
// are checked now, as Redis checks them when EXEC runs it.
func (st *Scripts) queuedScript(ov *kv.Overlay, run *scriptRun, args [][]byte, o Run, out []byte) []byte {
	name := string(appendLower(nil, args[0]))
	bySHA := name == "evalsha" || name == "evalsha_ro"
	ro := name == "eval_ro" || name == "evalsha_ro"
	if _, text := st.scriptKeys(args, bySHA); text != "" {
		return appendErr(out, text)
	}
	out, _ = st.runScript(ov, run, args, bySHA, ro, o, out)
	return out
}

// MULTI and a good EXEC join the pipeline's batch at the edge (Txn.Begin,
// Txn.Request); these answer the rest: nesting, EXEC without MULTI, an
// aborted transaction, one that holds scripts or limiter commands.
func init() {
	txn := func(name string, arity int, flags []string, acl string, summary, since string, run Handler) *Cmd {
		return &Cmd{Name: name, Arity: arity, Flags: flags, ACL: []string{acl, "@transaction"},
			Summary: summary, Group: "transactions", Since: since, Run: run}
	}
	fast := []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	watch := txn("watch", -2, fast, "@fast", "Monitors changes to keys to determine the execution of a transaction.", "2.2.0",
		func(x *Call, args [][]byte) { x.okOr(x.Txn.Watch(x.Env.do1, args[1:])) })
	watch.FirstKey, watch.LastKey, watch.KeyStep = 1, -1, 1
	register(
		txn("multi", 1, fast, "@fast", "Starts a transaction.", "1.2.0",
			func(x *Call, _ [][]byte) { x.okOr(x.Txn.Multi()) }),
		txn("exec", 1, []string{"noscript", "loading", "stale", "skip_slowlog"}, "@slow", "Executes all commands in a transaction.", "1.2.0",
			func(x *Call, _ [][]byte) { x.write(x.Txn.Exec(x.Env.do1, x.Env.Scripts, x.run())) }),
		txn("discard", 1, fast, "@fast", "Discards a transaction.", "2.0.0",
			func(x *Call, _ [][]byte) { x.okOr(x.Txn.Discard()) }),
		watch,
		txn("unwatch", 1, fast, "@fast", "Forgets about watched keys of a transaction.", "2.2.0",
			func(x *Call, _ [][]byte) { x.Txn.Unwatch(); x.W.OK() }),
	)
}

// notQueued are the commands that run at once inside MULTI.
var notQueued = map[string]bool{"multi": true, "exec": true, "discard": true, "watch": true, "quit": true, "reset": true}

// Queues reports whether the command is queued inside MULTI (Txn.Queue
// then says whether it may be) rather than run at once.
func (c *Cmd) Queues() bool { return !notQueued[c.Name] }
