package engine_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

func TestSlidingScript(t *testing.T) {
	e := algEngine(t, 2)
	sl := func(cost int64) engine.Request { return algReq(engine.Sliding([]byte("s"), 4, 1000, cost)) }
	res := func(allowed bool, remaining, retry, reset int64) engine.Result {
		return engine.Result{Allowed: allowed, Limit: 4, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
	}
	algScript(t, e, []algRow{
		{"peek on a missing key", algT0, sl(0), res(true, 4, 0, 0)},
		{"fill the window", algT0, sl(4), res(true, 0, 0, 2*algSec)},
		// Next window at elapsed e: ceil(4*(1s-e)/1s) <= 3 from e = 250 ms.
		{"denied: retry in the next window", algT0 + 500*algMs, sl(1), res(false, 0, 750*algMs, 1500*algMs)},
		{"the window turns: prev weighs fully", algT0 + algSec, sl(1), res(false, 0, 250*algMs, algSec)},
		{"1 ns before the weight drops", algT0 + 1250*algMs - 1, sl(1), res(false, 0, 1, 750*algMs+1)},
		{"weight 3 leaves room for 1", algT0 + 1250*algMs, sl(1), res(true, 0, 0, 1750*algMs)},
		{"peek: 1 + ceil(4*0.5)", algT0 + 1500*algMs, sl(0), res(true, 1, 0, 1500*algMs)},
		{"cost above limit is never", algT0 + 1500*algMs, sl(5), res(false, 1, -1, 1500*algMs)},
		{"denied within this window", algT0 + 1500*algMs, sl(2), res(false, 1, 250*algMs, 1500*algMs)},
		{"prev 1 weighs ceil(0.5) = 1", algT0 + 2500*algMs, sl(3), res(true, 0, 0, 1500*algMs)},
		{"the window after next is empty", algT0 + 4*algSec, sl(4), res(true, 0, 0, 2*algSec)},
	})
}

// algSlidingModel recomputes the weighted count from the list of admitted
// calls, in big integers.
type algSlidingModel struct {
	key           []byte
	limit, window int64
	windowMs      int64
	ev            algEvents
}

func (m *algSlidingModel) request(cost int64) engine.Request {
	return algReq(engine.Sliding(m.key, m.limit, m.windowMs, cost))
}

func (m *algSlidingModel) view(at int64) (cur, prev, elapsed int64) {
	start := at - at%m.window
	return m.ev.sum(start, start+m.window), m.ev.sum(start-m.window, start), at - start
}

func (m *algSlidingModel) count(at int64) int64 {
	cur, prev, elapsed := m.view(at)
	return cur + algCeilMulDiv(prev, m.window-elapsed, m.window)
}

func (m *algSlidingModel) do(t testing.TB, now, cost int64) engine.Result {
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
		res.RetryAfter = algFirst(t, now, now+3*m.window, func(at int64) bool { return m.count(at)+cost <= m.limit }) - now
	}
	res.ResetAfter = algFirst(t, now, now+2*m.window, func(at int64) bool {
		cur, prev, _ := m.view(at)
		return cur == 0 && prev == 0
	}) - now
	return res
}

func TestSlidingMatchesModel(t *testing.T) {
	for i, p := range []struct{ limit, windowMs int64 }{{1, 1}, {4, 1000}, {100, 50}, {7, 3}, {1000, 10}} {
		t.Run(fmt.Sprintf("limit=%d,window=%dms", p.limit, p.windowMs), func(t *testing.T) {
			m := &algSlidingModel{key: []byte("sliding"), limit: p.limit, window: p.windowMs * algMs, windowMs: p.windowMs}
			algTrace(t, uint64(100+i), 6000, m, p.limit, m.window/(2*p.limit), m.window)
			algCheckSlidingBound(t, m)
		})
	}
}

// algCheckSlidingBound checks the documented guarantees over the admitted
// calls: at most L per aligned window, and in every window [s, s+W) at most
// L + floor(p*x/W), x = s - aligned start, p = that aligned window's total
// (so fewer than 2L). The count of [s, s+W) only changes where a call
// enters (s = t-W+1) or leaves (s = t+1) it, and the bound only grows with
// s inside an aligned window, so checking those s and the aligned starts
// covers every s.
func algCheckSlidingBound(t *testing.T, m *algSlidingModel) {
	t.Helper()
	w, limit := m.window, m.limit
	var cands []int64
	for _, at := range m.ev.ts {
		cands = append(cands, at-w+1, at+1, at-at%w)
	}
	worst := int64(0)
	for _, s := range cands {
		a := s - s%w
		x := s - a
		p := m.ev.sum(a, a+w)
		n := m.ev.sum(s, s+w)
		worst = max(worst, n)
		if x == 0 && n > limit {
			t.Fatalf("aligned window at t0%+d admitted %d > %d", s-algT0, n, limit)
		}
		if n > limit+p*x/w || n >= 2*limit && limit > 0 {
			t.Fatalf("window at t0%+d (x=%d, p=%d) admitted %d > %d + %d", s-algT0, x, p, n, limit, p*x/w)
		}
	}
	t.Logf("%d admissions; most in one window: %d (limit %d)", len(m.ev.ts), worst, limit)
	if len(m.ev.ts) < 100 {
		t.Errorf("only %d admissions: the trace does not exercise much", len(m.ev.ts))
	}
}

func TestSlidingBadInput(t *testing.T) {
	k := []byte("k")
	for _, tc := range []struct {
		name                  string
		limit, windowMs, cost int64
		err                   error
	}{
		{"zero limit", 0, 1000, 1, engine.ErrBadLimit},
		{"limit above 2^60", engine.MaxLimit + 1, 1000, 1, engine.ErrLimitTooLarge},
		{"zero window", 1, 0, 1, engine.ErrBadWindow},
		{"window too long", 1, engine.MaxDuration/1e6 + 1, 1, engine.ErrWindowTooLong},
		{"negative cost", 1, 1000, -1, engine.ErrBadCost},
		{"largest", engine.MaxLimit, engine.MaxDuration / 1e6, math.MaxInt64, nil},
	} {
		r, err := engine.Sliding(k, tc.limit, tc.windowMs, tc.cost)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
		if err == nil && (r.Op != engine.OpSliding || r.Window != tc.windowMs*algMs) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

// TestSlidingHugeValues: with the largest limit and window the weighted
// count needs 120-bit products; it must match big-integer arithmetic.
func TestSlidingHugeValues(t *testing.T) {
	e := algEngine(t, 1)
	windowMs := engine.MaxDuration / 1e6
	w := windowMs * 1e6
	limit := engine.MaxLimit
	k := []byte("huge")
	req := func(cost int64) engine.Request { return algReq(engine.Sliding(k, limit, windowMs, cost)) }
	start := algT0 - algT0%w
	if got := algDo(t, e, start+w-1, req(limit-3)); !got.Allowed || got.Remaining != 3 || got.ResetAfter != w+1 {
		t.Fatalf("fill: %+v", got)
	}
	for _, elapsed := range []int64{0, 1, 12345, w / 3, w / 2, w - 1} {
		now := start + w + elapsed
		weight := algCeilMulDiv(limit-3, w-elapsed, w)
		got := algDo(t, e, now, req(0))
		if want := max(limit-weight, 0); got.Remaining != want || !got.Allowed {
			t.Errorf("elapsed %d: remaining %d, want %d", elapsed, got.Remaining, want)
		}
		// The retry for a call that needs everything is when the weight
		// reaches 0, the next window; for one that needs half, it is the
		// first elapsed time where ceil((limit-3)*left/w) <= limit-half.
		half := limit / 2
		got = algDo(t, e, now, req(half))
		if got.Allowed {
			if algCeilMulDiv(limit-3, w-elapsed, w)+half > limit {
				t.Errorf("elapsed %d: allowed %d too early", elapsed, half)
			}
			break
		}
		at := now + got.RetryAfter
		left := start + 2*w - at
		if algCeilMulDiv(limit-3, left, w)+half > limit || algCeilMulDiv(limit-3, left+1, w)+half <= limit {
			t.Errorf("elapsed %d: retry after %d is not the first instant", elapsed, got.RetryAfter)
		}
	}
	if got := algDo(t, e, start+2*w, req(math.MaxInt64)); got.Allowed || got.RetryAfter != -1 {
		t.Errorf("MaxInt64 cost: %+v", got)
	}
}
