package server

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// Transactions: MULTI queues data commands, EXEC runs them as one engine
// command (kv.Txn), atomically on their keys' shards and, in a cluster,
// as one Raft log entry. WATCH reads a digest of each key's state; EXEC
// fails (a null array) when one changed.

// txnState is a connection's transaction.
type txnState struct {
	on      bool        // between MULTI and EXEC or DISCARD
	dirty   bool        // a command was refused while queuing: EXEC aborts
	queued  []queuedCmd // in order
	slot    int         // the hash slot of the queued keys (cluster), -1 none yet
	watches []kv.Watch

	// What CLIENT LIST shows of it, read by other connections: the
	// commands queued (-1 outside MULTI) and the keys watched.
	shownMulti, shownWatch atomic.Int32
}

// show publishes the counts CLIENT LIST reads.
func (t *txnState) show() {
	m := int32(-1)
	if t.on {
		m = int32(len(t.queued))
	}
	t.shownMulti.Store(m)
	t.shownWatch.Store(int32(len(t.watches)))
}

// scriptCommands may be queued too: a transaction that holds one runs on
// a copy of its keys (Server.execScripts).
var scriptCommands = map[string]bool{"eval": true, "evalsha": true, "eval_ro": true, "evalsha_ro": true}

type queuedCmd struct {
	script  bool     // an EVAL-family command (spec nil)
	limiter *entry   // a limiter command (spec nil)
	spec    *kv.Spec // nil: UNWATCH (whose reply in EXEC's is +OK), a script or a limiter command
	args    [][]byte // copied out of the connection's buffer
}

// reset ends the transaction and forgets the watched keys.
func (t *txnState) reset() {
	t.on, t.dirty, t.slot = false, false, -1
	clear(t.queued)
	t.queued = t.queued[:0]
	t.watches = nil
	t.show()
}

var txnCommands = map[string]bool{"multi": true, "exec": true, "discard": true, "watch": true, "quit": true, "reset": true}

func init() {
	txn := func(name string, arity int, flags []string, acl string, summary, since string, h func(*Server, *client, [][]byte) outcome) *entry {
		return &entry{name: name, arity: arity, flags: flags, acl: []string{acl, "@transaction"},
			summary: summary, group: "transactions", since: since, handler: h}
	}
	fast := []string{"noscript", "loading", "stale", "fast", "allow_busy"}
	watch := txn("watch", -2, fast, "@fast", "Monitors changes to keys to determine the execution of a transaction.", "2.2.0", cmdWatch)
	watch.firstKey, watch.lastKey, watch.keyStep = 1, -1, 1
	multiCommand = txn("multi", 1, fast, "@fast", "Starts a transaction.", "1.2.0", cmdMulti)
	execCommand = txn("exec", 1, []string{"noscript", "loading", "stale", "skip_slowlog"}, "@slow", "Executes all commands in a transaction.", "1.2.0", cmdExec)
	register(
		multiCommand,
		execCommand,
		txn("discard", 1, fast, "@fast", "Discards a transaction.", "2.0.0", cmdDiscard),
		watch,
		txn("unwatch", 1, fast, "@fast", "Forgets about watched keys of a transaction.", "2.2.0", cmdUnwatch),
	)
	execBatched = *execCommand
	execBatched.handler, execBatched.render = nil, renderData
}

// queue adds a command to the open transaction, or refuses it (and marks
// the transaction to abort).
func (s *Server) queue(c *client, args [][]byte) {
	if equalFold(args[0], "unwatch") {
		// Redis queues UNWATCH too: EXEC checks the watched keys before
		// running anything, so it only adds +OK to EXEC's reply.
		c.txn.queued = append(c.txn.queued, queuedCmd{})
		c.pending = append(c.pending, pendingReply{status: "QUEUED"})
		return
	}
	spec, ok := kv.Lookup(args[0])
	cmd := lookup(appendLower(c.lower[:0], args[0]))
	isScript := scriptCommands[cmd.name]
	var limiter *entry
	if !ok && !isScript && cmd.batch != nil && cmd.render != nil {
		limiter = cmd // RL.ALLOW, CL.THROTTLE...: run on the copy (execScripts)
	}
	if !ok && !isScript && limiter == nil {
		s.refuse(c, "ERR Command not allowed inside a transaction: "+string(args[0])+" is not a data, limiter or script command")
		return
	}
	if s.router != nil {
		var keys [][]byte
		if ok {
			keys = spec.KeysOf(args)
		} else if first, last, _ := cmd.keyRange(args); first > 0 {
			keys = args[first : last+1]
		}
		if len(keys) > 0 {
			sl := slots.Of(keys[0])
			if c.txn.slot >= 0 && sl != c.txn.slot {
				s.refuse(c, errCrossSlot)
				return
			}
			c.txn.slot = sl
		}
	}
	n := 0
	for _, a := range args {
		n += len(a)
	}
	buf := make([]byte, 0, n)
	cp := make([][]byte, len(args))
	for i, a := range args {
		buf = append(buf, a...)
		cp[i] = buf[len(buf)-len(a) : len(buf) : len(buf)]
	}
	c.txn.queued = append(c.txn.queued, queuedCmd{spec: spec, args: cp, script: isScript, limiter: limiter})
	c.txn.show()
	c.pending = append(c.pending, pendingReply{status: "QUEUED"})
}

// batchTxn takes MULTI and a good EXEC into the pending batch, so a
// pipeline of transactions reaches the backend in one call; it reports
// whether it did. Everything else about them (nesting, EXEC without
// MULTI, an aborted transaction) is the handlers' to answer.
func (s *Server) batchTxn(c *client, cmd *entry) bool {
	switch {
	case cmd == multiCommand && !c.txn.on:
		c.txn.begin()
		c.pending = append(c.pending, pendingReply{status: "OK"})
		c.st.at(cmd.id).calls++
		return true
	case cmd == execCommand && c.txn.on && !c.txn.dirty && !c.txn.unwatches():
		t, _ := c.txn.build(c.memo.resp3)
		first := len(c.reqs)
		c.reqs = append(c.reqs, t.Request())
		c.pending = append(c.pending, pendingReply{cmd: &execBatched, first: first, n: 1})
		c.txn.reset()
		return true
	}
	return false
}

// unwatches reports whether an UNWATCH or a script is queued: its EXEC
// takes the handler's path (cmdExec), which places UNWATCH's replies and
// runs scripts.
func (t *txnState) unwatches() bool {
	for _, q := range t.queued {
		if q.spec == nil {
			return true
		}
	}
	return false
}

// scripts reports whether a script or a limiter command is queued: the
// transaction then runs on a copy of its keys (execScripts).
func (t *txnState) scripts() bool {
	for _, q := range t.queued {
		if q.script || q.limiter != nil {
			return true
		}
	}
	return false
}

// multiCommand and execCommand are the table's MULTI and EXEC;
// execBatched is EXEC as a batched command, whose reply is its
// transaction's.
var (
	multiCommand, execCommand *entry
	execBatched               entry
)

// refuse answers a command with an error, in order with the pending
// batch; inside MULTI the transaction will abort.
func (s *Server) refuse(c *client, text string) {
	if c.txn.on {
		c.txn.dirty = true
	}
	s.reply(c, text)
}

func cmdMulti(_ *Server, c *client, _ [][]byte) outcome {
	if c.txn.on {
		c.rep.error("ERR MULTI calls can not be nested")
		return cmdOK
	}
	c.txn.begin()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// begin opens a transaction.
func (t *txnState) begin() {
	t.on, t.slot = true, -1
	t.show()
}

// build returns the transaction of the queued data commands (UNWATCH,
// queued too, is not one) and how many there are.
func (t *txnState) build(resp3 bool) (*kv.Txn, int) {
	cmds := make([]*kv.Cmd, 0, len(t.queued))
	for _, q := range t.queued {
		if q.spec != nil {
			cmds = append(cmds, kv.New(q.spec, q.args, resp3))
		}
	}
	return kv.NewTxn(cmds, t.watches, resp3), len(cmds)
}

func cmdDiscard(_ *Server, c *client, _ [][]byte) outcome {
	if !c.txn.on {
		c.rep.error("ERR DISCARD without MULTI")
		return cmdOK
	}
	c.txn.reset()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdUnwatch(_ *Server, c *client, _ [][]byte) outcome {
	c.txn.watches = nil
	c.txn.show()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdExec(s *Server, c *client, _ [][]byte) outcome {
	if !c.txn.on {
		c.rep.error("ERR EXEC without MULTI")
		return cmdOK
	}
	defer c.txn.reset()
	if c.txn.dirty {
		c.rep.error(kv.ErrExecAbort)
		return cmdOK
	}
	if c.txn.scripts() {
		s.execScripts(c)
		return cmdOK
	}
	t, n := c.txn.build(c.memo.resp3)
	reply, err := s.runCommand(t.Request())
	if err != "" {
		c.rep.error(err)
		return cmdOK
	}
	if n < len(c.txn.queued) {
		var ok bool
		if reply, ok = withUnwatches(reply, c.txn.queued, n); !ok {
			c.rep.error("ERR unexpected reply to EXEC")
			return cmdOK
		}
	}
	c.rep.conn.WriteRaw([]byte(reply))
	return cmdOK
}

// withUnwatches puts the +OK of each queued UNWATCH into the reply of
// the transaction's other n commands, in queuing order. A reply that is
// not an array of n (the null array of a changed watched key) is left as
// it is.
func withUnwatches(reply string, queued []queuedCmd, n int) (string, bool) {
	head := "*" + strconv.Itoa(n) + "\r\n"
	if !strings.HasPrefix(reply, head) {
		return reply, true
	}
	var b strings.Builder
	b.Grow(len(reply) + 5*(len(queued)-n) + 4)
	b.WriteString("*" + strconv.Itoa(len(queued)) + "\r\n")
	at := len(head)
	for _, q := range queued {
		if q.spec == nil {
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

func cmdWatch(s *Server, c *client, args [][]byte) outcome {
	if c.txn.on {
		c.rep.error("ERR WATCH inside MULTI is not allowed")
		return cmdOK
	}
	keys := args[1:]
	ds, err := kv.ReadDigests(s.do1, keys)
	if err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	for i, k := range keys {
		c.txn.watches = append(c.txn.watches, kv.Watch{Key: append([]byte(nil), k...), Digest: ds[i]})
	}
	c.txn.show()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// do1 runs one request through the backend (kv.Do).
func (s *Server) do1(req engine.Request) (engine.Result, error) {
	res := make([]engine.Result, 1)
	err := s.backend.Do(context.Background(), []engine.Request{req}, res)
	return res[0], err
}

// runCommand runs one data request through the backend and returns its
// reply, or an error text.
func (s *Server) runCommand(req engine.Request) (reply string, errText string) {
	res := make([]engine.Result, 1)
	if err := s.backend.Do(context.Background(), []engine.Request{req}, res); err != nil {
		return "", engineErrorText(err)
	}
	if res[0].Err != nil {
		return "", engineErrorText(res[0].Err)
	}
	return res[0].Reply, ""
}

// execScripts runs a transaction that holds scripts: every queued command
// runs in order on one copy of the transaction's keys, and the writes of
// all of them apply as one set of effects (Server.onOverlay), so the
// transaction is atomic as a whole, as in Redis.
func (s *Server) execScripts(c *client) {
	resp3 := c.memo.resp3
	var keys [][]byte
	for _, w := range c.txn.watches {
		keys = append(keys, w.Key)
	}
	for _, q := range c.txn.queued {
		switch {
		case q.spec != nil:
			keys = append(keys, q.spec.KeysOf(q.args)...)
		case q.script || q.limiter != nil:
			if first, last, step := lookup(appendLower(nil, q.args[0])).keyRange(q.args); first > 0 {
				for i := first; i <= last && i < len(q.args); i += step {
					keys = append(keys, q.args[i])
				}
			}
		}
	}
	st := s.scriptsOf()
	run := st.start(keys)
	defer st.remove(run)
	queued := c.txn.queued
	s.onOverlay(c, keys, c.txn.watches, func(ov *kv.Overlay, out []byte) []byte {
		w := kv.Writer{B: out, RESP3: resp3}
		w.Array(len(queued))
		out = w.B
		for _, q := range queued {
			switch {
			case q.spec != nil:
				out = kv.New(q.spec, q.args, resp3).Exec(ov, out)
			case q.script:
				out = s.queuedScript(ov, run, q.args, resp3, out)
			case q.limiter != nil:
				sc := &scriptCaller{s: s, ov: ov, run: run.run, slot: -1}
				out = append(out, sc.limiter(q.limiter, q.args, resp3)...)
			default: // UNWATCH
				out = append(out, "+OK\r\n"...)
			}
		}
		return out
	})
}

// queuedScript runs a queued EVAL-family command: its numkeys and script
// are checked now, as Redis checks them when EXEC runs it.
func (s *Server) queuedScript(ov *kv.Overlay, run *scriptRun, args [][]byte, resp3 bool, out []byte) []byte {
	name := string(appendLower(nil, args[0]))
	bySHA := name == "evalsha" || name == "evalsha_ro"
	ro := name == "eval_ro" || name == "evalsha_ro"
	fail := func(text string) []byte { return append(append(append(out, '-'), text...), '\r', '\n') }
	n, ok := values.ParseInt(args[2])
	switch {
	case !ok:
		return fail(errNotInteger)
	case n < 0:
		return fail("ERR Number of keys can't be negative")
	case n > int64(len(args)-3):
		return fail("ERR Number of keys can't be greater than number of args")
	case bySHA && !s.scriptsOf().cache.Exists(strings.ToLower(string(args[1]))):
		return fail(script.ErrNoScript)
	}
	return s.runScript(ov, run, args, bySHA, ro, resp3, out)
}
