package server

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
		&entry{
			name: "rl.allow", arity: -4, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "Takes cost tokens from a token bucket if it has them. Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchBucket(engine.TokenBucket, false), render: renderDecisionMs,
		},
		&entry{
			name: "rl.peek", arity: -4, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@read", "@fast", "@ratelimit"},
			summary: "Replies what RL.ALLOW would, without taking tokens or creating the key.",
			group:   "ratelimit", since: "0.1.0",
			batch: batchBucket(engine.TokenBucket, true), render: renderDecisionMs,
		},
		&entry{
			name: "rl.reset", arity: -2, flags: []string{"write"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@write", "@ratelimit"},
			summary: "Removes the limiter state of the keys. Replies the number removed.",
			group:   "ratelimit", since: "0.1.0",
			batch: batchEachKey(engine.OpDel), render: renderSum,
		},
		&entry{
			name: "del", arity: -2, flags: []string{"write"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@write", "@slow"},
			summary: "Deletes one or more keys.", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpDel), render: renderSum,
		},
		&entry{
			name: "unlink", arity: -2, flags: []string{"write", "fast"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@write", "@fast"},
			summary: "Deletes one or more keys.", group: "generic", since: "4.0.0",
			batch: batchEachKey(engine.OpDel), render: renderSum,
		},
		&entry{
			name: "exists", arity: -2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Determines whether one or more keys exist.", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpExists), render: renderSum,
		},
		&entry{
			name: "pttl", arity: 2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Returns the milliseconds until the key expires: a limiter key when its state is empty again, a data key at its TTL (-1 without one, -2 if missing).", group: "generic", since: "2.6.0",
			batch: batchEachKey(engine.OpTTL), render: renderTTL(msNanos),
		},
		&entry{
			name: "ttl", arity: 2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Returns the seconds until the key expires: a limiter key when its state is empty again, a data key at its TTL (-1 without one, -2 if missing).", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpTTL), render: renderTTL(secNanos),
		},
		&entry{
			name: "type", arity: 2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Determines the type of a key: rl-gcra, rl-fixed... for limiter state, string, hash or zset for data.", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpTTL), render: renderType,
		},
	)
}

// batchBucket parses `key capacity rate [cost]` (RL.ALLOW, RL.PEEK with
// peek, RL.SHAPE) and builds the request with build. The connection's memo
// holds what its last capacity and rate parsed to, for the callers that
// send the same limit on every call.
func batchBucket(build func(key []byte, capacity int64, ratePerSec float64, cost int64) (engine.Request, error), peek bool) batchFunc {
	owner := new(byte) // identifies this command's entries in a memo
	return func(m *argMemo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		if len(args) > 5 {
			return reqs, errSyntax
		}
		cost, costOK := int64(1), true
		if len(args) == 5 {
			cost, costOK = parseInt(args[4])
		}
		var req engine.Request
		if costOK && cost == 1 && m.holds(owner, args[2], args[3]) {
			req = m.tmpl
			req.Key = args[1]
		} else {
			capacity, ok := parseInt(args[2])
			if !ok {
				return reqs, errNotInteger
			}
			rate, ok := parseFloat(args[3])
			if !ok {
				return reqs, errNotFloat
			}
			if !costOK {
				return reqs, errNotInteger
			}
			if math.IsNaN(rate) {
				return reqs, errNotFloat
			}
			var err error
			if req, err = build(args[1], capacity, rate, cost); err != nil {
				return reqs, engineErrorText(err)
			}
			if cost == 1 {
				m.keep(owner, args[2], args[3], req)
			}
		}
		req.ReadOnly = req.ReadOnly || peek
		return append(reqs, req), ""
	}
}

// argMemo is one connection's memory of the last limit arguments it sent
// (a, b) and the request they built with cost 1 (tmpl, its key dropped).
// Clients send the same limit on every call; parsing a float and deriving
// an interval from it is then skipped. A limit that fails to build is not
// kept.
type argMemo struct {
	owner *byte // the batch function that built tmpl
	a, b  []byte
	tmpl  engine.Request
	resp3 bool     // the connection speaks RESP3: data commands reply in it
	cmds  []kv.Cmd // the data commands of the pending batch (data_cmd.go)
}

// memoMaxArg bounds the bytes of an argument the memo copies.
const memoMaxArg = 32

func (m *argMemo) holds(owner *byte, a, b []byte) bool {
	return m.owner == owner && string(m.a) == string(a) && string(m.b) == string(b)
}

func (m *argMemo) keep(owner *byte, a, b []byte, tmpl engine.Request) {
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
func batchEachKey(op engine.Op) batchFunc {
	return func(_ *argMemo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		for _, k := range args[1:] {
			reqs = append(reqs, engine.Request{Op: op, Key: k})
		}
		return reqs, ""
	}
}

// renderDecisionMs writes [allowed, remaining, retry_after_ms, reset_after_ms].
func renderDecisionMs(r *replier, res []engine.Result) (int64, int64) {
	d := &res[0]
	allowed := int64(0)
	if d.Allowed {
		allowed = 1
	}
	b := append(r.scratch[:0], "*4\r\n"...)
	b = resp.AppendInt(b, allowed)
	b = resp.AppendInt(b, d.Remaining)
	b = resp.AppendInt(b, ceilDiv(d.RetryAfter, msNanos))
	b = resp.AppendInt(b, ceilDiv(d.ResetAfter, msNanos))
	r.conn.WriteRaw(b)
	r.scratch = b
	return allowed, 1 - allowed
}

func renderSum(r *replier, res []engine.Result) (int64, int64) {
	var n int64
	for i := range res {
		n += res[i].Value
	}
	r.conn.WriteInt64(n)
	return 0, 0
}

func renderTTL(unit int64) func(*replier, []engine.Result) (int64, int64) {
	return func(r *replier, res []engine.Result) (int64, int64) {
		v := res[0].Value
		switch {
		case v >= 0 && unit == secNanos && isDataKind(res[0].Kind):
			// A data key's TTL rounds as Redis's does: its milliseconds
			// to the nearest second.
			v = (ceilDiv(v, msNanos) + 500) / 1000
		case v >= 0:
			v = ceilDiv(v, unit)
		}
		r.conn.WriteInt64(v)
		return 0, 0
	}
}

// isDataKind reports whether k is a data key's kind (string, hash, zset).
func isDataKind(k engine.Kind) bool {
	return k == engine.KindString || k == engine.KindHash || k == engine.KindZSet
}

func renderType(r *replier, res []engine.Result) (int64, int64) {
	r.conn.WriteString(res[0].Kind.String())
	return 0, 0
}
