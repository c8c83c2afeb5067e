package server

import (
	"unsafe"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// The data commands (package kv): Redis's strings, hashes, sorted sets
// and expiry, batched with the limiter commands. Each builds one engine
// request that carries the parsed command; the engine runs it on its
// keys' shards and returns the RESP reply, which render copies out.

func init() {
	for _, spec := range kv.All() {
		if spec.TxnOnly {
			continue // the server's own DEL, EXISTS, TTL, PING... answer outside MULTI
		}
		register(&entry{
			name: spec.Name, arity: spec.Arity, flags: spec.Flags,
			firstKey: spec.FirstKey, lastKey: spec.LastKey, keyStep: spec.KeyStep,
			acl: spec.ACL, summary: spec.Summary, group: spec.Group, since: spec.Since,
			batch: batchData(spec), render: renderData,
		})
	}
}

// batchData builds the request that runs spec's command.
func batchData(spec *kv.Spec) batchFunc {
	return func(m *argMemo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		return append(reqs, m.cmd(spec, args).Request()), ""
	}
}

// cmd returns a data command for args from the connection's arena: the
// commands of a batch are reused by the next one (flushBatch calls
// release), so a pipeline of data commands allocates none.
func (m *argMemo) cmd(spec *kv.Spec, args [][]byte) *kv.Cmd {
	if len(m.cmds) == cap(m.cmds) {
		// A new block: the requests of this batch keep pointing into the
		// old one, which stays alive until they are dropped.
		m.cmds = make([]kv.Cmd, 0, max(16, 2*cap(m.cmds)))
	}
	m.cmds = m.cmds[:len(m.cmds)+1]
	c := &m.cmds[len(m.cmds)-1]
	c.Set(spec, args, m.resp3)
	return c
}

// release drops the batch's commands (and their references to the
// connection's buffer) so the arena is reused.
func (m *argMemo) release() {
	clear(m.cmds)
	m.cmds = m.cmds[:0]
}

// renderData writes a data command's reply as the engine made it.
func renderData(r *replier, res []engine.Result) (int64, int64) {
	reply := res[0].Reply
	if len(reply) > 0 && reply[0] == '-' {
		r.errors++
		if r.errs != nil {
			r.errs.add(errorLine(reply))
		}
	}
	// WriteRaw copies the bytes and never writes to them.
	r.conn.WriteRaw(unsafe.Slice(unsafe.StringData(reply), len(reply)))
	return 0, 0
}

// errorLine is the text of the first error line in a RESP reply.
func errorLine(reply string) string {
	for i := 1; i < len(reply); i++ {
		if reply[i] == '\r' {
			return reply[1:i]
		}
	}
	return reply[1:]
}
