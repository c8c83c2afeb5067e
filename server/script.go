package server

import "github.com/rlserver/rlserver/command"

// A pipeline's scripts are a batch too: consecutive EVAL-family commands
// (outside MULTI) wait in c.scripts, with their place among the pending
// replies, and run together when the pipeline ends or another command
// comes (command.Scripts.EvalBatch: one backend call reads every
// script's keys, one applies every script's effects). The pending batch
// holds either scripts or engine requests, never both, so replies keep
// the pipeline's order.

// evalCmds are the EVAL-family commands and how each names its script.
var evalCmds = func() map[*command.Cmd]command.EvalCall {
	m := map[*command.Cmd]command.EvalCall{}
	for name, c := range map[string]command.EvalCall{
		"eval": {}, "evalsha": {BySHA: true},
		"eval_ro": {RO: true}, "evalsha_ro": {BySHA: true, RO: true},
	} {
		if cmd := command.Lookup([]byte(name)); cmd != nil {
			m[cmd] = c
		}
	}
	return m
}()

// batchesScripts reports whether cmd joins the pending batch's scripts.
func (c *client) batchesScripts(cmd *command.Cmd) bool {
	if c.txn.On {
		return false
	}
	_, ok := evalCmds[cmd]
	return ok
}

// queueScript adds a script to the pending batch, after running the
// engine requests pending before it.
func (s *Server) queueScript(c *client, cmd *command.Cmd, args [][]byte) {
	if len(c.reqs) > 0 {
		s.flushBatch(c)
	}
	call := evalCmds[cmd]
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
		c.rep.errors++
	}
	c.rep.conn.WriteRaw(o.Reply)
	return o.Failed
}
