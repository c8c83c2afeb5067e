package client

import (
	"sync"
	"sync/atomic"
	"time"
)

// BreakerOptions configures the circuit breaker. After Failures calls in a
// row failed (unreachable, timed out, transient server state), the breaker
// opens: calls skip the server and take their failure mode at once, for
// Cooldown. Then it is half-open: the next call goes to the server as a
// probe while the others still skip it; the probe's success closes the
// breaker, its failure opens it for another Cooldown. An error reply
// (ErrCommand) counts as success: the server answered.
type BreakerOptions struct {
	// Failures in a row that open the breaker. Default 5; negative turns
	// the breaker off.
	Failures int
	// Cooldown is how long the breaker stays open. Default 1s.
	Cooldown time.Duration
}

// Breaker states, also the value of the breaker state gauge.
const (
	breakerClosed   = 0
	breakerHalfOpen = 1
	breakerOpen     = 2
)

type breaker struct {
	threshold int64 // 0: off
	cooldown  time.Duration
	now       func() time.Time
	onChange  func(from, to int)

	state atomic.Int32 // read without mu on the hot path
	fails atomic.Int64 // consecutive failures while closed

	mu       sync.Mutex
	openedAt time.Time // when it last opened
	probing  bool      // a half-open probe is in flight
}

func newBreaker(o BreakerOptions, now func() time.Time, onChange func(from, to int)) *breaker {
	b := &breaker{cooldown: o.Cooldown, now: now, onChange: onChange}
	switch {
	case o.Failures == 0:
		b.threshold = 5
	case o.Failures > 0:
		b.threshold = int64(o.Failures)
	}
	if b.cooldown <= 0 {
		b.cooldown = time.Second
	}
	return b
}

// allow reports whether a call may go to the server, and whether it is
// the half-open probe (which must be finished with done).
func (b *breaker) allow() (ok, probe bool) {
	if b.state.Load() == breakerClosed {
		return true, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case breakerOpen:
		if b.now().Sub(b.openedAt) < b.cooldown {
			return false, false
		}
		b.set(breakerHalfOpen)
		b.probing = true
		return true, true
	case breakerHalfOpen:
		if b.probing {
			return false, false
		}
		b.probing = true
		return true, true
	}
	return true, false
}

// retryIn is the time until the breaker lets a probe through; 0 when it
// is not open.
func (b *breaker) retryIn() time.Duration {
	if b.state.Load() != breakerOpen {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return max(b.cooldown-b.now().Sub(b.openedAt), 0)
}

// outcome values for done.
const (
	callOK      = iota // the server answered
	callFailed         // the server was unavailable
	callNeutral        // neither (the caller gave up first)
)

// done records a call's outcome.
func (b *breaker) done(outcome int, probe bool) {
	if b.threshold == 0 {
		return
	}
	switch outcome {
	case callOK:
		if b.fails.Load() != 0 {
			b.fails.Store(0)
		}
		if probe || b.state.Load() != breakerClosed {
			b.mu.Lock()
			b.probing = false
			b.set(breakerClosed)
			b.mu.Unlock()
		}
	case callFailed:
		if probe {
			b.mu.Lock()
			b.probing = false
			b.openedAt = b.now()
			b.set(breakerOpen)
			b.mu.Unlock()
			return
		}
		if b.fails.Add(1) >= b.threshold && b.state.Load() == breakerClosed {
			b.mu.Lock()
			if b.state.Load() == breakerClosed {
				b.openedAt = b.now()
				b.set(breakerOpen)
			}
			b.mu.Unlock()
		}
	case callNeutral:
		if probe {
			b.mu.Lock()
			b.probing = false
			b.mu.Unlock()
		}
	}
}

// set changes the state; b.mu is held.
func (b *breaker) set(to int) {
	from := int(b.state.Swap(int32(to)))
	if to == breakerClosed {
		b.fails.Store(0)
	}
	if from != to && b.onChange != nil {
		b.onChange(from, to)
	}
}
