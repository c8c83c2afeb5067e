package engine

import "math"

// A token bucket is kept as GCRA: per key one int64, the theoretical
// arrival time (TAT) in ns. With emission interval T and tolerance
// tau = capacity*T, a call of cost c at time now is allowed iff
//
//	max(now, TAT) + c*T - tau <= now
//
// and then TAT becomes max(now, TAT) + c*T. The bucket is full again when
// TAT <= now, so such a key is indistinguishable from a missing one.
// The tokens available at now are floor((tau - (max(now,TAT) - now)) / T).

// TokenBucket builds an RL.ALLOW request: capacity tokens, refilled at
// ratePerSec tokens per second, taking cost tokens. T = ceil(1e9/ratePerSec)
// ns (see intervalNanos), at least 1: rounding up means the bucket never refills faster than
// the rate asked for, so over any interval W at most capacity + rate*W
// tokens are allowed. Cost 0 is a read-only peek.
func TokenBucket(key []byte, capacity int64, ratePerSec float64, cost int64) (Request, error) {
	if capacity < 1 {
		return Request{}, ErrBadCapacity
	}
	if math.IsNaN(ratePerSec) || math.IsInf(ratePerSec, 0) || ratePerSec <= 0 {
		return Request{}, ErrBadRate
	}
	if cost < 0 {
		return Request{}, ErrBadCost
	}
	intervalF := intervalNanos(ratePerSec)
	if intervalF > float64(MaxDuration) {
		return Request{}, ErrPeriodTooLong
	}
	interval := max(int64(intervalF), 1)
	if capacity > MaxDuration/interval {
		return Request{}, ErrPeriodTooLong
	}
	return Request{Op: OpGCRA, ReadOnly: cost == 0, Key: key, Interval: interval, Limit: capacity, Cost: cost}, nil
}

// intervalNanos is ceil(1e9/ratePerSec), except that a quotient within
// 1e-12 (relative) of an integer is that integer, so float noise in a rate
// such as 0.1 (1e10 ns, not 1e10+1) does not add a nanosecond.
func intervalNanos(ratePerSec float64) float64 {
	x := 1e9 / ratePerSec
	if r := math.Round(x); math.Abs(x-r) <= r*1e-12 {
		return r
	}
	return math.Ceil(x)
}

// gcra decides one token bucket request. tat is the stored TAT (0 when the
// key is missing) and the returned value is the TAT to store; store reports
// whether it changed.
func gcra(now, tat int64, r *Request, out *Result) (newTat int64, store bool) {
	interval := r.Interval
	tau := r.Limit * interval
	base := max(tat, now)
	out.Limit = r.Limit
	if r.Cost > r.Limit {
		// It can never succeed: nothing is written.
		out.Allowed = false
		out.RetryAfter = -1
		out.ResetAfter = base - now
		out.Remaining = remaining(tau, base-now, interval)
		return tat, false
	}
	next := base + r.Cost*interval
	allowAt := next - tau
	if allowAt > now {
		out.Allowed = false
		out.RetryAfter = allowAt - now
		out.ResetAfter = base - now
		out.Remaining = remaining(tau, base-now, interval)
		return tat, false
	}
	out.Allowed = true
	out.RetryAfter = 0
	out.ResetAfter = next - now
	out.Remaining = remaining(tau, next-now, interval)
	return next, !r.ReadOnly && r.Cost > 0
}

// remaining is the whole tokens left when the bucket is ttl ns from full.
func remaining(tau, ttl, interval int64) int64 {
	if ttl >= tau {
		return 0
	}
	return (tau - ttl) / interval
}
