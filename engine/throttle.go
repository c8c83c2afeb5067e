package engine

import "math"

// CL.THROTTLE (redis-cell) and GCRA (Redis 8.8) are the same token bucket
// as RL.ALLOW, spelled differently: max_burst b gives Limit = b+1 and the
// emission interval T is the period divided by the count per period. With
// tau = T*Limit the decision is the one in gcra.go, and the state is the
// same KindGCRA TAT, so a key limited through one command is limited through
// the others. For the reply [limited, limit, remaining, retry_after_s,
// reset_after_s] the server package writes limited = !Allowed, Limit,
// Remaining, RetryAfter rounded up to whole seconds (or -1 when allowed or
// when RetryAfter is -1) and ResetAfter rounded up to whole seconds.

// Throttle builds a CL.THROTTLE request: at most maxBurst+1 tokens at once,
// refilled at countPerPeriod tokens per periodNanos, taking quantity tokens.
// T = periodNanos/countPerPeriod in integer ns, as redis-cell computes it;
// when the count exceeds the period in ns (T would be 0) T is 1 ns.
// Quantity 0 is a true read: it writes nothing and creates no key.
// A zero count or period is ErrZeroRate; a negative one ErrBadRate; a
// Limit*T above MaxDuration is ErrPeriodTooLong. The caller converts the
// period in seconds to ns, and reports ErrPeriodTooLong when that overflows.
func Throttle(key []byte, maxBurst, countPerPeriod, periodNanos, quantity int64) (Request, error) {
	if maxBurst < 0 {
		return Request{}, ErrBadBurst
	}
	if countPerPeriod == 0 || periodNanos == 0 {
		return Request{}, ErrZeroRate
	}
	if countPerPeriod < 0 || periodNanos < 0 {
		return Request{}, ErrBadRate
	}
	if quantity < 0 {
		return Request{}, ErrBadCost
	}
	if maxBurst >= MaxDuration {
		return Request{}, ErrPeriodTooLong
	}
	limit := maxBurst + 1
	interval := max(periodNanos/countPerPeriod, 1)
	if interval > MaxDuration/limit {
		return Request{}, ErrPeriodTooLong
	}
	return Request{Op: OpGCRA, ReadOnly: quantity == 0, Key: key, Interval: interval, Limit: limit, Cost: quantity}, nil
}

// GCRA builds a request for Redis 8.8's GCRA command: at most maxBurst+1
// tokens at once, refilled at tokensPerPeriod tokens per periodSec seconds,
// taking tokens tokens. It is GCRAAt with no clock: the overflow check that
// needs the time is skipped.
func GCRA(key []byte, maxBurst, tokensPerPeriod int64, periodSec float64, tokens int64) (Request, error) {
	return GCRAAt(0, key, maxBurst, tokensPerPeriod, periodSec, tokens)
}

// GCRAAt builds a GCRA request checked as Redis checks it at nowNanos.
// Validation follows Redis, in its order: maxBurst >= 0 (ErrBadBurst),
// tokensPerPeriod >= 1 (ErrBadRate), 0 < periodSec < 1e12 (ErrBadPeriod),
// tokens >= 1 (ErrBadTokens). Redis keeps the emission interval in whole
// microseconds, round(periodSec*1e6/tokensPerPeriod) and at least 1; T
// here is that many microseconds in ns, so both servers take the same
// decisions. Redis then refuses, as overflows of its int64 microseconds,
// an interval times tokens above MaxInt64 (ErrGCRATokensOverflow), an
// interval times its capacity (maxBurst+1, or MaxInt64 for a maxBurst of
// MaxInt64) above MaxInt64 (ErrGCRABurstOverflow), and a TAT that would
// pass MaxInt64: now (in whole milliseconds, as Redis reads its clock)
// plus interval times tokens (ErrGCRATokensOverflow; checked against an
// empty bucket, since the stored TAT is not known here: a key in debt can
// only make the sum larger, and such a cost is far above any capacity
// rlserver accepts, so it is denied, never allowed). Only then does
// rlserver's own bound apply: Limit*T above MaxDuration (2^60 ns, about
// 36 years, where Redis's microseconds reach about 292,000 years) is
// ErrPeriodTooLong.
func GCRAAt(nowNanos int64, key []byte, maxBurst, tokensPerPeriod int64, periodSec float64, tokens int64) (Request, error) {
	if maxBurst < 0 {
		return Request{}, ErrBadBurst
	}
	if tokensPerPeriod < 1 {
		return Request{}, ErrBadRate
	}
	if math.IsNaN(periodSec) || periodSec <= 0 || periodSec >= 1e12 {
		return Request{}, ErrBadPeriod
	}
	if tokens < 1 {
		return Request{}, ErrBadTokens
	}
	// Explicit conversions round each step, as the C code does, so no
	// fused multiply-add can change the result. periodSec < 1e12 keeps
	// the interval below 1e18 us: it fits an int64.
	periodUs := float64(periodSec * 1e6)
	intervalUs := max(int64(math.Floor(float64(periodUs/float64(tokensPerPeriod))+0.5)), 1)
	capacity := maxBurst
	if capacity < math.MaxInt64 {
		capacity++
	}
	switch {
	case intervalUs > math.MaxInt64/tokens:
		return Request{}, ErrGCRATokensOverflow
	case intervalUs > math.MaxInt64/capacity:
		return Request{}, ErrGCRABurstOverflow
	case nowNanos > 0 && intervalUs*tokens > math.MaxInt64-nowNanos/1e6*1e3:
		return Request{}, ErrGCRATokensOverflow
	case maxBurst >= MaxDuration, intervalUs > MaxDuration/1000:
		return Request{}, ErrPeriodTooLong
	}
	interval := intervalUs * 1000
	limit := maxBurst + 1
	if interval > MaxDuration/limit {
		return Request{}, ErrPeriodTooLong
	}
	return Request{Op: OpGCRA, Key: key, Interval: interval, Limit: limit, Cost: tokens}, nil
}
