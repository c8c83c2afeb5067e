package command

import (
	"strings"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// The data commands (package kv): Redis's strings, hashes, sorted sets
// and expiry, batched with the limiter commands. Each builds one engine
// request that carries the parsed command; the engine runs it on its
// keys' shards and returns its reply.

func init() {
	for _, spec := range kv.All() {
		if spec.TxnOnly {
			continue // this table's own DEL, EXISTS, TTL, PING... answer outside MULTI
		}
		c := &Cmd{
			Name: spec.Name, Arity: spec.Arity, Flags: spec.Flags,
			FirstKey: spec.FirstKey, LastKey: spec.LastKey, KeyStep: spec.KeyStep,
			ACL: spec.ACL, Summary: spec.Summary, Group: spec.Group, Since: spec.Since,
			Batch: batchData(spec), Data: true,
		}
		if spec.Movable() {
			c.MovableKeys = movableKeys(spec)
			c.LeadKey = spec.FirstKey
		}
		register(c)
	}
}

// movableKeys gives the positions of the keys after a numkeys argument
// (kv.Spec.MovableRange). A destination key before numkeys (ZUNIONSTORE's)
// is not in the range: it is the command's LeadKey.
func movableKeys(spec *kv.Spec) func(args [][]byte) (first, last, step int) {
	return func(args [][]byte) (int, int, int) {
		first, last := spec.MovableRange(args)
		if first == 0 {
			return 0, -1, 1 // no key: loops over [first, last] by step end at once
		}
		return first, last, 1
	}
}

// batchData returns the batch function of spec's command: the request
// that runs it.
func batchData(spec *kv.Spec) BatchFunc {
	return func(m *Memo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		return append(reqs, m.cmd(spec, args).Request()), ""
	}
}

// cmd returns a data command for args from the connection's arena: the
// commands of a batch are reused by the next one (Release), so a
// pipeline of data commands allocates none.
func (m *Memo) cmd(spec *kv.Spec, args [][]byte) *kv.Cmd {
	if len(m.cmds) == cap(m.cmds) {
		// A new block: the requests of this batch keep pointing into the
		// old one, which stays alive until they are dropped.
		m.cmds = make([]kv.Cmd, 0, max(16, 2*cap(m.cmds)))
	}
	m.cmds = m.cmds[:len(m.cmds)+1]
	c := &m.cmds[len(m.cmds)-1]
	c.Set(spec, args, m.RESP3)
	return c
}

// Release drops the batch's data commands (and their references to the
// connection's buffer) so the arena is reused; call it once the batch's
// replies are written.
func (m *Memo) Release() {
	clear(m.cmds)
	m.cmds = m.cmds[:0]
}

// BlockingReply reads a blocking command's reply (kv's, as the engine
// returns it): empty when it had nothing to take (a null bulk or array,
// RESP2 or RESP3), wrongType when a key holds another kind of value. The
// edge parks the client on the first and, for a pop, on the second too.
func BlockingReply(reply string) (empty, wrongType bool) {
	switch reply {
	case "*-1\r\n", "$-1\r\n", "_\r\n":
		return true, false
	}
	text, failed := DataError(reply)
	return false, failed && strings.HasPrefix(text, "WRONGTYPE ")
}

// DataError reports whether a data command's reply (kv's, as the engine
// returns it) is an error, and its text, for the error counters: the
// reply is written as it is.
func DataError(reply string) (text string, failed bool) {
	if len(reply) == 0 || reply[0] != '-' {
		return "", false
	}
	for i := 1; i < len(reply); i++ {
		if reply[i] == '\r' {
			return reply[1:i], true
		}
	}
	return reply[1:], true
}
