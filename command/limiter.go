package command

import (
	"math"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/resp"
)

// The limiter commands. Each parses its arguments into typed engine
// requests; bad input is answered here and never reaches the engine.

func init() {
	register(
		&Cmd{
			Name: "rl.allow", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@write", "@fast", "@ratelimit"},
			Summary: "Takes cost tokens from a token bucket if it has them. Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchBucket(engine.TokenBucket, false), Render: renderDecisionMs,
		},
		&Cmd{
			Name: "rl.peek", Arity: -4, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@read", "@fast", "@ratelimit"},
			Summary: "Replies what RL.ALLOW would, without taking tokens or creating the key.",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchBucket(engine.TokenBucket, true), Render: renderDecisionMs,
		},
		&Cmd{
			Name: "rl.reset", Arity: -2, Flags: []string{"write"},
			FirstKey: 1, LastKey: -1, KeyStep: 1, ACL: []string{"@keyspace", "@write", "@ratelimit"},
			Summary: "Removes the limiter state of the keys. Replies the number removed.",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchEachKey(engine.OpDel), Render: renderSum,
		},
		&Cmd{
			Name: "del", Arity: -2, Flags: []string{"write"},
			FirstKey: 1, LastKey: -1, KeyStep: 1, ACL: []string{"@keyspace", "@write", "@slow"},
			Summary: "Deletes one or more keys.", Group: "generic", Since: "1.0.0",
			Batch: batchEachKey(engine.OpDel), Render: renderSum,
		},
		&Cmd{
			Name: "unlink", Arity: -2, Flags: []string{"write", "fast"},
			FirstKey: 1, LastKey: -1, KeyStep: 1, ACL: []string{"@keyspace", "@write", "@fast"},
			Summary: "Deletes one or more keys.", Group: "generic", Since: "4.0.0",
			Batch: batchEachKey(engine.OpDel), Render: renderSum,
		},
		&Cmd{
			Name: "exists", Arity: -2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: -1, KeyStep: 1, ACL: []string{"@keyspace", "@read", "@fast"},
			Summary: "Determines whether one or more keys exist.", Group: "generic", Since: "1.0.0",
			Batch: batchEachKey(engine.OpExists), Render: renderSum,
		},
		&Cmd{
			Name: "pttl", Arity: 2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@keyspace", "@read", "@fast"},
			Summary: "Returns the milliseconds until the key expires: a limiter key when its state is empty again, a data key at its TTL (-1 without one, -2 if missing).", Group: "generic", Since: "2.6.0",
			Batch: batchEachKey(engine.OpTTL), Render: renderTTL(msNanos),
		},
		&Cmd{
			Name: "ttl", Arity: 2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@keyspace", "@read", "@fast"},
			Summary: "Returns the seconds until the key expires: a limiter key when its state is empty again, a data key at its TTL (-1 without one, -2 if missing).", Group: "generic", Since: "1.0.0",
			Batch: batchEachKey(engine.OpTTL), Render: renderTTL(secNanos),
		},
		&Cmd{
			Name: "type", Arity: 2, Flags: []string{"readonly", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@keyspace", "@read", "@fast"},
			Summary: "Determines the type of a key: rl-gcra, rl-fixed... for limiter state, string, hash or zset for data.", Group: "generic", Since: "1.0.0",
			Batch: batchEachKey(engine.OpTTL), Render: renderType,
		},
	)
}

// batchBucket parses `key capacity rate [cost]` (RL.ALLOW, RL.PEEK with
// peek, RL.SHAPE) and builds the request with build. The connection's memo
// holds what its last capacity and rate parsed to, for the callers that
// send the same limit on every call.
func batchBucket(build func(key []byte, capacity int64, ratePerSec float64, cost int64) (engine.Request, error), peek bool) BatchFunc {
	owner := new(byte) // identifies this command's entries in a memo
	return func(m *Memo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		if len(args) > 5 {
			return reqs, ErrSyntax
		}
		cost, costOK := int64(1), true
		if len(args) == 5 {
			cost, costOK = ParseInt(args[4])
		}
		var req engine.Request
		if costOK && cost == 1 && m.holds(owner, args[2], args[3]) {
			req = m.tmpl
			req.Key = args[1]
		} else {
			capacity, ok := ParseInt(args[2])
			if !ok {
				return reqs, ErrNotInteger
			}
			rate, ok := ParseFloat(args[3])
			if !ok {
				return reqs, ErrNotFloat
			}
			if !costOK {
				return reqs, ErrNotInteger
			}
			if math.IsNaN(rate) {
				return reqs, ErrNotFloat
			}
			var err error
			if req, err = build(args[1], capacity, rate, cost); err != nil {
				return reqs, Text(err)
			}
			if cost == 1 {
				m.keep(owner, args[2], args[3], req)
			}
		}
		req.ReadOnly = req.ReadOnly || peek
		return append(reqs, req), ""
	}
}

// Memo is one connection's memory of the last limit arguments it sent
// (a, b) and the request they built with cost 1 (tmpl, its key dropped).
// Clients send the same limit on every call; parsing a float and deriving
// an interval from it is then skipped. A limit that fails to build is not
// kept.
type Memo struct {
	owner *byte // the batch function that built tmpl
	a, b  []byte
	tmpl  engine.Request
	RESP3 bool     // the connection speaks RESP3: data commands reply in it
	cmds  []kv.Cmd // the data commands of the pending batch (data.go)
}

// memoMaxArg bounds the bytes of an argument the memo copies.
const memoMaxArg = 32

func (m *Memo) holds(owner *byte, a, b []byte) bool {
	return m.owner == owner && string(m.a) == string(a) && string(m.b) == string(b)
}

func (m *Memo) keep(owner *byte, a, b []byte, tmpl engine.Request) {
	if len(a) > memoMaxArg || len(b) > memoMaxArg {
		return
	}
	m.owner = owner
	m.a = append(m.a[:0], a...)
	m.b = append(m.b[:0], b...)
	tmpl.Key = nil
	m.tmpl = tmpl
}

// batchEachKey makes one request of op per key argument.
func batchEachKey(op engine.Op) BatchFunc {
	return func(_ *Memo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		for _, k := range args[1:] {
			reqs = append(reqs, engine.Request{Op: op, Key: k})
		}
		return reqs, ""
	}
}

// renderDecisionMs writes [allowed, remaining, retry_after_ms, reset_after_ms].
func renderDecisionMs(w *kv.Writer, res []engine.Result) (int64, int64) {
	d := &res[0]
	allowed := int64(0)
	if d.Allowed {
		allowed = 1
	}
	b := append(w.B, "*4\r\n"...)
	b = resp.AppendInt(b, allowed)
	b = resp.AppendInt(b, d.Remaining)
	b = resp.AppendInt(b, ceilDiv(d.RetryAfter, msNanos))
	b = resp.AppendInt(b, ceilDiv(d.ResetAfter, msNanos))
	w.B = b
	return allowed, 1 - allowed
}

func renderSum(w *kv.Writer, res []engine.Result) (int64, int64) {
	var n int64
	for i := range res {
		n += res[i].Value
	}
	w.Int(n)
	return 0, 0
}

func renderTTL(unit int64) func(*kv.Writer, []engine.Result) (int64, int64) {
	return func(w *kv.Writer, res []engine.Result) (int64, int64) {
		v := res[0].Value
		switch {
		case v >= 0 && unit == secNanos && isDataKind(res[0].Kind):
			// A data key's TTL rounds as Redis's does: its milliseconds
			// to the nearest second.
			v = (ceilDiv(v, msNanos) + 500) / 1000
		case v >= 0:
			v = ceilDiv(v, unit)
		}
		w.Int(v)
		return 0, 0
	}
}

// isDataKind reports whether k is a data key's kind (string, hash, zset).
func isDataKind(k engine.Kind) bool {
	return k.IsData()
}

func renderType(w *kv.Writer, res []engine.Result) (int64, int64) {
	w.Status(res[0].Kind.String())
	return 0, 0
}
