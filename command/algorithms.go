package command

import (
	"math"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// The other algorithms, and the redis-cell and Redis 8.8 spellings of the
// token bucket. CL.THROTTLE, GCRA and RL.ALLOW share one state kind.

func init() {
	register(
		&Cmd{
			Name: "cl.throttle", Arity: -5, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@write", "@fast", "@ratelimit"},
			Summary: "redis-cell's token bucket. Replies [limited, limit, remaining, retry_after_s, reset_after_s].",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchThrottle, Render: renderThrottle,
		},
		&Cmd{
			Name: "gcra", Arity: -5, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@write", "@fast", "@ratelimit"},
			Summary: "Redis 8.8's GCRA rate limiter. Replies [limited, limit, remaining, retry_after_s, reset_after_s].",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchGCRA, Render: renderThrottle,
		},
		&Cmd{
			Name: "rl.fixed", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@write", "@fast", "@ratelimit"},
			Summary: "Fixed window counter aligned to multiples of window_ms since the epoch. Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchWindow(engine.Fixed), Render: renderDecisionMs,
		},
		&Cmd{
			Name: "rl.sliding", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@write", "@fast", "@ratelimit"},
			Summary: "Sliding window counter (previous window weighted). Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchWindow(engine.Sliding), Render: renderDecisionMs,
		},
		&Cmd{
			Name: "rl.log", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@write", "@fast", "@ratelimit"},
			Summary: "Sliding window log, exact in every window. Replies [allowed, remaining, retry_after_ms, reset_after_ms].",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchWindow(engine.Log), Render: renderDecisionMs,
		},
		&Cmd{
			Name: "rl.shape", Arity: -4, Flags: []string{"write", "denyoom", "fast"},
			FirstKey: 1, LastKey: 1, KeyStep: 1, ACL: []string{"@write", "@fast", "@ratelimit"},
			Summary: "Leaky bucket as a queue: admits with a delay while the queue has room. Replies [admitted, delay_ms, queued, reset_after_ms].",
			Group:   "ratelimit", Since: "0.1.0",
			Batch: batchBucket(engine.Shape, false), Render: renderShape,
		},
	)
}

// batchThrottle parses `key max_burst count_per_period period [quantity]`,
// all integers, period in seconds, as redis-cell does.
func batchThrottle(_ *Memo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
	if len(args) > 6 {
		return reqs, ErrSyntax
	}
	var n [4]int64
	n[3] = 1
	for i, a := range args[2:] {
		v, ok := ParseInt(a)
		if !ok {
			return reqs, ErrNotInteger
		}
		n[i] = v
	}
	period := n[2]
	if period > math.MaxInt64/secNanos {
		return reqs, Text(engine.ErrPeriodTooLong)
	}
	if period < 0 {
		period = -1 // engine.Throttle refuses every negative period alike
	}
	req, err := engine.Throttle(args[1], n[0], n[1], period*secNanos, n[3])
	if err != nil {
		return reqs, Text(err)
	}
	return append(reqs, req), ""
}

// batchGCRA parses Redis 8.8's `key max_burst tokens_per_period period
// [TOKENS n]` with its validation and error texts.
func batchGCRA(_ *Memo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
	if len(args) > 7 {
		return reqs, WrongArity("gcra")
	}
	// Redis parses max_burst with getPositiveLongFromObjectOrReply, whose
	// one message answers a non-number and a negative number alike.
	burst, ok := ParseInt(args[2])
	if !ok || burst < 0 {
		return reqs, ErrRangePositive
	}
	perPeriod, ok := ParseInt(args[3])
	if !ok {
		return reqs, ErrNotInteger
	}
	if perPeriod < 1 {
		return reqs, ErrRangeOneToMax
	}
	period, ok := ParseFloat(args[4])
	if !ok || math.IsNaN(period) {
		return reqs, ErrNotFloat
	}
	// Redis checks the period's range here, before the TOKENS clause.
	if period <= 0 || period >= 1e12 {
		return reqs, Text(engine.ErrBadPeriod)
	}
	tokens := int64(1)
	if len(args) >= 6 {
		if !EqualFold(args[5], "tokens") {
			return reqs, ErrSyntax
		}
		if len(args) == 6 {
			return reqs, errGCRAMissingTokens
		}
		if tokens, ok = ParseInt(args[6]); !ok {
			return reqs, ErrNotInteger
		}
		if tokens < 1 {
			return reqs, ErrRangeOneToMax
		}
	}
	// The clock is read here only to refuse what Redis refuses as an
	// overflow at this time; the decision takes the batch's time.
	req, err := engine.GCRAAt(time.Now().UnixNano(), args[1], burst, perPeriod, period, tokens)
	if err != nil {
		return reqs, Text(err)
	}
	return append(reqs, req), ""
}

// batchWindow parses `key limit window_ms [cost]` for the window algorithms.
func batchWindow(build func(key []byte, limit, windowMs, cost int64) (engine.Request, error)) BatchFunc {
	return func(_ *Memo, reqs []engine.Request, args [][]byte) ([]engine.Request, string) {
		if len(args) > 5 {
			return reqs, ErrSyntax
		}
		var n [3]int64
		n[2] = 1
		for i, a := range args[2:] {
			v, ok := ParseInt(a)
			if !ok {
				return reqs, ErrNotInteger
			}
			n[i] = v
		}
		req, err := build(args[1], n[0], n[1], n[2])
		if err != nil {
			return reqs, Text(err)
		}
		return append(reqs, req), ""
	}
}

// renderThrottle writes [limited, limit, remaining, retry_after_s,
// reset_after_s], durations rounded up to whole seconds, retry -1 when
// allowed or never.
func renderThrottle(w *kv.Writer, res []engine.Result) (int64, int64) {
	d := &res[0]
	w.Array(5)
	limited := int64(1)
	retry := ceilDiv(d.RetryAfter, secNanos)
	if d.Allowed {
		limited, retry = 0, -1
	}
	w.Int(limited)
	w.Int(d.Limit)
	w.Int(d.Remaining)
	w.Int(retry)
	w.Int(ceilDiv(d.ResetAfter, secNanos))
	return 1 - limited, limited
}

// renderShape writes [admitted, delay_ms, queued, reset_after_ms]; delay
// is -1 when rejected.
func renderShape(w *kv.Writer, res []engine.Result) (int64, int64) {
	d := &res[0]
	w.Array(4)
	admitted := int64(0)
	if d.Allowed {
		admitted = 1
	}
	w.Int(admitted)
	w.Int(ceilDiv(d.Delay, msNanos))
	w.Int(d.Queued)
	w.Int(ceilDiv(d.ResetAfter, msNanos))
	return admitted, 1 - admitted
}
