package server

import (
	"context"
	"sync/atomic"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/slots"
)

// Transactions: MULTI queues commands (command.Queue), EXEC runs them
// (command.Exec, or command.Scripts.Exec when a script or a limiter
// command is queued). The edge keeps each connection's transaction and
// batches a plain one with the pipeline.

// txnState is a connection's transaction.
type txnState struct {
	on      bool             // between MULTI and EXEC or DISCARD
	dirty   bool             // a command was refused while queuing: EXEC aborts
	queued  []command.Queued // in order
	slot    int              // the hash slot of the queued keys (cluster), -1 none yet
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
	q, text := command.Queue(args)
	if text != "" {
		s.refuse(c, text)
		return
	}
	if s.router != nil {
		if keys := q.Keys(); len(keys) > 0 {
			sl := slots.Of(keys[0])
			if c.txn.slot >= 0 && sl != c.txn.slot {
				s.refuse(c, errCrossSlot)
				return
			}
			c.txn.slot = sl
		}
	}
	c.txn.queued = append(c.txn.queued, q)
	if q.Args != nil { // not UNWATCH
		c.txn.show()
	}
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
		t, _ := command.Build(c.txn.queued, c.txn.watches, c.memo.RESP3)
		first := len(c.reqs)
		c.reqs = append(c.reqs, t.Request())
		c.pending = append(c.pending, pendingReply{cmd: &execBatched, first: first, n: 1})
		c.txn.reset()
		return true
	}
	return false
}

// unwatches reports whether an UNWATCH, a script or a limiter command
// is queued: its EXEC takes the handler's path (cmdExec), which places
// UNWATCH's replies and runs scripts.
func (t *txnState) unwatches() bool {
	for _, q := range t.queued {
		if q.Spec == nil {
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
	if command.OnCopy(c.txn.queued) {
		s.write(c, s.scriptsOf().Exec(c.txn.queued, c.txn.watches, s.scriptRun(c)))
		return cmdOK
	}
	s.write(c, command.Exec(s.do1, c.txn.queued, c.txn.watches, c.memo.RESP3))
	return cmdOK
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
