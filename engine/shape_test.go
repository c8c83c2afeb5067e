package engine_test

import (
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

func TestShapeScript(t *testing.T) {
	e := algEngine(t, 2)
	// Capacity 3, 10 per second: one unit served every 100 ms.
	sh := func(cost int64) engine.Request { return algReq(engine.Shape([]byte("q"), 3, 10, cost)) }
	admit := func(delay, queued, reset int64) engine.Result {
		return engine.Result{Allowed: true, Limit: 3, Remaining: 3 - queued, Delay: delay, Queued: queued, ResetAfter: reset}
	}
	reject := func(retry, queued, reset int64) engine.Result {
		return engine.Result{Limit: 3, Remaining: 3 - queued, RetryAfter: retry, Delay: -1, Queued: queued, ResetAfter: reset}
	}
	algScript(t, e, []algRow{
		{"peek on a missing key", algT0, sh(0), admit(0, 0, 0)},
		{"first proceeds at once", algT0, sh(1), admit(0, 1, 100*algMs)},
		{"second waits one interval", algT0, sh(1), admit(100*algMs, 2, 200*algMs)},
		{"third waits two", algT0, sh(1), admit(200*algMs, 3, 300*algMs)},
		{"peek reports the wait", algT0, sh(0), admit(300*algMs, 3, 300*algMs)},
		{"fourth: the queue is full", algT0, sh(1), reject(100*algMs, 3, 300*algMs)},
		{"cost above capacity is never", algT0, sh(4), reject(-1, 3, 300*algMs)},
		{"2.5 units left count as 3", algT0 + 50*algMs, sh(1), reject(50*algMs, 3, 250*algMs)},
		{"one unit served: room for one", algT0 + 100*algMs, sh(1), admit(200*algMs, 3, 300*algMs)},
		{"drained: a full batch", algT0 + algSec, sh(3), admit(0, 3, 300*algMs)},
		{"1.5 units left count as 2", algT0 + algSec + 150*algMs, sh(1), admit(150*algMs, 3, 250*algMs)},
	})
}

// algShapeModel simulates the queue unit by unit: admitted calls are
// served in order, one unit per interval, each starting when the previous
// one is done or when it arrives.
type algShapeModel struct {
	key      []byte
	capacity int64
	rate     float64
	interval int64
	items    []struct{ start, cost int64 } // admitted and not yet served, oldest first
	delayed  int                           // admitted calls that had to wait
	rejected int                           // calls of cost <= capacity rejected
}

func (m *algShapeModel) request(cost int64) engine.Request {
	return algReq(engine.Shape(m.key, m.capacity, m.rate, cost))
}

// units is the number of units admitted and not yet served at at.
func (m *algShapeModel) units(at int64) int64 {
	n := int64(0)
	for _, it := range m.items {
		served := min(max((at-it.start)/m.interval, 0), it.cost)
		if at < it.start {
			served = 0
		}
		n += it.cost - served
	}
	return n
}

func (m *algShapeModel) finish() int64 {
	if len(m.items) == 0 {
		return 0
	}
	last := m.items[len(m.items)-1]
	return last.start + last.cost*m.interval
}

func (m *algShapeModel) do(t testing.TB, now, cost int64) engine.Result {
	for len(m.items) > 0 && m.items[0].start+m.items[0].cost*m.interval <= now {
		m.items = m.items[1:]
	}
	res := engine.Result{Limit: m.capacity, Delay: -1}
	q := m.units(now)
	res.Queued = q
	switch {
	case cost > m.capacity:
		res.RetryAfter = -1
	case q+cost > m.capacity:
		m.rejected++
		res.RetryAfter = algFirst(t, now, now+m.capacity*m.interval, func(at int64) bool { return m.units(at)+cost <= m.capacity }) - now
	default:
		res.Allowed = true
		start := max(now, m.finish())
		res.Delay = start - now
		if res.Delay > 0 {
			m.delayed++
		}
		if cost > 0 {
			m.items = append(m.items, struct{ start, cost int64 }{start, cost})
		}
		res.Queued = m.units(now)
	}
	if res.Queued > m.capacity {
		t.Fatalf("queue holds %d > capacity %d", res.Queued, m.capacity)
	}
	res.Remaining = m.capacity - res.Queued
	res.ResetAfter = algFirst(t, now, now+m.capacity*m.interval, func(at int64) bool { return m.units(at) == 0 }) - now
	return res
}

func TestShapeMatchesModel(t *testing.T) {
	for i, p := range []struct {
		capacity int64
		rate     float64
	}{{1, 1000}, {3, 10}, {50, 3}, {8, 1e9}, {20, 7.5}} {
		t.Run(fmt.Sprintf("capacity=%d,rate=%g", p.capacity, p.rate), func(t *testing.T) {
			// The interval is RL.ALLOW's, whatever its rounding.
			interval := algReq(engine.Shape(nil, p.capacity, p.rate, 1)).Interval
			m := &algShapeModel{key: []byte("shape"), capacity: p.capacity, rate: p.rate, interval: interval}
			algTrace(t, uint64(300+i), 6000, m, p.capacity, interval, p.capacity*interval)
			if m.delayed < 100 || m.rejected < 100 {
				t.Errorf("%d delayed, %d rejected: the trace does not exercise the queue", m.delayed, m.rejected)
			}
		})
	}
}

func TestShapeBadInput(t *testing.T) {
	k := []byte("k")
	for _, tc := range []struct {
		name     string
		capacity int64
		rate     float64
		cost     int64
		err      error
	}{
		{"zero capacity", 0, 1, 1, engine.ErrBadCapacity},
		{"zero rate", 1, 0, 1, engine.ErrBadRate},
		{"NaN rate", 1, math.NaN(), 1, engine.ErrBadRate},
		{"negative cost", 1, 1, -1, engine.ErrBadCost},
		{"capacity over rate too long", math.MaxInt64, 1, 1, engine.ErrPeriodTooLong},
		{"valid", 10, 2, 3, nil},
	} {
		r, err := engine.Shape(k, tc.capacity, tc.rate, tc.cost)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
		if err == nil && (r.Op != engine.OpShape || r.Interval != 500*algMs || r.Limit != 10 || r.Cost != 3) {
			t.Errorf("%s: %+v", tc.name, r)
		}
	}
}

// TestShapeHugeValues: the longest queue at the largest time, and a cost
// far above capacity.
func TestShapeHugeValues(t *testing.T) {
	e := algEngine(t, 1)
	// 2^20 units at 2^40 ns each: the queue spans 2^60 ns.
	rate := 1e9 / float64(int64(1)<<40)
	sh := func(cost int64) engine.Request { return algReq(engine.Shape([]byte("h"), 1<<20, rate, cost)) }
	if got := algDo(t, e, engine.MaxNow, sh(1<<20-1)); !got.Allowed || got.Queued != 1<<20-1 || got.Delay != 0 {
		t.Fatalf("fill: %+v", got)
	}
	got := algDo(t, e, engine.MaxNow, sh(1))
	if !got.Allowed || got.Delay != (1<<20-1)<<40 || got.ResetAfter != engine.MaxDuration || got.Queued != 1<<20 {
		t.Fatalf("last slot: %+v", got)
	}
	if got := algDo(t, e, math.MaxInt64, sh(1)); got.Allowed || got.RetryAfter != 1<<40 || got.Delay != -1 {
		t.Fatalf("full at the clamped time: %+v", got)
	}
	if got := algDo(t, e, engine.MaxNow, sh(math.MaxInt64)); got.Allowed || got.RetryAfter != -1 {
		t.Fatalf("MaxInt64 cost: %+v", got)
	}
}
