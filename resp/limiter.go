package resp

import (
	"math"

	"github.com/rlserver/rlserver/engine"
)

// The limiter commands. Each parses its arguments into typed engine
// requests; bad input is answered here and never reaches the engine.

func init() {
	register(
		&command{
			name: "rl.allow", arity: -4, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "Takes cost tokens from a token bucket if it has them. Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchBucket(engine.TokenBucket, false), render: renderDecisionMs,
		},
		&command{
			name: "rl.peek", arity: -4, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@read", "@fast", "@ratelimit"},
			summary: "Replies what RL.ALLOW would, without taking tokens or creating the key.",
			group:   "ratelimit", since: "0.1.0",
			batch: batchBucket(engine.TokenBucket, true), render: renderDecisionMs,
		},
		&command{
			name: "rl.reset", arity: -2, flags: []string{"write"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@write", "@ratelimit"},
			summary: "Removes the limiter state of the keys. Replies the number removed.",
			group:   "ratelimit", since: "0.1.0",
			batch: batchEachKey(engine.OpDel), render: renderSum,
		},
		&command{
			name: "del", arity: -2, flags: []string{"write"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@write", "@slow"},
			summary: "Deletes one or more keys.", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpDel), render: renderSum,
		},
		&command{
			name: "unlink", arity: -2, flags: []string{"write", "fast"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@write", "@fast"},
			summary: "Deletes one or more keys.", group: "generic", since: "4.0.0",
			batch: batchEachKey(engine.OpDel), render: renderSum,
		},
		&command{
			name: "exists", arity: -2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: -1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Determines whether one or more keys exist.", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpExists), render: renderSum,
		},
		&command{
			name: "pttl", arity: 2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Returns the milliseconds until the key's limiter state is empty again (-2 if missing).", group: "generic", since: "2.6.0",
			batch: batchEachKey(engine.OpTTL), render: renderTTL(msNanos),
		},
		&command{
			name: "ttl", arity: 2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Returns the seconds until the key's limiter state is empty again (-2 if missing).", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpTTL), render: renderTTL(secNanos),
		},
		&command{
			name: "type", arity: 2, flags: []string{"readonly", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Determines the kind of limiter state stored at a key.", group: "generic", since: "1.0.0",
			batch: batchEachKey(engine.OpTTL), render: renderType,
		},
	)
}

// batchBucket parses `key capacity rate [cost]` (RL.ALLOW, RL.PEEK with
// peek, RL.SHAPE) and builds the request with build.
func batchBucket(build func(key []byte, capacity int64, ratePerSec float64, cost int64) (engine.Request, error), peek bool) func([]engine.Request, [][]byte) ([]engine.Request, string) {
	return func(reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		if len(args) > 5 {
			return reqs, errSyntax
		}
		capacity, ok := parseInt(args[2])
		if !ok {
			return reqs, errNotInteger
		}
		rate, ok := parseFloat(args[3])
		if !ok {
			return reqs, errNotFloat
		}
		cost := int64(1)
		if len(args) == 5 {
			if cost, ok = parseInt(args[4]); !ok {
				return reqs, errNotInteger
			}
		}
		if math.IsNaN(rate) {
			return reqs, errNotFloat
		}
		req, err := build(args[1], capacity, rate, cost)
		if err != nil {
			return reqs, engineErrorText(err)
		}
		req.ReadOnly = req.ReadOnly || peek
		return append(reqs, req), ""
	}
}

// batchEachKey makes one request of op per key argument.
func batchEachKey(op engine.Op) func([]engine.Request, [][]byte) ([]engine.Request, string) {
	return func(reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		for _, k := range args[1:] {
			reqs = append(reqs, engine.Request{Op: op, Key: k})
		}
		return reqs, ""
	}
}

// renderDecisionMs writes [allowed, remaining, retry_after_ms, reset_after_ms].
func renderDecisionMs(r *replier, res []engine.Result) (int64, int64) {
	d := &res[0]
	r.conn.WriteArray(4)
	allowed := int64(0)
	if d.Allowed {
		allowed = 1
	}
	r.conn.WriteInt64(allowed)
	r.conn.WriteInt64(d.Remaining)
	r.conn.WriteInt64(ceilDiv(d.RetryAfter, msNanos))
	r.conn.WriteInt64(ceilDiv(d.ResetAfter, msNanos))
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
		if v >= 0 {
			v = ceilDiv(v, unit)
		}
		r.conn.WriteInt64(v)
		return 0, 0
	}
}

func renderType(r *replier, res []engine.Result) (int64, int64) {
	r.conn.WriteString(res[0].Kind.String())
	return 0, 0
}
