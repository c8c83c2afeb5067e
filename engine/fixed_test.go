package engine_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

func TestFixedScript(t *testing.T) {
	e := algEngine(t, 2)
	fx := func(cost int64) engine.Request { return algReq(engine.Fixed([]byte("f"), 3, 1000, cost)) }
	res := func(allowed bool, remaining, retry, reset int64) engine.Result {
		return engine.Result{Allowed: allowed, Limit: 3, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
	}
	algScript(t, e, []algRow{
		{"peek on a missing key", algT0, fx(0), res(true, 3, 0, 0)},
		{"first call", algT0 + 100*algMs, fx(1), res(true, 2, 0, 900*algMs)},
		{"cost 2 fills the window", algT0 + 200*algMs, fx(2), res(true, 0, 0, 800*algMs)},
		{"denied until the window turns", algT0 + 300*algMs, fx(1), res(false, 0, 700*algMs, 700*algMs)},
		{"peek when full is allowed", algT0 + 300*algMs, fx(0), res(true, 0, 0, 700*algMs)},
		{"cost above limit is never", algT0 + 300*algMs, fx(4), res(false, 0, -1, 700*algMs)},
		{"1 ns before the window turns", algT0 + algSec - 1, fx(1), res(false, 0, 1, 1)},
		{"the instant the window turns", algT0 + algSec, fx(3), res(true, 0, 0, algSec)},
		{"a whole new window", algT0 + 2*algSec + 999*algMs, fx(1), res(true, 2, 0, algMs)},
		{"cost above limit on an empty window", algT0 + 5*algSec, fx(4), res(false, 3, -1, 0)},
	})
	// Another window length starts afresh instead of mixing counts.
	if got := algDo(t, e, algT0+5500*algMs, fx(1)); !got.Allowed || got.Remaining != 2 {
		t.Fatalf("1 s window: %+v", got)
	}
	other := algReq(engine.Fixed([]byte("f"), 3, 2000, 3))
	if got := algDo(t, e, algT0+5999*algMs, other); got != res(true, 0, 0, algMs) {
		t.Errorf("2 s window: %+v", got)
	}
	if got := algDo(t, e, algT0+5999*algMs, fx(1)); got != res(true, 2, 0, algMs) {
		t.Errorf("1 s window after the 2 s one replaced it: %+v", got)
	}
}

// algFixedModel counts admitted units per aligned window from the list of
// admitted calls.
type algFixedModel struct {
	key           []byte
	limit, window int64
	windowMs      int64
	ev            algEvents
}

func (m *algFixedModel) request(cost int64) engine.Request {
	return algReq(engine.Fixed(m.key, m.limit, m.windowMs, cost))
}

func (m *algFixedModel) count(at int64) int64 {
	start := at - at%m.window
	return m.ev.sum(start, start+m.window)
}

func (m *algFixedModel) do(t testing.TB, now, cost int64) engine.Result {
	res := engine.Result{Limit: m.limit}
	n := m.count(now)
	if cost <= m.limit && n+cost <= m.limit {
		res.Allowed = true
		if cost > 0 {
			m.ev.add(now, cost)
		}
		n += cost
	}
	res.Remaining = max(m.limit-n, 0)
	switch {
	case res.Allowed:
	case cost > m.limit:
		res.RetryAfter = -1
	default:
		res.RetryAfter = algFirst(t, now, now+m.window, func(at int64) bool { return m.count(at)+cost <= m.limit }) - now
	}
	res.ResetAfter = algFirst(t, now, now+m.window, func(at int64) bool { return m.count(at) == 0 }) - now
	return res
}

func TestFixedMatchesModel(t *testing.T) {
	for i, p := range []struct{ limit, windowMs int64 }{{1, 1}, {5, 1000}, {100, 50}, {7, 3}} {
		t.Run(fmt.Sprintf("limit=%d,window=%dms", p.limit, p.windowMs), func(t *testing.T) {
			m := &algFixedModel{key: []byte("fixed"), limit: p.limit, window: p.windowMs * algMs, windowMs: p.windowMs}
			algTrace(t, uint64(i), 6000, m, p.limit, m.window/(2*p.limit), m.window)
			// Guarantee: never more than limit in an aligned window.
			total := map[int64]int64{}
			for j, at := range m.ev.ts {
				total[at-at%m.window] += m.ev.cost[j]
			}
			for start, n := range total {
				if n > p.limit {
					t.Errorf("window at t0%+d admitted %d > %d", start-algT0, n, p.limit)
				}
			}
			if len(m.ev.ts) < 100 {
				t.Errorf("only %d admissions: the trace does not exercise much", len(m.ev.ts))
			}
		})
	}
}

func TestFixedBadInput(t *testing.T) {
	k := []byte("k")
	maxWindowMs := engine.MaxDuration / 1e6
	for _, tc := range []struct {
		name                  string
		limit, windowMs, cost int64
		err                   error
	}{
		{"zero limit", 0, 1000, 1, engine.ErrBadLimit},
		{"negative limit", -1, 1000, 1, engine.ErrBadLimit},
		{"limit above 2^60", engine.MaxLimit + 1, 1000, 1, engine.ErrLimitTooLarge},
		{"limit MaxInt64", math.MaxInt64, 1000, 1, engine.ErrLimitTooLarge},
		{"zero window", 1, 0, 1, engine.ErrBadWindow},
		{"negative window", 1, -5, 1, engine.ErrBadWindow},
		{"window too long", 1, maxWindowMs + 1, 1, engine.ErrWindowTooLong},
		{"window MaxInt64", 1, math.MaxInt64, 1, engine.ErrWindowTooLong},
		{"negative cost", 1, 1000, -1, engine.ErrBadCost},
		{"largest limit and window", engine.MaxLimit, maxWindowMs, math.MaxInt64, nil},
	} {
		r, err := engine.Fixed(k, tc.limit, tc.windowMs, tc.cost)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
		if err == nil && (r.Op != engine.OpFixed || r.Window != tc.windowMs*algMs || r.Limit != tc.limit) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

// TestFixedHugeValues: the largest limit, window and costs give exact
// answers at the largest time, never a wrapped number.
func TestFixedHugeValues(t *testing.T) {
	e := algEngine(t, 1)
	maxWindowMs := engine.MaxDuration / 1e6
	w := maxWindowMs * 1e6
	k := []byte("huge")
	now := engine.MaxNow
	end := now - now%w + w
	got := algDo(t, e, now, algReq(engine.Fixed(k, engine.MaxLimit, maxWindowMs, engine.MaxLimit-1)))
	if want := (engine.Result{Allowed: true, Limit: engine.MaxLimit, Remaining: 1, ResetAfter: end - now}); got != want {
		t.Errorf("fill:\n got %+v\nwant %+v", got, want)
	}
	got = algDo(t, e, now, algReq(engine.Fixed(k, engine.MaxLimit, maxWindowMs, 2)))
	if want := (engine.Result{Limit: engine.MaxLimit, Remaining: 1, RetryAfter: end - now, ResetAfter: end - now}); got != want {
		t.Errorf("over:\n got %+v\nwant %+v", got, want)
	}
	got = algDo(t, e, now, algReq(engine.Fixed(k, engine.MaxLimit, maxWindowMs, math.MaxInt64)))
	if want := (engine.Result{Limit: engine.MaxLimit, Remaining: 1, RetryAfter: -1, ResetAfter: end - now}); got != want {
		t.Errorf("MaxInt64 cost:\n got %+v\nwant %+v", got, want)
	}
	// A time beyond MaxNow is clamped to it.
	if got := algDo(t, e, math.MaxInt64, algReq(engine.Fixed(k, engine.MaxLimit, maxWindowMs, 1))); !got.Allowed || got.ResetAfter != end-now {
		t.Errorf("at MaxInt64: %+v", got)
	}
}
