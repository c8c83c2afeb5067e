package server

import (
	"math"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// The other algorithms, and the redis-cell and Redis 8.8 spellings of the
// token bucket. CL.THROTTLE, GCRA and RL.ALLOW share one state kind.

func init() {
	register(
		&entry{
			name: "cl.throttle", arity: -5, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "redis-cell's token bucket. Replies [limited, limit, remaining, retry_after_s, reset_after_s].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchThrottle, render: renderThrottle,
		},
		&entry{
			name: "gcra", arity: -5, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "Redis 8.8's GCRA rate limiter. Replies [limited, limit, remaining, retry_after_s, reset_after_s].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchGCRA, render: renderThrottle,
		},
		&entry{
			name: "rl.fixed", arity: -4, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "Fixed window counter aligned to multiples of window_ms since the epoch. Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchWindow(engine.Fixed), render: renderDecisionMs,
		},
		&entry{
			name: "rl.sliding", arity: -4, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "Sliding window counter (previous window weighted). Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchWindow(engine.Sliding), render: renderDecisionMs,
		},
		&entry{
			name: "rl.log", arity: -4, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "Sliding window log, exact in every window. Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchWindow(engine.Log), render: renderDecisionMs,
		},
		&entry{
			name: "rl.shape", arity: -4, flags: []string{"write", "denyoom", "fast"},
			firstKey: 1, lastKey: 1, keyStep: 1, acl: []string{"@write", "@fast", "@ratelimit"},
			summary: "Leaky bucket as a queue: admits with a delay while the queue has room. Replies [admitted, delay_ms, queued, reset_after_ms].",
			group:   "ratelimit", since: "0.1.0",
			batch: batchBucket(engine.Shape, false), render: renderShape,
		},
	)
}

// batchThrottle parses `key max_burst count_per_period period [quantity]`,
// all integers, period in seconds, as redis-cell does.
func batchThrottle(_ *argMemo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
	if len(args) > 6 {
		return reqs, errSyntax
	}
	var n [4]int64
	n[3] = 1
	for i, a := range args[2:] {
		v, ok := parseInt(a)
		if !ok {
			return reqs, errNotInteger
		}
		n[i] = v
	}
	period := n[2]
	if period > math.MaxInt64/secNanos {
		return reqs, engineErrorText(engine.ErrPeriodTooLong)
	}
	if period < 0 {
		period = -1 // engine.Throttle refuses every negative period alike
	}
	req, err := engine.Throttle(args[1], n[0], n[1], period*secNanos, n[3])
	if err != nil {
		return reqs, engineErrorText(err)
	}
	return append(reqs, req), ""
}

// batchGCRA parses Redis 8.8's `key max_burst tokens_per_period period
// [TOKENS n]` with its validation and error texts.
func batchGCRA(_ *argMemo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
	if len(args) > 7 {
		return reqs, wrongArity("gcra")
	}
	// Redis parses max_burst with getPositiveLongFromObjectOrReply, whose
	// one message answers a non-number and a negative number alike.
	burst, ok := parseInt(args[2])
	if !ok || burst < 0 {
		return reqs, errRangePositive
	}
	perPeriod, ok := parseInt(args[3])
	if !ok {
		return reqs, errNotInteger
	}
	if perPeriod < 1 {
		return reqs, errRangeOneToMax
	}
	period, ok := parseFloat(args[4])
	if !ok || math.IsNaN(period) {
		return reqs, errNotFloat
	}
	// Redis checks the period's range here, before the TOKENS clause.
	if period <= 0 || period >= 1e12 {
		return reqs, engineErrorText(engine.ErrBadPeriod)
	}
	tokens := int64(1)
	if len(args) >= 6 {
		if !equalFold(args[5], "tokens") {
			return reqs, errSyntax
		}
		if len(args) == 6 {
			return reqs, errGCRAMissingTokens
		}
		if tokens, ok = parseInt(args[6]); !ok {
			return reqs, errNotInteger
		}
		if tokens < 1 {
			return reqs, errRangeOneToMax
		}
	}
	// The clock is read here only to refuse what Redis refuses as an
	// overflow at this time; the decision takes the batch's time.
	req, err := engine.GCRAAt(time.Now().UnixNano(), args[1], burst, perPeriod, period, tokens)
	if err != nil {
		return reqs, engineErrorText(err)
	}
	return append(reqs, req), ""
}

// batchWindow parses `key limit window_ms [cost]` for the window algorithms.
func batchWindow(build func(key []byte, limit, windowMs, cost int64) (engine.Request, error)) batchFunc {
	return func(_ *argMemo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		if len(args) > 5 {
			return reqs, errSyntax
		}
		var n [3]int64
		n[2] = 1
		for i, a := range args[2:] {
			v, ok := parseInt(a)
			if !ok {
				return reqs, errNotInteger
			}
			n[i] = v
		}
		req, err := build(args[1], n[0], n[1], n[2])
		if err != nil {
			return reqs, engineErrorText(err)
		}
		return append(reqs, req), ""
	}
}

// renderThrottle writes [limited, limit, remaining, retry_after_s,
// reset_after_s], durations rounded up to whole seconds, retry -1 when
// allowed or never.
func renderThrottle(r *replier, res []engine.Result) (int64, int64) {
	d := &res[0]
	r.conn.WriteArray(5)
	limited := int64(1)
	retry := ceilDiv(d.RetryAfter, secNanos)
	if d.Allowed {
		limited, retry = 0, -1
	}
	r.conn.WriteInt64(limited)
	r.conn.WriteInt64(d.Limit)
	r.conn.WriteInt64(d.Remaining)
	r.conn.WriteInt64(retry)
	r.conn.WriteInt64(ceilDiv(d.ResetAfter, secNanos))
	return 1 - limited, limited
}

// renderShape writes [admitted, delay_ms, queued, reset_after_ms]; delay
// is -1 when rejected.
func renderShape(r *replier, res []engine.Result) (int64, int64) {
	d := &res[0]
	r.conn.WriteArray(4)
	admitted := int64(0)
	if d.Allowed {
		admitted = 1
	}
	r.conn.WriteInt64(admitted)
	r.conn.WriteInt64(ceilDiv(d.Delay, msNanos))
	r.conn.WriteInt64(d.Queued)
	r.conn.WriteInt64(ceilDiv(d.ResetAfter, msNanos))
	return admitted, 1 - admitted
}
