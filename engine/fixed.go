package engine

// A fixed window counts the units admitted in the current window, where
// windows are aligned to multiples of the window length since the Unix
// epoch: the window holding now is [now - now%W, now - now%W + W). A call
// of cost c is allowed iff count + c <= limit, and then count += c. At the
// instant a window turns the count is 0 again.
//
// Guarantee: never more than limit units admitted in any aligned window
// (so at most 2*limit in any W ns that straddle a boundary).
//
// Result: Allowed, Limit, Remaining (limit - count, after this call when
// allowed, never below 0), RetryAfter (0 when allowed; the start of the
// next window when denied with cost <= limit; -1 when cost > limit),
// ResetAfter (ns until the count is 0 again: the end of the window, or 0
// when nothing is counted).
//
// State: the window's end (also the expiry), its length, and the count.
// The count belongs to the window it was recorded for: a call with another
// window length sees an empty state, and replaces it if it is allowed.

// fixedState is a key's fixed window; count >= 1 when stored.
type fixedState struct {
	end    int64 // end of the counted window, ns since the epoch (exclusive)
	window int64 // window length in ns
	count  int64 // units admitted in [end-window, end)
}

// Fixed builds an RL.FIXED request: at most limit units per window of
// windowMs milliseconds, taking cost units. Cost 0 is a read-only peek.
func Fixed(key []byte, limit, windowMs, cost int64) (Request, error) {
	window, err := windowParams(limit, windowMs, cost, MaxLimit, ErrLimitTooLarge)
	if err != nil {
		return Request{}, err
	}
	return Request{Op: OpFixed, ReadOnly: cost == 0, Key: key, Limit: limit, Window: window, Cost: cost}, nil
}

// windowParams validates the arguments shared by the window algorithms and
// returns the window in ns.
func windowParams(limit, windowMs, cost, maxLimit int64, tooLarge error) (int64, error) {
	if limit < 1 {
		return 0, ErrBadLimit
	}
	if limit > maxLimit {
		return 0, tooLarge
	}
	if windowMs < 1 {
		return 0, ErrBadWindow
	}
	if windowMs > MaxDuration/1e6 {
		return 0, ErrWindowTooLong
	}
	if cost < 0 {
		return 0, ErrBadCost
	}
	return windowMs * 1e6, nil
}

// fixed decides one fixed window request against st (the zero value when
// the key is missing) and returns the state to store when store is true.
func fixed(now int64, st fixedState, r *Request, out *Result) (next fixedState, store bool) {
	w := r.Window
	end := now - now%w + w
	var count int64
	if st.window == w && st.end == end {
		count = st.count
	}
	out.Limit = r.Limit
	out.Remaining = max(r.Limit-count, 0)
	if count > 0 {
		out.ResetAfter = end - now
	}
	if r.Cost > r.Limit {
		out.RetryAfter = -1
		return st, false
	}
	if count+r.Cost > r.Limit {
		out.RetryAfter = end - now
		return st, false
	}
	out.Allowed = true
	count += r.Cost
	out.Remaining = r.Limit - count
	if count > 0 {
		out.ResetAfter = end - now
	}
	if r.ReadOnly || r.Cost == 0 {
		return st, false
	}
	return fixedState{end: end, window: w, count: count}, true
}
