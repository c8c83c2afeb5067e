package client

import (
	"fmt"
	"math"
	"strconv"
	"time"
)

// Kind names a limiter algorithm of the server.
type Kind uint8

// The algorithms, one per server command. The zero Kind is invalid.
const (
	KindTokenBucket   Kind = iota + 1 // RL.ALLOW: GCRA token bucket
	KindCell                          // CL.THROTTLE: redis-cell's GCRA
	KindFixedWindow                   // RL.FIXED
	KindSlidingWindow                 // RL.SLIDING
	KindSlidingLog                    // RL.LOG
	KindShaper                        // RL.SHAPE: leaky bucket as a queue
)

// String returns the kind's name as RL.POLICY SET spells it.
func (k Kind) String() string {
	switch k {
	case KindTokenBucket:
		return "ALLOW"
	case KindCell:
		return "THROTTLE"
	case KindFixedWindow:
		return "FIXED"
	case KindSlidingWindow:
		return "SLIDING"
	case KindSlidingLog:
		return "LOG"
	case KindShaper:
		return "SHAPE"
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// FailureMode says what a call decides when the server cannot answer it.
type FailureMode uint8

const (
	// FailDefault defers to the next level: a call option defers to the
	// policy, the policy to Options.Failure, which defaults to FailOpen.
	FailDefault FailureMode = iota
	// FailOpen allows the call (through the local backstop when one is
	// configured). For general APIs: serving a little too much for a
	// moment beats refusing everyone.
	FailOpen
	// FailClosed denies the call. For abuse-sensitive routes such as login
	// or password reset. The backstop is not consulted.
	FailClosed
)

// String returns "default", "open" or "closed".
func (m FailureMode) String() string {
	switch m {
	case FailOpen:
		return "open"
	case FailClosed:
		return "closed"
	}
	return "default"
}

// Policy is one rate limit: an algorithm and its parameters. Build it
// with TokenBucket, Cell, FixedWindow, SlidingWindow, SlidingLog or
// Shaper. The same key may only be used with one kind (the server answers
// WRONGTYPE otherwise).
type Policy struct {
	Kind Kind
	// Limit is the capacity (token bucket, shaper), the limit per window
	// (windows, log) or max_burst (cell).
	Limit int64
	// RatePerSec is the refill (token bucket) or drain (shaper) rate.
	RatePerSec float64
	// Count is the cell's count_per_period.
	Count int64
	// Window is the window (whole milliseconds) or the cell's period
	// (whole seconds).
	Window time.Duration
	// Failure is this policy's failure mode; FailDefault defers to the
	// client's.
	Failure FailureMode
}

// TokenBucket is RL.ALLOW: capacity tokens, refilled at ratePerSec.
func TokenBucket(capacity int64, ratePerSec float64) Policy {
	return Policy{Kind: KindTokenBucket, Limit: capacity, RatePerSec: ratePerSec}
}

// Cell is CL.THROTTLE (redis-cell): a burst of maxBurst+1, then
// countPerPeriod per period (whole seconds).
func Cell(maxBurst, countPerPeriod int64, period time.Duration) Policy {
	return Policy{Kind: KindCell, Limit: maxBurst, Count: countPerPeriod, Window: period}
}

// FixedWindow is RL.FIXED: limit per window aligned to the epoch.
func FixedWindow(limit int64, window time.Duration) Policy {
	return Policy{Kind: KindFixedWindow, Limit: limit, Window: window}
}

// SlidingWindow is RL.SLIDING: the weighted two-window counter.
func SlidingWindow(limit int64, window time.Duration) Policy {
	return Policy{Kind: KindSlidingWindow, Limit: limit, Window: window}
}

// SlidingLog is RL.LOG: exactly limit in any window.
func SlidingLog(limit int64, window time.Duration) Policy {
	return Policy{Kind: KindSlidingLog, Limit: limit, Window: window}
}

// Shaper is RL.SHAPE: a queue of capacity units drained at ratePerSec;
// admitted calls get a Delay instead of a rejection.
func Shaper(capacity int64, ratePerSec float64) Policy {
	return Policy{Kind: KindShaper, Limit: capacity, RatePerSec: ratePerSec}
}

// WithFailure returns p with its failure mode set.
func (p Policy) WithFailure(m FailureMode) Policy {
	p.Failure = m
	return p
}

// validate reports whether the server could accept p, so a typo fails
// before anything is sent.
func (p Policy) validate() error {
	switch p.Kind {
	case KindTokenBucket, KindShaper:
		if p.Limit < 1 || !(p.RatePerSec > 0) || math.IsInf(p.RatePerSec, 0) {
			return fmt.Errorf("%w: %v needs a capacity >= 1 and a finite rate > 0", ErrBadPolicy, p.Kind)
		}
	case KindCell:
		if p.Limit < 0 || p.Count < 1 || p.Window < time.Second || p.Window%time.Second != 0 {
			return fmt.Errorf("%w: THROTTLE needs max_burst >= 0, count >= 1 and a period of whole seconds", ErrBadPolicy)
		}
	case KindFixedWindow, KindSlidingWindow, KindSlidingLog:
		if p.Limit < 1 || p.Window < time.Millisecond || p.Window%time.Millisecond != 0 {
			return fmt.Errorf("%w: %v needs a limit >= 1 and a window of whole milliseconds", ErrBadPolicy, p.Kind)
		}
	default:
		return fmt.Errorf("%w: no kind", ErrBadPolicy)
	}
	return nil
}

// command returns the command name and its arguments after the key.
func (p Policy) command(cost int64) (string, []any) {
	switch p.Kind {
	case KindTokenBucket:
		return "RL.ALLOW", []any{p.Limit, formatRate(p.RatePerSec), cost}
	case KindShaper:
		return "RL.SHAPE", []any{p.Limit, formatRate(p.RatePerSec), cost}
	case KindCell:
		return "CL.THROTTLE", []any{p.Limit, p.Count, int64(p.Window / time.Second), cost}
	case KindFixedWindow:
		return "RL.FIXED", []any{p.Limit, p.Window.Milliseconds(), cost}
	case KindSlidingWindow:
		return "RL.SLIDING", []any{p.Limit, p.Window.Milliseconds(), cost}
	case KindSlidingLog:
		return "RL.LOG", []any{p.Limit, p.Window.Milliseconds(), cost}
	}
	panic("client: command of an invalid policy")
}

// definition returns the arguments of RL.POLICY SET after the name.
func (p Policy) definition() []any {
	switch p.Kind {
	case KindTokenBucket, KindShaper:
		return []any{p.Kind.String(), p.Limit, formatRate(p.RatePerSec)}
	case KindCell:
		return []any{p.Kind.String(), p.Limit, p.Count, int64(p.Window / time.Second)}
	default:
		return []any{p.Kind.String(), p.Limit, p.Window.Milliseconds()}
	}
}

func formatRate(r float64) string { return strconv.FormatFloat(r, 'g', -1, 64) }

// Quota is the policy as the RateLimit-Policy header states it: at most
// quota units per window (whole seconds, rounded up). For a token bucket
// or shaper the window is the time a full refill takes, capacity/rate; for
// a cell it is (max_burst+1)*period/count.
func (p Policy) Quota() (quota int64, window time.Duration) {
	switch p.Kind {
	case KindTokenBucket, KindShaper:
		return p.Limit, ceilSecond(time.Duration(math.Min(float64(p.Limit)/p.RatePerSec*1e9, math.MaxInt64)))
	case KindCell:
		q := p.Limit + 1
		w := float64(q) * float64(p.Window) / float64(p.Count)
		return q, ceilSecond(time.Duration(math.Min(w, math.MaxInt64)))
	}
	return p.Limit, ceilSecond(p.Window)
}

// local returns the token bucket the backstop uses for p: capacity and
// emission interval in ns, the rate scaled by scale.
func (p Policy) local(scale float64) (capacity int64, intervalNs int64) {
	var rate float64 // units per second
	switch p.Kind {
	case KindTokenBucket, KindShaper:
		capacity, rate = p.Limit, p.RatePerSec
	case KindCell:
		capacity, rate = p.Limit+1, float64(p.Count)/p.Window.Seconds()
	default:
		capacity, rate = p.Limit, float64(p.Limit)/p.Window.Seconds()
	}
	if scale > 0 {
		capacity = int64(math.Max(1, math.Round(float64(capacity)*scale)))
		rate *= scale
	}
	interval := math.Ceil(1e9 / rate)
	if !(interval >= 1) {
		interval = 1
	}
	if interval > 1<<60 {
		interval = 1 << 60
	}
	return capacity, int64(interval)
}

// ceilSecond rounds d up to a whole second.
func ceilSecond(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	if r := d % time.Second; r != 0 {
		if d > math.MaxInt64-time.Second {
			return d - r
		}
		d += time.Second - r
	}
	return d
}
