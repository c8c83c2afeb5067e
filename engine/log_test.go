package engine_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

func TestLogScript(t *testing.T) {
	e := algEngine(t, 2)
	lg := func(cost int64) engine.Request { return algReq(engine.Log([]byte("l"), 3, 1000, cost)) }
	res := func(allowed bool, remaining, retry, reset int64) engine.Result {
		return engine.Result{Allowed: allowed, Limit: 3, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
	}
	algScript(t, e, []algRow{
		{"peek on a missing key", algT0, lg(0), res(true, 3, 0, 0)},
		{"first", algT0, lg(1), res(true, 2, 0, algSec)},
		{"second", algT0 + 100*algMs, lg(1), res(true, 1, 0, algSec)},
		{"cost 2 waits for the oldest", algT0 + 200*algMs, lg(2), res(false, 1, 800*algMs, 900*algMs)},
		{"cost 1 fits", algT0 + 200*algMs, lg(1), res(true, 0, 0, algSec)},
		{"1 ns before the oldest leaves", algT0 + algSec - 1, lg(1), res(false, 0, 1, 200*algMs+1)},
		{"the instant the oldest leaves", algT0 + algSec, lg(1), res(true, 0, 0, algSec)},
		{"peek when full is allowed", algT0 + algSec, lg(0), res(true, 0, 0, algSec)},
		{"cost above limit is never", algT0 + algSec, lg(4), res(false, 0, -1, algSec)},
		{"cost 3 waits for the third oldest", algT0 + algSec, lg(3), res(false, 0, algSec, algSec)},
		{"all gone one window after the newest", algT0 + 2*algSec, lg(3), res(true, 0, 0, algSec)},
	})
	// Another window length re-reads the timestamps (policy change rule):
	// the 3 units admitted at this instant are inside 500 ms too.
	other := algReq(engine.Log([]byte("l"), 3, 500, 3))
	if got := algDo(t, e, algT0+2*algSec, other); got != res(false, 0, 500*algMs, 500*algMs) {
		t.Errorf("500 ms window: %+v", got)
	}
}

// algLogModel counts admitted units in (now-W, now] from the list of
// admitted calls.
type algLogModel struct {
	key           []byte
	limit, window int64
	windowMs      int64
	ev            algEvents
}

func (m *algLogModel) request(cost int64) engine.Request {
	return algReq(engine.Log(m.key, m.limit, m.windowMs, cost))
}

func (m *algLogModel) count(at int64) int64 { return m.ev.sum(at-m.window+1, at+1) }

func (m *algLogModel) do(t testing.TB, now, cost int64) engine.Result {
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

func TestLogMatchesModel(t *testing.T) {
	for i, p := range []struct{ limit, windowMs int64 }{{1, 1}, {3, 1000}, {100, 50}, {7, 3}, {1000, 10}} {
		t.Run(fmt.Sprintf("limit=%d,window=%dms", p.limit, p.windowMs), func(t *testing.T) {
			m := &algLogModel{key: []byte("log"), limit: p.limit, window: p.windowMs * algMs, windowMs: p.windowMs}
			algTrace(t, uint64(200+i), 6000, m, p.limit, m.window/(2*p.limit), m.window)
			// Guarantee: never more than limit in any window of W ns. The
			// windows with the most calls start at a call.
			for _, at := range m.ev.ts {
				if n := m.ev.sum(at, at+m.window); n > p.limit {
					t.Fatalf("window at t0%+d admitted %d > %d", at-algT0, n, p.limit)
				}
			}
			if len(m.ev.ts) < 100 {
				t.Errorf("only %d admissions: the trace does not exercise much", len(m.ev.ts))
			}
		})
	}
}

func TestLogBadInput(t *testing.T) {
	k := []byte("k")
	for _, tc := range []struct {
		name                  string
		limit, windowMs, cost int64
		err                   error
	}{
		{"zero limit", 0, 1000, 1, engine.ErrBadLimit},
		{"largest limit", engine.MaxLogLimit, 1000, 1, nil},
		{"limit above the maximum", engine.MaxLogLimit + 1, 1000, 1, engine.ErrLogLimitTooLarge},
		{"limit MaxInt64", math.MaxInt64, 1000, 1, engine.ErrLogLimitTooLarge},
		{"zero window", 1, 0, 1, engine.ErrBadWindow},
		{"window too long", 1, engine.MaxDuration/1e6 + 1, 1, engine.ErrWindowTooLong},
		{"negative cost", 1, 1000, -1, engine.ErrBadCost},
		{"largest window and cost", 1, engine.MaxDuration / 1e6, math.MaxInt64, nil},
	} {
		r, err := engine.Log(k, tc.limit, tc.windowMs, tc.cost)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
		if err == nil && (r.Op != engine.OpLog || r.Window != tc.windowMs*algMs) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
	if got := engine.ErrLogLimitTooLarge.Error(); got != "limit exceeds the sliding log maximum of 100000" {
		t.Errorf("ErrLogLimitTooLarge text %q", got)
	}
}

// TestLogHugeValues: the largest limit in one call, the largest window at
// the largest time, and huge costs.
func TestLogHugeValues(t *testing.T) {
	e := algEngine(t, 1)
	big := func(cost int64) engine.Request {
		return algReq(engine.Log([]byte("big"), engine.MaxLogLimit, 1000, cost))
	}
	if got := algDo(t, e, algT0, big(engine.MaxLogLimit)); !got.Allowed || got.Remaining != 0 {
		t.Fatalf("whole limit at once: %+v", got)
	}
	if got := algDo(t, e, algT0+algSec-1, big(1)); got.Allowed || got.RetryAfter != 1 {
		t.Fatalf("then one more: %+v", got)
	}
	if got := algDo(t, e, algT0+algSec, big(engine.MaxLogLimit)); !got.Allowed {
		t.Fatalf("next window: %+v", got)
	}
	if got := algDo(t, e, algT0+algSec, big(math.MaxInt64)); got.Allowed || got.RetryAfter != -1 || got.Remaining != 0 {
		t.Fatalf("MaxInt64 cost: %+v", got)
	}

	windowMs := engine.MaxDuration / 1e6
	w := windowMs * 1e6
	long := func(cost int64) engine.Request { return algReq(engine.Log([]byte("long"), 2, windowMs, cost)) }
	if got := algDo(t, e, engine.MaxNow, long(2)); !got.Allowed || got.ResetAfter != w {
		t.Fatalf("largest window at MaxNow: %+v", got)
	}
	if got := algDo(t, e, math.MaxInt64, long(1)); got.Allowed || got.RetryAfter != w {
		t.Fatalf("clamped past MaxNow: %+v", got)
	}
}
