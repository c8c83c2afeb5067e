package server

import "github.com/rlserver/rlserver/command"

// Transactions at the edge. A connection's transaction, its queue and
// what EXEC runs are package command's (command.Txn, and the MULTI, EXEC,
// DISCARD, WATCH, UNWATCH entries); the edge queues the commands that
// arrive inside MULTI, and batches a transaction of data commands with
// the pipeline.

// multiCommand and execCommand are the table's MULTI and EXEC;
// execBatched is EXEC as a batched command, whose reply is its
// transaction's, as the engine made it.
var (
	multiCommand = command.ByName("multi")
	execCommand  = command.ByName("exec")
	execBatched  = func() *command.Cmd {
		c := *execCommand
		c.Run, c.Data = nil, true
		return &c
	}()
)

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
// MULTI, an aborted transaction, UNWATCH or scripts queued) is command's
// to answer.
func (s *Server) batchTxn(c *client, cmd *command.Cmd) bool {
	switch {
	case cmd == multiCommand && !c.txn.On:
		c.txn.Begin()
		c.pending = append(c.pending, pendingReply{status: "OK"})
		c.st.at(cmd.ID).calls++
		return true
	case cmd == execCommand && c.txn.Batchable():
		first := len(c.reqs)
		c.reqs = append(c.reqs, c.txn.Request(c.memo.RESP3))
		c.pending = append(c.pending, pendingReply{cmd: execBatched, first: first, n: 1})
		return true
	}
	return false
}

// refuse answers a command with an error, in order with the pending
// batch; inside MULTI the transaction will abort.
func (s *Server) refuse(c *client, text string) {
	c.txn.Refused()
	s.reply(c, text)
}
