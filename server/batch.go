package server

import (
	"context"
	"unsafe"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// The batch step: a pipeline's limiter commands are answered together,
// with one call to the Backend, and their replies written in order. For
// the path of one RL.ALLOW from the socket to the engine and back, run
// and read Example (example_test.go).

// reply queues an error reply in order with the pending batch.
func (s *Server) reply(c *client, errText string) {
	c.pending = append(c.pending, pendingReply{errText: errText})
}

// batchTiered adds a tiered command's requests and policy names to the
// pending batch.
func (s *Server) batchTiered(c *client, cmd *command.Cmd, args [][]byte) {
	first := len(c.reqs)
	for len(c.names) < first {
		c.names = append(c.names, nil)
	}
	var errText string
	c.reqs, c.names, errText = cmd.Tiered(c.reqs, c.names, args)
	if errText != "" {
		c.reqs = c.reqs[:first]
		c.names = c.names[:first]
	}
	c.pending = append(c.pending, pendingReply{cmd: cmd, first: first, n: len(c.reqs) - first, errText: errText})
}

// flushBatch sends the pending requests to the backend in one call and
// writes every pending reply in order.
func (s *Server) flushBatch(c *client) {
	if len(c.pending) == 0 {
		return
	}
	if len(c.scripts) > 0 {
		s.runScripts(c) // script.go; never with reqs
	}
	var batchErr error
	if len(c.reqs) > 0 {
		if cap(c.res) < len(c.reqs) {
			c.res = make([]engine.Result, len(c.reqs), 2*len(c.reqs))
		}
		c.res = c.res[:len(c.reqs)]
		batchErr = s.doBatch(context.Background(), c)
	}
	var allowed, denied int64
	for _, p := range c.pending {
		var t *connTally
		if p.cmd != nil {
			t = c.st.at(p.cmd.ID)
			t.calls++
		}
		switch {
		case p.status != "":
			c.rep.conn.WriteString(p.status)
			continue
		case p.script:
			if s.writeScript(c, p) {
				t.failed++
			}
			continue
		case p.errText != "":
			c.rep.error(p.errText)
		case batchErr != nil:
			c.rep.error(command.Text(batchErr))
		case p.cmd.RenderTiered != nil:
			a, d := s.renderTieredReply(c, p, t)
			allowed += a
			denied += d
			continue
		default:
			res := c.res[p.first : p.first+p.n]
			if err := command.FirstErr(res); err != nil {
				c.rep.error(command.Text(err))
				break
			}
			if p.cmd.Data {
				renderData(&c.rep, res[0].Reply)
				continue
			}
			// Rendered into the replier's writer, a field: the call
			// through a function value then allocates nothing.
			c.rep.kw.B = c.rep.kw.B[:0]
			a, d := p.cmd.Render(&c.rep.kw, res)
			c.rep.conn.WriteRaw(c.rep.kw.B)
			allowed += a
			denied += d
			t.allowed += a
			t.denied += d
			if d > 0 {
				c.st.deny(c.reqs[p.first].Key)
			}
			continue
		}
		if t != nil {
			t.failed++
		}
	}
	if allowed > 0 {
		s.Stats.Allowed.Add(allowed)
	}
	if denied > 0 {
		s.Stats.Denied.Add(denied)
	}
	if last := c.pending[len(c.pending)-1].cmd; last != nil {
		c.mu.Lock()
		c.lastCmd = last.Name
		c.mu.Unlock()
	}
	clear(c.reqs) // drop references to the connection's buffers
	c.reqs = c.reqs[:0]
	c.memo.Release()
	clear(c.names)
	c.names = c.names[:0]
	c.pending = c.pending[:0]
	if len(c.scripts) > 0 {
		clear(c.scripts) // drop references to the connection's buffers
		c.scripts = c.scripts[:0]
		clear(c.outs)
		c.outs = c.outs[:0]
	}
}

// doBatch sends the pending requests to the backend: through DoPolicies
// when one of them names a policy.
func (s *Server) doBatch(ctx context.Context, c *client) error {
	if len(c.names) == 0 {
		return s.backend.Do(ctx, c.reqs, c.res)
	}
	pb := s.policies()
	if pb == nil {
		// No policies here: every policy is unknown, the rest runs.
		out, idx := noPolicies.ResolveBatch(c.reqs, c.names, c.res)
		tmp := make([]engine.Result, len(out))
		if err := s.backend.Do(ctx, out, tmp); err != nil {
			return err
		}
		for k, i := range idx {
			c.res[i] = tmp[k]
		}
		return nil
	}
	return pb.DoPolicies(ctx, c.reqs, c.names, c.res)
}

// noPolicies resolves batches on a server that keeps no policies.
var noPolicies = policy.NewStore()

// renderTieredReply writes a tiered command's reply from its part of the
// batch and counts it, and its decisions per policy in the backend's
// store.
func (s *Server) renderTieredReply(c *client, p pendingReply, t *connTally) (allowed, denied int64) {
	var store *policy.Store
	if pb := s.policies(); pb != nil {
		store = pb.PolicyStore()
	}
	r := &c.rep
	r.kw.B = r.kw.B[:0]
	names := c.names[p.first : p.first+p.n]
	a, d, deniedKey, errText := p.cmd.RenderTiered(&r.kw, c.reqs[p.first:p.first+p.n], names, c.res[p.first:p.first+p.n], store)
	if errText != "" {
		r.error(errText)
		t.failed++
		return 0, 0
	}
	r.conn.WriteRaw(r.kw.B)
	t.allowed += a
	t.denied += d
	if deniedKey != nil {
		c.st.deny(deniedKey)
	}
	return a, d
}

// renderData writes a data command's reply as the engine made it,
// counting it when it is an error.
func renderData(r *replier, reply string) {
	if text, failed := command.DataError(reply); failed {
		r.errors++
		if r.errs != nil {
			r.errs.add(text)
		}
	}
	// WriteRaw copies the bytes and never writes to them.
	r.conn.WriteRaw(unsafe.Slice(unsafe.StringData(reply), len(reply)))
}
