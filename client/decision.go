package client

import (
	"fmt"
	"time"
)

// Never is the RetryAfter of a call that can never succeed (its cost is
// above the limit).
const Never time.Duration = -1

// Source says who made a Decision.
type Source uint8

const (
	// FromServer: rlserver decided; the decision is global and exact.
	FromServer Source = iota
	// FromBackstop: the server was unavailable and the policy fails open;
	// the in-process limiter decided, per instance.
	FromBackstop
	// FromFailOpen: the server was unavailable, the policy fails open and
	// there is no backstop (or it does not know a Check tier's policy):
	// allowed without any limit.
	FromFailOpen
	// FromFailClosed: the server was unavailable and the policy fails
	// closed: denied.
	FromFailClosed
)

// String returns "server", "backstop", "fail-open" or "fail-closed".
func (s Source) String() string {
	switch s {
	case FromServer:
		return "server"
	case FromBackstop:
		return "backstop"
	case FromFailOpen:
		return "fail-open"
	case FromFailClosed:
		return "fail-closed"
	}
	return fmt.Sprintf("Source(%d)", uint8(s))
}

// Decision is the answer to one call. Durations are the server's integer
// replies converted exactly (milliseconds, or seconds for Throttle).
//
// When Source is not FromServer, Err holds the failure (wrapping
// ErrUnavailable), and the numbers come from the backstop (FromBackstop)
// or are the policy's limit with nothing known about usage (Remaining
// equals Limit, RetryAfter and ResetAfter are 0).
type Decision struct {
	Allowed bool
	// Limit is the capacity or limit: for a cell max_burst+1 as
	// CL.THROTTLE reports it.
	Limit int64
	// Remaining is what is left after this call: tokens, requests in the
	// window; for a shaper, room left in the queue.
	Remaining int64
	// RetryAfter is 0 when allowed, else the time until the same call
	// would be allowed, or Never.
	RetryAfter time.Duration
	// ResetAfter is the time until the key's state is empty again (bucket
	// full, window over, queue drained).
	ResetAfter time.Duration
	// Delay is a shaper's wait before the admitted call proceeds.
	Delay time.Duration

	Source Source
	Err    error

	// Tier is Check's deciding tier, 1-based: the first tier that
	// rejected, or when allowed the one with the fewest remaining. The
	// fields above are that tier's. 0 for single calls.
	Tier  int
	Tiers []TierDecision
}

// Degraded reports whether the server did not make the decision.
func (d Decision) Degraded() bool { return d.Source != FromServer }

// TierDecision is one tier of a Check.
type TierDecision struct {
	Policy, Key string
	Allowed     bool
	Limit       int64
	Remaining   int64
	RetryAfter  time.Duration
	ResetAfter  time.Duration
	Delay       time.Duration
}

// ms converts a reply in milliseconds, -1 meaning never.
func ms(v int64) time.Duration {
	if v < 0 {
		return Never
	}
	return time.Duration(v) * time.Millisecond
}

// ints converts an array reply of integers.
func ints(v any, n int) ([]int64, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != n {
		return nil, fmt.Errorf("%w: %#v is not an array of %d integers", ErrBadReply, v, n)
	}
	out := make([]int64, n)
	for i, e := range arr {
		x, ok := e.(int64)
		if !ok {
			return nil, fmt.Errorf("%w: element %d of %#v is not an integer", ErrBadReply, i+1, v)
		}
		out[i] = x
	}
	return out, nil
}

// parseDecision converts the reply of p's command.
//
//	RL.ALLOW, RL.PEEK, RL.FIXED, RL.SLIDING, RL.LOG: [allowed, remaining, retry_after_ms, reset_after_ms]
//	CL.THROTTLE: [limited, limit, remaining, retry_after_s (-1 when allowed), reset_after_s]
//	RL.SHAPE: [admitted, delay_ms (-1 when rejected), queued, reset_after_ms]
func parseDecision(p Policy, cost int64, v any) (Decision, error) {
	switch p.Kind {
	case KindCell:
		r, err := ints(v, 5)
		if err != nil {
			return Decision{}, err
		}
		d := Decision{Allowed: r[0] == 0, Limit: r[1], Remaining: r[2], ResetAfter: time.Duration(r[4]) * time.Second}
		if !d.Allowed {
			d.RetryAfter = Never
			if r[3] >= 0 {
				d.RetryAfter = time.Duration(r[3]) * time.Second
			}
		}
		return d, nil
	case KindShaper:
		r, err := ints(v, 4)
		if err != nil {
			return Decision{}, err
		}
		d := Decision{Allowed: r[0] == 1, Limit: p.Limit, Remaining: max(p.Limit-r[2], 0), ResetAfter: ms(r[3])}
		if d.Allowed {
			d.Delay = ms(r[1])
		} else {
			d.RetryAfter = shapeRetry(p, cost, d.ResetAfter)
		}
		return d, nil
	}
	r, err := ints(v, 4)
	if err != nil {
		return Decision{}, err
	}
	return Decision{Allowed: r[0] == 1, Limit: p.Limit, Remaining: r[1], RetryAfter: ms(r[2]), ResetAfter: ms(r[3])}, nil
}

// shapeRetry derives a rejected RL.SHAPE call's wait, which the reply does
// not carry: the queue drains one unit per interval T, and the call fits
// once at most capacity-cost units are queued, so it waits
// reset - (capacity-cost)*T (the engine's allowAt - now), at least 1 ms.
func shapeRetry(p Policy, cost int64, reset time.Duration) time.Duration {
	if cost > p.Limit {
		return Never
	}
	_, interval := p.local(1)
	wait := reset - time.Duration((p.Limit-cost)*interval)
	return max(wait, time.Millisecond)
}

// parseCheck converts RL.CHECK's reply: [all allowed, deciding tier,
// then per tier [policy, key, allowed, limit, remaining, retry_after_ms,
// reset_after_ms, delay_ms]].
func parseCheck(v any, tiers int) (Decision, error) {
	arr, ok := v.([]any)
	if !ok || len(arr) != 2+tiers {
		return Decision{}, fmt.Errorf("%w: RL.CHECK replied %#v for %d tiers", ErrBadReply, v, tiers)
	}
	allowed, ok1 := arr[0].(int64)
	tier, ok2 := arr[1].(int64)
	if !ok1 || !ok2 || tier < 1 || tier > int64(tiers) {
		return Decision{}, fmt.Errorf("%w: RL.CHECK header %#v", ErrBadReply, arr[:2])
	}
	d := Decision{Allowed: allowed == 1, Tier: int(tier), Tiers: make([]TierDecision, tiers)}
	for i := range tiers {
		t, ok := arr[2+i].([]any)
		if !ok || len(t) != 8 {
			return Decision{}, fmt.Errorf("%w: RL.CHECK tier %d is %#v", ErrBadReply, i+1, arr[2+i])
		}
		policy, ok1 := t[0].(string)
		key, ok2 := t[1].(string)
		n, err := ints(t[2:], 6)
		if !ok1 || !ok2 || err != nil {
			return Decision{}, fmt.Errorf("%w: RL.CHECK tier %d is %#v", ErrBadReply, i+1, t)
		}
		d.Tiers[i] = TierDecision{Policy: policy, Key: key, Allowed: n[0] == 1, Limit: n[1], Remaining: n[2],
			RetryAfter: ms(n[3]), ResetAfter: ms(n[4]), Delay: max(ms(n[5]), 0)}
	}
	dt := d.Tiers[d.Tier-1]
	d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = dt.Limit, dt.Remaining, dt.RetryAfter, dt.ResetAfter
	if d.Allowed {
		// Every shaper tier queued the call: it may proceed after the
		// longest of their delays.
		for _, t := range d.Tiers {
			d.Delay = max(d.Delay, t.Delay)
		}
	}
	return d, nil
}
