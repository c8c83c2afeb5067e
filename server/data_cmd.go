package server

import (
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
		register(&command{
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
		return append(reqs, kv.New(spec, args, m.resp3).Request()), ""
	}
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
	r.conn.WriteRaw([]byte(reply))
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
