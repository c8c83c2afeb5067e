package engine

import "math/bits"

// A sliding window counter keeps two counts per key over windows aligned
// as in fixed.go: cur, the units admitted in the current window, and prev,
// those admitted in the window just before it. At elapsed = now - start of
// the current window, the estimated count of the last W ns is
//
//	count = cur + ceil(prev * (W - elapsed) / W)
//
// computed exactly in 128-bit integers. A call of cost c is allowed iff
// count + c <= limit, and then cur += c. Rounding up means the previous
// window is never under-counted.
//
// Guarantees, for a key used with one limit L and window W:
//   - never more than L units admitted in any aligned window (cur <= L);
//   - in every window [s, s+W) of W ns, the units admitted are at most
//     L + floor(p*x/W), where x = s - (start of the aligned window holding s)
//     and p is the units admitted in that aligned window. As p <= L and
//     x < W, that is always fewer than 2L; it is L when s is aligned or when
//     the previous window admitted nothing. (Proof: let e < x be the elapsed
//     time of the last admission in the second window's first x ns, n the
//     units admitted there by then; its check gives
//     n <= L - ceil(p*(W-e)/W) <= L - p*(W-x)/W, and at most p units lie in
//     the first window's part.)
//
// Result: Allowed, Limit, Remaining (limit - count, after this call when
// allowed, never below 0), RetryAfter (0 when allowed; -1 when cost >
// limit; otherwise the exact ns until the same call would be allowed if
// nothing else happens, found by solving the inequality above in the current
// window, then the next, then the one after, where the count is 0),
// ResetAfter (ns until both counts are 0: the end of the next window when
// cur > 0, the end of this one when only prev > 0, 0 when empty).
//
// State: the current window's end, the window length, cur and prev. It
// expires at end+window when cur > 0 (cur then weighs as the next window's
// prev), else at end. A call with another window length sees an empty
// state, and replaces it if it is allowed.

// slidingState is a key's sliding window counter.
type slidingState struct {
	end    int64 // end of the window cur counts, ns since the epoch (exclusive)
	window int64 // window length in ns
	cur    int64 // units admitted in [end-window, end)
	prev   int64 // units admitted in [end-2*window, end-window)
}

func (st *slidingState) expiresAt() int64 {
	if st.cur > 0 {
		return st.end + st.window
	}
	return st.end
}

// Sliding builds an RL.SLIDING request: at most limit units per sliding
// window of windowMs milliseconds (estimated as above), taking cost units.
// Cost 0 is a read-only peek.
func Sliding(key []byte, limit, windowMs, cost int64) (Request, error) {
	window, err := windowParams(limit, windowMs, cost, MaxLimit, ErrLimitTooLarge)
	if err != nil {
		return Request{}, err
	}
	return Request{Op: OpSliding, ReadOnly: cost == 0, Key: key, Limit: limit, Window: window, Cost: cost}, nil
}

// sliding decides one sliding window counter request against st (the zero
// value when the key is missing) and returns the state to store when store
// is true.
func sliding(now int64, st slidingState, r *Request, out *Result) (next slidingState, store bool) {
	w, limit, cost := r.Window, r.Limit, r.Cost
	start := now - now%w
	end := start + w
	elapsed := now - start
	var cur, prev int64
	if st.window == w {
		switch st.end {
		case end:
			cur, prev = st.cur, st.prev
		case start:
			prev = st.cur
		}
	}
	count := cur + weigh(prev, w-elapsed, w)
	out.Limit = limit
	out.Remaining = max(limit-count, 0)
	out.ResetAfter = slidingReset(now, end, w, cur, prev)
	if cost > limit {
		out.RetryAfter = -1
		return st, false
	}
	if count+cost > limit {
		out.RetryAfter = slidingRetry(now, start, w, limit, cost, cur, prev)
		return st, false
	}
	out.Allowed = true
	out.Remaining = limit - count - cost
	cur += cost
	out.ResetAfter = slidingReset(now, end, w, cur, prev)
	if r.ReadOnly || cost == 0 {
		return st, false
	}
	return slidingState{end: end, window: w, cur: cur, prev: prev}, true
}

// weigh is ceil(prev*left/w) for 0 <= left <= w, prev <= MaxLimit: the part
// of the previous window's count still inside the sliding window.
func weigh(prev, left, w int64) int64 {
	if prev == 0 || left == 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(prev), uint64(left))
	q, rem := bits.Div64(hi, lo, uint64(w)) // q <= prev: no overflow
	if rem != 0 {
		q++
	}
	return int64(q)
}

// maxLeft is the largest left (<= w) with ceil(prev*left/w) <= room, for
// 0 <= room < prev: floor(room*w/prev), which is below w.
func maxLeft(room, prev, w int64) int64 {
	hi, lo := bits.Mul64(uint64(room), uint64(w))
	q, _ := bits.Div64(hi, lo, uint64(prev)) // room < prev: q < w
	return int64(q)
}

// slidingRetry is the ns from now until a call of cost <= limit is allowed,
// given that it is denied now and nothing else happens. The count never
// grows without calls, so the first instant that passes is the answer.
func slidingRetry(now, start, w, limit, cost, cur, prev int64) int64 {
	// In the current window: need ceil(prev*(w-e)/w) <= room.
	if room := limit - cost - cur; room >= 0 && room < prev {
		if left := maxLeft(room, prev, w); left > 0 {
			return start + w - left - now
		}
	}
	// In the next window cur becomes prev and cur is 0.
	next := start + w
	room := limit - cost
	if cur <= room {
		return next - now
	}
	if left := maxLeft(room, cur, w); left > 0 {
		return next + w - left - now
	}
	// In the window after, both counts are 0.
	return next + w - now
}

// slidingReset is the ns until both counts are 0 again.
func slidingReset(now, end, w, cur, prev int64) int64 {
	switch {
	case cur > 0:
		return end + w - now
	case prev > 0:
		return end - now
	}
	return 0
}
