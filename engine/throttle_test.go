package engine_test

import (
	"errors"
	"math"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// algCeilSec rounds a duration up to whole seconds, as CL.THROTTLE and
// GCRA reply; -1 stays -1.
func algCeilSec(ns int64) int64 {
	if ns < 0 {
		return -1
	}
	return (ns + algSec - 1) / algSec
}

// algThrottleReply is the five-field reply the server package writes:
// [limited, limit, remaining, retry_after_s, reset_after_s].
func algThrottleReply(r engine.Result) [5]int64 {
	limited, retry := int64(0), int64(-1)
	if !r.Allowed {
		limited, retry = 1, algCeilSec(r.RetryAfter)
	}
	return [5]int64{limited, r.Limit, r.Remaining, retry, algCeilSec(r.ResetAfter)}
}

// algCellRow is one row of redis-cell's test table: the call at t ms after
// the first, its quantity, the result in ns and the wire reply.
type algCellRow struct {
	atMs       int64
	quantity   int64
	allowed    bool
	remaining  int64
	retryAfter int64 // ns; 0 when allowed, -1 never
	resetAfter int64 // ns
	reply      [5]int64
}

// redis-cell's table for CL.THROTTLE foo 4 1 1 [q] from a fresh key.
var algCellFoo = []algCellRow{
	{0, 6, false, 5, -1, 0, [5]int64{1, 5, 5, -1, 0}},
	{0, 1, true, 4, 0, 1 * algSec, [5]int64{0, 5, 4, -1, 1}},
	{0, 1, true, 3, 0, 2 * algSec, [5]int64{0, 5, 3, -1, 2}},
	{0, 1, true, 2, 0, 3 * algSec, [5]int64{0, 5, 2, -1, 3}},
	{0, 1, true, 1, 0, 4 * algSec, [5]int64{0, 5, 1, -1, 4}},
	{0, 1, true, 0, 0, 5 * algSec, [5]int64{0, 5, 0, -1, 5}},
	{0, 1, false, 0, 1 * algSec, 5 * algSec, [5]int64{1, 5, 0, 1, 5}},
	{3000, 1, true, 2, 0, 3 * algSec, [5]int64{0, 5, 2, -1, 3}},
	{3100, 1, true, 1, 0, 3900 * algMs, [5]int64{0, 5, 1, -1, 4}},
	{4000, 1, true, 1, 0, 4 * algSec, [5]int64{0, 5, 1, -1, 4}},
	{8000, 1, true, 4, 0, 1 * algSec, [5]int64{0, 5, 4, -1, 1}},
	{9500, 1, true, 4, 0, 1 * algSec, [5]int64{0, 5, 4, -1, 1}},
	{9500, 0, true, 4, 0, 1 * algSec, [5]int64{0, 5, 4, -1, 1}},
	{9500, 2, true, 2, 0, 3 * algSec, [5]int64{0, 5, 2, -1, 3}},
	{9500, 5, false, 2, 3 * algSec, 3 * algSec, [5]int64{1, 5, 2, 3, 3}},
}

// CL.THROTTLE user123 0 1 2 1.
var algCellUser = []algCellRow{
	{0, 1, true, 0, 0, 2 * algSec, [5]int64{0, 1, 0, -1, 2}},
	{0, 1, false, 0, 2 * algSec, 2 * algSec, [5]int64{1, 1, 0, 2, 2}},
	{2000, 1, true, 0, 0, 2 * algSec, [5]int64{0, 1, 0, -1, 2}},
}

func algRunCell(t *testing.T, e *engine.Engine, rows []algCellRow, build func(row algCellRow) engine.Request) {
	t.Helper()
	for i, row := range rows {
		got := algDo(t, e, algT0+row.atMs*algMs, build(row))
		want := engine.Result{Allowed: row.allowed, Limit: row.reply[1], Remaining: row.remaining,
			RetryAfter: row.retryAfter, ResetAfter: row.resetAfter}
		if got != want {
			t.Errorf("row %d (t=%d ms, q=%d):\n got %+v\nwant %+v", i, row.atMs, row.quantity, got, want)
		}
		if reply := algThrottleReply(got); reply != row.reply {
			t.Errorf("row %d (t=%d ms, q=%d): reply %v, want %v", i, row.atMs, row.quantity, reply, row.reply)
		}
	}
}

func TestThrottleRedisCellVectors(t *testing.T) {
	// A fresh engine per table: the tables share instants, and a shard's
	// clock never runs backwards.
	for _, shards := range []int{1, 4} {
		algRunCell(t, algEngine(t, shards), algCellFoo, func(row algCellRow) engine.Request {
			return algReq(engine.Throttle([]byte("foo"), 4, 1, algSec, row.quantity))
		})
		algRunCell(t, algEngine(t, shards), algCellUser, func(row algCellRow) engine.Request {
			return algReq(engine.Throttle([]byte("user123"), 0, 1, 2*algSec, row.quantity))
		})
	}
}

// TestThrottleGCRAVectors runs the same table through Redis 8.8's GCRA.
// GCRA has no quantity 0, so that row is a CL.THROTTLE peek on the same
// key: the state is shared.
func TestThrottleGCRAVectors(t *testing.T) {
	algRunCell(t, algEngine(t, 2), algCellFoo, func(row algCellRow) engine.Request {
		if row.quantity == 0 {
			return algReq(engine.Throttle([]byte("foo"), 4, 1, algSec, 0))
		}
		return algReq(engine.GCRA([]byte("foo"), 4, 1, 1, row.quantity))
	})
	algRunCell(t, algEngine(t, 2), algCellUser, func(row algCellRow) engine.Request {
		return algReq(engine.GCRA([]byte("user123"), 0, 1, 2, row.quantity))
	})
}

func TestThrottleQuantityZeroCreatesNothing(t *testing.T) {
	e := algEngine(t, 1)
	r := algReq(engine.Throttle([]byte("k"), 4, 1, algSec, 0))
	if !r.ReadOnly {
		t.Fatal("quantity 0 is not read-only")
	}
	got := algDo(t, e, algT0, r)
	if want := (engine.Result{Allowed: true, Limit: 5, Remaining: 5}); got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if algDo(t, e, algT0, algKeyOp(engine.OpExists, "k")).Value != 0 {
		t.Error("quantity 0 created the key")
	}
}

// TestThrottleSharesStateWithAllow: a key limited through one token bucket
// command is limited through the others.
func TestThrottleSharesStateWithAllow(t *testing.T) {
	e := algEngine(t, 4)
	k := []byte("shared")
	// 5 tokens, 1 per second, in each spelling.
	allow := algReq(engine.TokenBucket(k, 5, 1, 1))
	throttle := algReq(engine.Throttle(k, 4, 1, algSec, 1))
	gcra := algReq(engine.GCRA(k, 4, 1, 1, 1))
	if allow.Interval != throttle.Interval || allow.Interval != gcra.Interval || allow.Limit != throttle.Limit || allow.Limit != gcra.Limit {
		t.Fatalf("the spellings differ: %+v %+v %+v", allow, throttle, gcra)
	}
	for i, r := range []engine.Request{allow, throttle, gcra, allow, throttle} {
		if got := algDo(t, e, algT0, r); !got.Allowed || got.Remaining != int64(4-i) {
			t.Fatalf("call %d: %+v", i, got)
		}
	}
	for _, r := range []engine.Request{allow, throttle, gcra} {
		if got := algDo(t, e, algT0, r); got.Allowed || got.RetryAfter != algSec {
			t.Errorf("op %d after exhaustion: %+v", r.Op, got)
		}
	}
	if got := algDo(t, e, algT0+algSec, gcra); !got.Allowed {
		t.Errorf("GCRA one second later: %+v", got)
	}
}

func TestThrottleConstructor(t *testing.T) {
	k := []byte("k")
	for _, tc := range []struct {
		name                           string
		burst, count, period, quantity int64
		interval, limit                int64
		err                            error
	}{
		{"redis-cell example", 15, 30, 60 * algSec, 1, 2 * algSec, 16, nil},
		{"integer division truncates", 0, 3, algSec, 1, 333_333_333, 1, nil},
		{"count above period ns is 1 ns", 0, 2 * algSec, algSec, 1, 1, 1, nil},
		{"quantity above limit is valid", 1, 1, algSec, 100, algSec, 2, nil},
		{"zero count", 1, 0, algSec, 1, 0, 0, engine.ErrZeroRate},
		{"zero period", 1, 1, 0, 1, 0, 0, engine.ErrZeroRate},
		{"negative count", 1, -1, algSec, 1, 0, 0, engine.ErrBadRate},
		{"negative period", 1, 1, -algSec, 1, 0, 0, engine.ErrBadRate},
		{"negative burst", -1, 1, algSec, 1, 0, 0, engine.ErrBadBurst},
		{"negative quantity", 1, 1, algSec, -1, 0, 0, engine.ErrBadCost},
		{"largest tau", 0, 1, engine.MaxDuration, 1, engine.MaxDuration, 1, nil},
		{"tau overflow by period", 1, 1, engine.MaxDuration, 1, 0, 0, engine.ErrPeriodTooLong},
		{"period of MaxInt64 ns", 0, 1, math.MaxInt64, 1, 0, 0, engine.ErrPeriodTooLong},
		{"burst of MaxInt64", math.MaxInt64, 1, algSec, 1, 0, 0, engine.ErrPeriodTooLong},
		{"largest burst at 1 ns", engine.MaxDuration - 1, 1, 1, 1, 1, engine.MaxDuration, nil},
		{"burst just too large", engine.MaxDuration, 1, 1, 1, 0, 0, engine.ErrPeriodTooLong},
	} {
		r, err := engine.Throttle(k, tc.burst, tc.count, tc.period, tc.quantity)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if r.Op != engine.OpGCRA || r.Interval != tc.interval || r.Limit != tc.limit || r.Cost != tc.quantity || r.ReadOnly {
			t.Errorf("%s: %+v, want interval %d limit %d", tc.name, r, tc.interval, tc.limit)
		}
	}
	if engine.ErrZeroRate.Error() != "zero rates are not supported" {
		t.Errorf("ErrZeroRate text %q", engine.ErrZeroRate)
	}
}

func TestThrottleGCRAConstructor(t *testing.T) {
	k := []byte("k")
	for _, tc := range []struct {
		name          string
		burst, tpp    int64
		period        float64
		tokens        int64
		interval, lim int64
		err           error
	}{
		{"one per second", 4, 1, 1, 1, algSec, 5, nil},
		{"rounded to whole microseconds", 0, 3, 1, 1, 333_333 * 1000, 1, nil},
		{"rounded half up", 0, 2_000_000, 3, 1, 2000, 1, nil},
		{"fractional period", 9, 10, 0.5, 2, 50 * algMs, 10, nil},
		{"below a microsecond is 1 us", 0, 1000, 0.000001, 1, 1000, 1, nil},
		{"tokens above limit are valid", 0, 1, 1, 7, algSec, 1, nil},
		{"negative burst", -1, 1, 1, 1, 0, 0, engine.ErrBadBurst},
		{"zero tokens per period", 1, 0, 1, 1, 0, 0, engine.ErrBadRate},
		{"zero period", 1, 1, 0, 1, 0, 0, engine.ErrBadPeriod},
		{"negative period", 1, 1, -1, 1, 0, 0, engine.ErrBadPeriod},
		{"NaN period", 1, 1, math.NaN(), 1, 0, 0, engine.ErrBadPeriod},
		{"infinite period", 1, 1, math.Inf(1), 1, 0, 0, engine.ErrBadPeriod},
		{"period 1e12", 1, 1, 1e12, 1, 0, 0, engine.ErrBadPeriod},
		{"zero tokens", 1, 1, 1, 0, 0, 0, engine.ErrBadTokens},
		{"interval overflows ns", 0, 1, 1e11, 1, 0, 0, engine.ErrPeriodTooLong},
		// Redis's int64 microseconds overflow: refused with Redis's texts.
		{"tau overflows Redis's microseconds", 1 << 40, 1, 1e6, 1, 0, 0, engine.ErrGCRABurstOverflow},
		{"burst of MaxInt64", math.MaxInt64, 1, 1, 1, 0, 0, engine.ErrGCRABurstOverflow},
		{"tokens of MaxInt64", 0, 1, 1, math.MaxInt64, 0, 0, engine.ErrGCRATokensOverflow},
		{"tokens times 10 s overflow", 0, 1, 10, 1 << 40, 0, 0, engine.ErrGCRATokensOverflow},
		{"tokens times 10 s fit: a denial", 0, 1, 10, 1 << 39, 10 * algSec, 1, nil},
		{"tokens checked before max_burst", math.MaxInt64, 1, 1, math.MaxInt64, 0, 0, engine.ErrGCRATokensOverflow},
		// Within Redis's range, beyond rlserver's 2^60 ns.
		{"tau beyond 2^60 ns", 1 << 20, 1, 1e6, 1, 0, 0, engine.ErrPeriodTooLong},
		{"burst of MaxInt64 at 1 us", math.MaxInt64, 1_000_000, 1, 1, 0, 0, engine.ErrPeriodTooLong},
	} {
		r, err := engine.GCRA(k, tc.burst, tc.tpp, tc.period, tc.tokens)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
			continue
		}
		if err != nil {
			continue
		}
		if r.Op != engine.OpGCRA || r.Interval != tc.interval || r.Limit != tc.lim || r.Cost != tc.tokens || r.ReadOnly {
			t.Errorf("%s: %+v, want interval %d limit %d", tc.name, r, tc.interval, tc.lim)
		}
	}
}

// TestThrottleHugeQuantityNeverWraps: a quantity far above the limit is
// refused with "never", whatever the interval.
func TestThrottleHugeQuantityNeverWraps(t *testing.T) {
	e := algEngine(t, 1)
	r := algReq(engine.Throttle([]byte("h"), 1<<40, 1, 1<<19, math.MaxInt64))
	got := algDo(t, e, algT0, r)
	if got.Allowed || got.RetryAfter != -1 || got.Remaining != 1<<40+1 || got.ResetAfter != 0 {
		t.Errorf("got %+v", got)
	}
}

// TestGCRAAtOverflow: Redis refuses a TAT that would pass MaxInt64
// microseconds, now (whole milliseconds, as Redis reads its clock) plus
// interval*tokens; GCRA, with no clock, skips that check.
func TestGCRAAtOverflow(t *testing.T) {
	const (
		t0    = int64(1_700_000_000_000_000_000) // ns; 1.7e15 us
		t0Us  = t0 / 1000
		late  = t0 + 999_999 // the same millisecond
		limit = math.MaxInt64 - t0Us
	)
	k := []byte("k")
	for _, tc := range []struct {
		name   string
		now    int64
		tokens int64
		err    error
	}{
		{"the sum at MaxInt64", t0, limit, nil},
		{"1 us past MaxInt64", t0, limit + 1, engine.ErrGCRATokensOverflow},
		{"now is truncated to the millisecond", late, limit, nil},
		{"MaxInt64 tokens of 1 us", t0, math.MaxInt64, engine.ErrGCRATokensOverflow},
		{"no clock: not checked", 0, math.MaxInt64, nil},
	} {
		// 1e6 tokens per second: an interval of 1 us.
		_, err := engine.GCRAAt(tc.now, k, 0, 1_000_000, 1, tc.tokens)
		if !errors.Is(err, tc.err) {
			t.Errorf("%s: err = %v, want %v", tc.name, err, tc.err)
		}
	}
	if _, err := engine.GCRA(k, 0, 1_000_000, 1, math.MaxInt64); err != nil {
		t.Errorf("GCRA without a clock: %v", err)
	}
}
