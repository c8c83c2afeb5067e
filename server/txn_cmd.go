package server

import (
	"context"

	"github.com/rlserver/rlserver/engine"
)

// Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. A connection's
// transaction, its queue and what EXEC runs are package command's
// (command.Txn); the edge registers the commands, batches a transaction
// of data commands with the pipeline, and writes the outcome.

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
	if text := c.txn.Queue(args, s.router != nil); text != "" {
		s.refuse(c, text)
		return
	}
	c.pending = append(c.pending, pendingReply{status: "QUEUED"})
}

// batchTxn takes MULTI and a good EXEC into the pending batch, so a
// pipeline of transactions reaches the backend in one call; it reports
// whether it did. Everything else about them (nesting, EXEC without
// MULTI, an aborted transaction, UNWATCH or scripts queued) is the
// handlers' to answer.
func (s *Server) batchTxn(c *client, cmd *entry) bool {
	switch {
	case cmd == multiCommand && !c.txn.On:
		c.txn.Begin()
		c.pending = append(c.pending, pendingReply{status: "OK"})
		c.st.at(cmd.id).calls++
		return true
	case cmd == execCommand && c.txn.Batchable():
		first := len(c.reqs)
		c.reqs = append(c.reqs, c.txn.Request(c.memo.RESP3))
		c.pending = append(c.pending, pendingReply{cmd: &execBatched, first: first, n: 1})
		return true
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
	c.txn.Refused()
	s.reply(c, text)
}

// okOr writes +OK, or the error text when there is one.
func (c *client) okOr(text string) outcome {
	if text != "" {
		c.rep.error(text)
	} else {
		c.rep.conn.WriteString("OK")
	}
	return cmdOK
}

func cmdMulti(_ *Server, c *client, _ [][]byte) outcome   { return c.okOr(c.txn.Multi()) }
func cmdDiscard(_ *Server, c *client, _ [][]byte) outcome { return c.okOr(c.txn.Discard()) }

func cmdUnwatch(_ *Server, c *client, _ [][]byte) outcome {
	c.txn.Unwatch()
	return c.okOr("")
}

func cmdWatch(s *Server, c *client, args [][]byte) outcome {
	return c.okOr(c.txn.Watch(s.do1, args[1:]))
}

func cmdExec(s *Server, c *client, _ [][]byte) outcome {
	s.write(c, c.txn.Exec(s.do1, s.scriptsOf, s.scriptRun(c)))
	return cmdOK
}

// do1 runs one request through the backend (kv.Do).
func (s *Server) do1(req engine.Request) (engine.Result, error) {
	res := make([]engine.Result, 1)
	err := s.backend.Do(context.Background(), []engine.Request{req}, res)
	return res[0], err
}
