package server

import "github.com/rlserver/rlserver/command"

// A pipeline's scripts are a batch too: consecutive EVAL-family commands
// (outside MULTI) wait in c.scripts, with their place among the pending
// replies, and run together when the pipeline ends or another command
// comes (command.Scripts.EvalBatch: one backend call reads every
// script's keys, one applies every script's effects). The pending batch
// holds either scripts or engine requests, never both, so replies keep
// the pipeline's order.

// evalCmds are the EVAL-family commands and how each names its script:
// four pointers to compare, so the limiter commands' path pays no lookup.
var evalCmds = func() (m [4]struct {
	cmd  *command.Cmd
	call command.EvalCall
}) {
	for i, e := range []struct {
		name string
		call command.EvalCall
	}{
		{"eval", command.EvalCall{}}, {"evalsha", command.EvalCall{BySHA: true}},
		{"eval_ro", command.EvalCall{RO: true}}, {"evalsha_ro", command.EvalCall{BySHA: true, RO: true}},
	} {
		m[i].cmd, m[i].call = command.Lookup([]byte(e.name)), e.call
	}
	return m
}()

// evalCall is how cmd names its script, if it is an EVAL-family command.
func evalCall(cmd *command.Cmd) (command.EvalCall, bool) {
	for _, e := range evalCmds {
		if e.cmd == cmd && cmd != nil {
			return e.call, true
		}
	}
	return command.EvalCall{}, false
}

// batchesScripts reports whether cmd joins the pending batch's scripts.
func (c *client) batchesScripts(cmd *command.Cmd) bool {
	if c.txn.On {
		return false
	}
	_, ok := evalCall(cmd)
	return ok
}

// queueScript adds a script to the pending batch, after running the
// engine requests pending before it.
func (s *Server) queueScript(c *client, cmd *command.Cmd, args [][]byte) {
	if len(c.reqs) > 0 {
		s.flushBatch(c)
	}
	call, _ := evalCall(cmd)
	call.Args = args
	c.pending = append(c.pending, pendingReply{cmd: cmd, first: len(c.scripts), script: true})
	c.scripts = append(c.scripts, call)
}

// runScripts runs the pending scripts.
func (s *Server) runScripts(c *client) {
	c.call.Reset(c.rep.resp3())
	c.outs = s.env.Scripts().EvalBatch(c.scripts, c.call.ScriptRun(), c.outs)
}

// writeScript writes a pending script's reply and reports whether it is
// an error.
func (s *Server) writeScript(c *client, p pendingReply) bool {
	o := c.outs[p.first]
	if o.Err != "" {
		c.rep.error(o.Err)
		return true
	}
	if o.Failed {
		c.rep.failedRaw(o.Reply)
	}
	c.rep.conn.WriteRaw(o.Reply)
	return o.Failed
}
