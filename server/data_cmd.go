package server

import (
	"unsafe"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// The batched commands: the limiter commands (RL.ALLOW, CL.THROTTLE,
// GCRA, RL.FIXED..., and DEL, EXISTS, TTL, TYPE) and the data commands
// (package kv). What they mean (their arguments, requests and replies) is
// package command's; the edge batches their requests per pipeline and
// writes their replies.

func init() {
	for _, l := range command.Limiters() {
		register(&entry{
			name: l.Name, arity: l.Arity, flags: l.Flags,
			firstKey: l.FirstKey, lastKey: l.LastKey, keyStep: l.KeyStep,
			acl: l.ACL, summary: l.Summary, group: l.Group, since: l.Since,
			batch: l.Batch, render: renderLimiter(l.Render),
		})
	}
	for _, spec := range kv.All() {
		if spec.TxnOnly {
			continue // the server's own DEL, EXISTS, TTL, PING... answer outside MULTI
		}
		register(&entry{
			name: spec.Name, arity: spec.Arity, flags: spec.Flags,
			firstKey: spec.FirstKey, lastKey: spec.LastKey, keyStep: spec.KeyStep,
			acl: spec.ACL, summary: spec.Summary, group: spec.Group, since: spec.Since,
			batch: command.BatchData(spec), render: renderData,
		})
	}
}

// renderLimiter writes a limiter command's reply, rendered by its
// command.RenderFunc into the replier's writer (a field, so that the
// call through a function value allocates nothing).
func renderLimiter(render command.RenderFunc) func(r *replier, res []engine.Result) (int64, int64) {
	return func(r *replier, res []engine.Result) (int64, int64) {
		r.kw.B = r.kw.B[:0]
		a, d := render(&r.kw, res)
		r.conn.WriteRaw(r.kw.B)
		return a, d
	}
}

// renderData writes a data command's reply as the engine made it.
func renderData(r *replier, res []engine.Result) (int64, int64) {
	reply := res[0].Reply
	if text, failed := command.DataError(reply); failed {
		r.errors++
		if r.errs != nil {
			r.errs.add(text)
		}
	}
	// WriteRaw copies the bytes and never writes to them.
	r.conn.WriteRaw(unsafe.Slice(unsafe.StringData(reply), len(reply)))
	return 0, 0
}
