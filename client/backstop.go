package client

import (
	"container/list"
	"sync"
	"time"
)

// BackstopOptions configures the local backstop: an in-process token
// bucket per key that decides fail-open calls while the server is
// unavailable. It limits per instance, so with N instances a key gets up
// to N times its limit during an outage; Scale tightens or loosens that.
type BackstopOptions struct {
	// MaxKeys bounds the keys held; the least recently used key is
	// dropped beyond it (and starts again with a full bucket). Default
	// 10,000.
	MaxKeys int
	// Scale multiplies each policy's capacity and rate for the backstop
	// (0.5 halves them). Default 1: each instance enforces the whole
	// policy on its own.
	Scale float64
}

// backstop is a GCRA token bucket per key with an LRU bound, the same
// arithmetic as the server's RL.ALLOW (see engine/gcra.go): per key the
// theoretical arrival time TAT in ns; with emission interval T and
// tolerance tau = capacity*T a call of cost c is allowed iff
// max(now, TAT) + c*T - tau <= now, and then TAT becomes max(now,TAT)+c*T.
// Every policy kind is approximated by the token bucket of the same
// capacity and long-run rate (Policy.local). A key whose TAT is in the
// past is a full bucket, so it is dropped when seen.
type backstop struct {
	mu      sync.Mutex
	maxKeys int
	scale   float64
	lru     *list.List // of *slot, most recent at the front
	keys    map[string]*list.Element
}

type slot struct {
	key string
	tat int64
}

func newBackstop(o BackstopOptions) *backstop {
	if o.MaxKeys <= 0 {
		o.MaxKeys = 10_000
	}
	if o.Scale <= 0 {
		o.Scale = 1
	}
	return &backstop{maxKeys: o.MaxKeys, scale: o.Scale, lru: list.New(), keys: make(map[string]*list.Element)}
}

// localTier is one bucket of a backstop decision.
type localTier struct {
	key    string
	policy Policy
}

// decide charges cost to every tier if all of them allow it and charge is
// set (nothing otherwise, as RL.CHECK does) and returns the decision with the tier
// that decided (1-based: the first rejecting tier, or the allowed one
// with the fewest remaining). nowNs is any monotonic nanosecond clock.
func (b *backstop) decide(nowNs int64, tiers []localTier, cost int64, charge bool) Decision {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(tiers) == 1 {
		// The common case, without the slices.
		t := tiers[0]
		capacity, interval := t.policy.local(b.scale)
		td, tat := gcra(nowNs, b.tat(t.key), capacity, interval, cost)
		if td.Allowed && charge && cost > 0 {
			b.store(t.key, tat, nowNs)
		}
		return Decision{Allowed: td.Allowed, Limit: td.Limit, Remaining: td.Remaining,
			RetryAfter: td.RetryAfter, ResetAfter: td.ResetAfter, Source: FromBackstop}
	}
	out := make([]TierDecision, len(tiers))
	tats := make([]int64, len(tiers))
	allowed := true
	decider := 0
	for i, t := range tiers {
		capacity, interval := t.policy.local(b.scale)
		td, newTat := gcra(nowNs, b.tat(t.key), capacity, interval, cost)
		td.Policy, td.Key = "", t.key
		out[i], tats[i] = td, newTat
		if !td.Allowed {
			if allowed {
				decider = i
			}
			allowed = false
		} else if allowed && td.Remaining < out[decider].Remaining {
			decider = i
		}
	}
	if !allowed {
		// Nothing is charged: tiers that would have allowed report what
		// they hold now.
		for i, t := range tiers {
			if out[i].Allowed {
				capacity, interval := t.policy.local(b.scale)
				td, _ := gcra(nowNs, b.tat(t.key), capacity, interval, 0)
				td.Key = t.key
				out[i] = td
			}
		}
	}
	if allowed && charge && cost > 0 {
		for i, t := range tiers {
			b.store(t.key, tats[i], nowNs)
		}
	}
	d := Decision{Allowed: allowed, Source: FromBackstop}
	dt := out[decider]
	d.Limit, d.Remaining, d.RetryAfter, d.ResetAfter = dt.Limit, dt.Remaining, dt.RetryAfter, dt.ResetAfter
	if len(tiers) > 1 {
		d.Tier, d.Tiers = decider+1, out
	}
	return d
}

// tat returns key's TAT, 0 when it holds none.
func (b *backstop) tat(key string) int64 {
	if e, ok := b.keys[key]; ok {
		return e.Value.(*slot).tat
	}
	return 0
}

// store records a key's TAT as most recently used, dropping it when its
// bucket is full and the least recently used keys beyond maxKeys.
func (b *backstop) store(key string, tat, nowNs int64) {
	e, ok := b.keys[key]
	if tat <= nowNs {
		if ok {
			b.lru.Remove(e)
			delete(b.keys, key)
		}
		return
	}
	if ok {
		e.Value.(*slot).tat = tat
		b.lru.MoveToFront(e)
		return
	}
	b.keys[key] = b.lru.PushFront(&slot{key: key, tat: tat})
	for b.lru.Len() > b.maxKeys {
		old := b.lru.Back()
		b.lru.Remove(old)
		delete(b.keys, old.Value.(*slot).key)
	}
}

// len is the number of keys held.
func (b *backstop) len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.lru.Len()
}

// gcra decides one token bucket call without storing it: the decision
// and the TAT to store if the call is charged. Overflow cannot occur:
// capacity*interval and cost*interval are bounded by the caller (cost is
// capped at capacity+1 before multiplying).
func gcra(now, tat, capacity, interval, cost int64) (TierDecision, int64) {
	capacity = min(capacity, (1<<62)/interval)
	tau := capacity * interval
	base := max(tat, now)
	d := TierDecision{Limit: capacity}
	remaining := func(used int64) int64 { return max((tau-used)/interval, 0) }
	if cost > capacity {
		d.RetryAfter = Never
		d.ResetAfter = time.Duration(base - now)
		d.Remaining = remaining(base - now)
		return d, tat
	}
	next := base + cost*interval
	if allowAt := next - tau; allowAt > now {
		d.RetryAfter = time.Duration(allowAt - now)
		d.ResetAfter = time.Duration(base - now)
		d.Remaining = remaining(base - now)
		return d, tat
	}
	d.Allowed = true
	d.ResetAfter = time.Duration(next - now)
	d.Remaining = remaining(next - now)
	return d, next
}
