package engine

// RL.SHAPE is a leaky bucket used as a queue: instead of rejecting bursts it
// spaces the admitted work out at the rate, and the caller waits for its
// turn. Per key we keep one int64, the virtual schedule's end: the time at
// which every admitted unit has been served (like GCRA's TAT). Units are
// served one per emission interval T ns, computed from the rate exactly as
// RL.ALLOW's (see TokenBucket).
//
// A call of cost c at now starts at base = max(now, end); it is admitted
// iff the queue after it holds at most capacity units,
//
//	(base - now) + c*T <= capacity*T
//
// and then end becomes base + c*T and the caller waits Delay = base - now
// before proceeding. The units in the queue at now are
// ceil((end - now) / T): whole units plus the one partly served. Because
// capacity - c is an integer, the inequality is the same as
// ceil((base-now)/T) + c <= capacity, so admission is decided in whole
// units. This is GCRA's arithmetic with a different reply: admitted calls
// wait instead of being refused. The key is empty again (and expires) when
// end <= now.
//
// Guarantees: admitted calls proceed at exactly the virtual schedule
// (each starts when the previous admitted call's units are served, or at
// its own arrival when the queue is empty), so the output never exceeds
// the rate; the queue never holds more than capacity units.
//
// Result: Allowed (admitted), Limit (capacity), Delay (ns to wait before
// proceeding when admitted, -1 when rejected), Queued (units in the queue
// at now, this call's included when admitted; never above capacity),
// Remaining (capacity - Queued), RetryAfter (0 when admitted; -1 when cost
// > capacity; else the ns until the same call would be admitted),
// ResetAfter (ns until the queue is empty). The reply is
// [admitted, delay_ms, queued, reset_after_ms].

// Shape builds an RL.SHAPE request: a queue of at most capacity units
// served at ratePerSec units per second, taking cost units. Validation is
// RL.ALLOW's. Cost 0 is a read-only peek: it reports the delay a call would
// get and the queue length.
func Shape(key []byte, capacity int64, ratePerSec float64, cost int64) (Request, error) {
	r, err := TokenBucket(key, capacity, ratePerSec, cost)
	if err != nil {
		return Request{}, err
	}
	r.Op = OpShape
	return r, nil
}

// shape decides one queue request. end is the stored schedule end (0 when
// the key is missing); the returned value is the end to store when store
// is true.
func shape(now, end int64, r *Request, out *Result) (newEnd int64, store bool) {
	interval := r.Interval
	capNs := r.Limit * interval
	base := max(end, now)
	out.Limit = r.Limit
	out.Delay = -1
	out.Queued = ceilDiv(base-now, interval)
	out.Remaining = max(r.Limit-out.Queued, 0)
	out.ResetAfter = base - now
	if r.Cost > r.Limit {
		out.RetryAfter = -1
		return end, false
	}
	next := base + r.Cost*interval
	if allowAt := next - capNs; allowAt > now {
		out.RetryAfter = allowAt - now
		return end, false
	}
	out.Allowed = true
	out.Delay = base - now
	out.Queued = ceilDiv(next-now, interval)
	out.Remaining = max(r.Limit-out.Queued, 0)
	out.ResetAfter = next - now
	return next, !r.ReadOnly && r.Cost > 0
}

// ceilDiv is ceil(a/b) for a >= 0, b > 0.
func ceilDiv(a, b int64) int64 {
	return (a + b - 1) / b
}
