package engine

import (
	"context"
	"fmt"
	"testing"
)

// Policy changes on live keys (scaled.go, DESIGN.md): every rule with
// explicit times. Each script is one key's life under changing
// parameters, as RL.CHECK sends them after RL.POLICY SET.

// scaledBucket is a policy's RL.ALLOW tier: bucket with Scaled set.
func scaledBucket(t testing.TB, key string, capacity int64, rate float64, cost int64) Request {
	t.Helper()
	r := bucket(t, key, capacity, rate, cost)
	r.Scaled = true
	return r
}

func scaledShape(t testing.TB, key string, capacity int64, rate float64, cost int64) Request {
	t.Helper()
	r, err := Shape([]byte(key), capacity, rate, cost)
	if err != nil {
		t.Fatal(err)
	}
	r.Scaled = true
	return r
}

// windowReq builds a FIXED, SLIDING or LOG request with Scaled set (which
// those algorithms ignore).
func windowReq(t testing.TB, op Op, key string, limit, windowMs, cost int64) Request {
	t.Helper()
	build := map[Op]func([]byte, int64, int64, int64) (Request, error){OpFixed: Fixed, OpSliding: Sliding, OpLog: Log}[op]
	r, err := build([]byte(key), limit, windowMs, cost)
	if err != nil {
		t.Fatal(err)
	}
	r.Scaled = true
	return r
}

func allowed(limit, remaining, reset int64) Result {
	return Result{Allowed: true, Limit: limit, Remaining: remaining, ResetAfter: reset}
}

func denied(limit, remaining, retry, reset int64) Result {
	return Result{Limit: limit, Remaining: remaining, RetryAfter: retry, ResetAfter: reset}
}

// TestPolicyChangeGCRA: capacity 10 at 10/s (T = 100 ms, tau = 1 s). The
// tokens in use are kept, capped at the new capacity, and refill at the
// new rate: d' = min(ceil(d * T_new / T_old), tau_new).
func TestPolicyChangeGCRA(t *testing.T) {
	e := newEngine(t, 2)
	sb := func(capacity int64, rate float64, cost int64) Request {
		return scaledBucket(t, "k", capacity, rate, cost)
	}
	runScript(t, e, []scriptRow{
		{"charge 4 of 10", t0, sb(10, 10, 4), allowed(10, 6, 400*ms)},
		{"100 ms later 3 are used", t0 + 100*ms, sb(10, 10, 0), allowed(10, 7, 300*ms)},
		{"capacity raised to 20: the 3 in use, 17 left at once", t0 + 100*ms, sb(20, 10, 0), allowed(20, 17, 300*ms)},
		// Nothing was charged under 20: the state drains at the rate it
		// was charged under and is read under 20 at each now.
		{"until charged, read under the new policy at each now", t0 + 200*ms, sb(20, 10, 0), allowed(20, 18, 200*ms)},
		{"the first charge under 20 stores 200 ms + T", t0 + 200*ms, sb(20, 10, 1), allowed(20, 17, 300*ms)},
		{"capacity lowered to 5: the same 3 in use", t0 + 200*ms, sb(5, 10, 0), allowed(5, 2, 300*ms)},
		// 3 in use, capacity 2: one full bucket owed, 200 ms, not 300.
		{"capacity lowered to 2: capped at one bucket, denied for T", t0 + 200*ms, sb(2, 10, 1), denied(2, 0, 100*ms, 200*ms)},
		// Stored: 200 ms under T 100 ms (2 tokens in use). T 50 ms: 100 ms.
		{"rate raised to 20/s: tokens in use kept, refill faster", t0 + 200*ms, sb(20, 20, 0), allowed(20, 18, 100*ms)},
		// T 200 ms: 400 ms, still 2 tokens, refilled at half speed.
		{"rate lowered to 5/s: tokens in use kept, refill slower", t0 + 200*ms, sb(20, 5, 0), allowed(20, 18, 400*ms)},
		{"charge under 20 at 5/s", t0 + 200*ms, sb(20, 5, 1), allowed(20, 17, 600*ms)},
		// Stored 600 ms under T 200 ms (3 tokens): 300 ms under T 100 ms.
		{"a plain RL.ALLOW on a scaled key rescales too", t0 + 200*ms, bucket(t, "k", 20, 10, 0), allowed(20, 17, 300*ms)},
		{"TTL and TYPE see a token bucket", t0 + 200*ms, keyReq(OpTTL, "k"), Result{Value: 600 * ms, Kind: KindGCRA}},
		{"RL.FIXED on it is WRONGTYPE", t0 + 200*ms, windowReq(t, OpFixed, "k", 5, 1000, 1), Result{Err: ErrWrongType}},
		{"RL.SHAPE on it is WRONGTYPE", t0 + 200*ms, scaledShape(t, "k", 5, 10, 1), Result{Err: ErrWrongType}},
		{"1 ns before empty it exists", t0 + 800*ms - 1, keyReq(OpExists, "k"), Result{Value: 1}},
		{"it expires when its debt is paid", t0 + 800*ms, keyReq(OpExists, "k"), Result{}},
		{"a new key under the last policy", t0 + 800*ms, sb(5, 10, 1), allowed(5, 4, 100*ms)},
	})
}

// TestPolicyChangeTokensInUse: the four cases of the rule, each on a fresh
// key, at named instants.
func TestPolicyChangeTokensInUse(t *testing.T) {
	const (
		T  = 1000 * sec  // the interval at 0.001/s
		t1 = t0 + 1*sec  // raise: 1 s after exhausting
		t2 = t0 + 50*ms  // rate change: half-way through a 10/s token
		t3 = t2 + 125*ms // half a 4/s token (250 ms) after t2
		t4 = t0 + 100*ms // lower, full bucket: one 10/s T after t0
		n1 = int64(1)    // 1 ns
	)
	for _, c := range []struct {
		name string
		rows []scriptRow
	}{
		{"raise admits at once by the difference", []scriptRow{
			// The case: ALLOW 2 0.001 exhausted, then ALLOW 10 0.001.
			{"exhaust 2 at 0.001/s", t0, scaledBucket(t, "k", 2, 0.001, 2), allowed(2, 0, 2*T)},
			{"denied under 2", t0, scaledBucket(t, "k", 2, 0.001, 1), denied(2, 0, T, 2*T)},
			// 1.999 tokens in use: 8 of 10 whole tokens free (the fraction
			// refilled in the last second is kept, not rounded away).
			{"raised to 10: 8 more at once", t1, scaledBucket(t, "k", 10, 0.001, 8), allowed(10, 0, 10*T-sec)},
			{"and no more", t1, scaledBucket(t, "k", 10, 0.001, 1), denied(10, 0, T-sec, 10*T-sec)},
		}},
		{"lower owes at most one full bucket", []scriptRow{
			{"12 of 20 at 10/s", t0, scaledBucket(t, "k", 20, 10, 12), allowed(20, 8, 1200*ms)},
			{"lowered to 5: a full bucket, not 12 of 5", t0, scaledBucket(t, "k", 5, 10, 0), allowed(5, 0, 500*ms)},
			{"denied for T, not 800 ms", t0, scaledBucket(t, "k", 5, 10, 1), denied(5, 0, 100*ms, 500*ms)},
			{"the denial stored the capped debt", t0, keyReq(OpTTL, "k"), Result{Value: 500 * ms, Kind: KindGCRA}},
			{"allowed T later", t4, scaledBucket(t, "k", 5, 10, 1), allowed(5, 0, 500*ms)},
		}},
		{"rate change carries the token in progress", []scriptRow{
			{"4 of 10 at 10/s", t0, scaledBucket(t, "k", 10, 10, 4), allowed(10, 6, 400*ms)},
			// 350 ms under T 100 ms: 3.5 tokens. T 50 ms: 175 ms.
			{"20/s: 3.5 in use", t2, scaledBucket(t, "k", 10, 20, 0), allowed(10, 6, 175*ms)},
			{"charge 1 at 20/s", t2, scaledBucket(t, "k", 10, 20, 1), allowed(10, 5, 225*ms)},
			// 225 ms under T 50 ms: 4.5 tokens. T 250 ms: 1125 ms.
			{"4/s: 4.5 in use", t2, scaledBucket(t, "k", 10, 4, 1), allowed(10, 4, 1375*ms)},
			{"1 ns before the half token is done", t3 - n1, scaledBucket(t, "k", 10, 4, 0), allowed(10, 4, 1250*ms+n1)},
			{"the half token done at t3", t3, scaledBucket(t, "k", 10, 4, 0), allowed(10, 5, 1250*ms)},
		}},
		{"full bucket is unchanged", []scriptRow{
			{"1 of 10 at 10/s", t0, scaledBucket(t, "k", 10, 10, 1), allowed(10, 9, 100*ms)},
			// 1 ns of a 100 ms token is 10 ns of a 1 s one (rounded up).
			{"1 ns before full: the sliver carried", t4 - n1, scaledBucket(t, "k", 3, 1, 0), allowed(3, 2, 10)},
			{"full: any new policy sees a full bucket", t4, scaledBucket(t, "k", 3, 1, 0), allowed(3, 3, 0)},
			{"and the key is gone", t4, keyReq(OpExists, "k"), Result{}},
			{"charged under the new policy", t4, scaledBucket(t, "k", 3, 1, 1), allowed(3, 2, sec)},
		}},
	} {
		t.Run(c.name, func(t *testing.T) { runScript(t, newEngine(t, 2), c.rows) })
	}
}

// TestPolicyChangeDeniedStoresRescale: a denied request stores the
// rescaled state, so its RetryAfter holds; a peek stores nothing, so the
// state keeps draining at the rate it was stored under.
func TestPolicyChangeDeniedStoresRescale(t *testing.T) {
	e := newEngine(t, 2)
	peek := func(key string, capacity, cost int64) Request {
		r := scaledBucket(t, key, capacity, 20, cost)
		r.ReadOnly = true
		return r
	}
	runScript(t, e, []scriptRow{
		{"5 of 20 at 10/s", t0, scaledBucket(t, "d", 20, 10, 5), allowed(20, 15, 500*ms)},
		// 500 ms under T 100 ms -> 250 ms under T 50 ms: a full bucket of 5.
		{"capacity 5 at 20/s, cost 4: denied for 200 ms", t0, scaledBucket(t, "d", 5, 20, 4), denied(5, 0, 200*ms, 250*ms)},
		{"stored: the debt now drains at 20/s", t0 + 25*ms, keyReq(OpTTL, "d"), Result{Value: 225 * ms, Kind: KindGCRA}},
		{"allowed when it said", t0 + 200*ms, scaledBucket(t, "d", 5, 20, 4), allowed(5, 0, 250*ms)},
	})
	runScript(t, newEngine(t, 1), []scriptRow{
		{"5 of 20 at 10/s", t0, scaledBucket(t, "p", 20, 10, 5), allowed(20, 15, 500*ms)},
		{"a peek under capacity 5 at 20/s", t0, peek("p", 5, 4), denied(5, 0, 200*ms, 250*ms)},
		// Still 500 ms under T 100 ms, drained 25 ms at the old rate:
		// 475 ms -> 237.5 ms under T 50 ms.
		{"the peek stored nothing", t0 + 25*ms, peek("p", 5, 4), denied(5, 0, 187_500_000, 237_500_000)},
		{"TTL in the stored parameters", t0 + 25*ms, keyReq(OpTTL, "p"), Result{Value: 475 * ms, Kind: KindGCRA}},
	})
}

// TestPolicyChangeCompactKeys: state written without Scaled keeps no
// parameters. A Scaled request reads it as it is and stores its own
// parameters when it writes; plain requests behave as they always did.
func TestPolicyChangeCompactKeys(t *testing.T) {
	e := newEngine(t, 2)
	runScript(t, e, []scriptRow{
		{"plain charge 4 of 10 at 10/s", t0, bucket(t, "c", 10, 10, 4), allowed(10, 6, 400*ms)},
		{"plain, other capacity: no rescale", t0, bucket(t, "c", 20, 10, 0), allowed(20, 16, 400*ms)},
		{"scaled peek: read as it is", t0, scaledBucket(t, "c", 20, 10, 0), allowed(20, 16, 400*ms)},
		{"scaled denial keeps it compact", t0, scaledBucket(t, "c", 20, 10, 17), denied(20, 16, 100*ms, 400*ms)},
		{"plain, capacity 10: still no rescale", t0, bucket(t, "c", 10, 10, 0), allowed(10, 6, 400*ms)},
		{"scaled charge stores capacity 20", t0, scaledBucket(t, "c", 20, 10, 1), allowed(20, 15, 500*ms)},
		// 5 tokens in use, capacity 3: capped at 300 ms.
		{"now capacity 3 rescales", t0, bucket(t, "c", 3, 10, 0), allowed(3, 0, 300*ms)},
	})
	if k := storedKind(t, e, "c"); k != kindGCRAScaled {
		t.Errorf("slot kind %d, want %d (scaled)", k, kindGCRAScaled)
	}
	do1(t, e, t0, bucket(t, "p", 10, 10, 1))
	do1(t, e, t0, bucket(t, "p", 20, 5, 1))
	if k := storedKind(t, e, "p"); k != KindGCRA {
		t.Errorf("plain requests only: slot kind %d, want %d (compact)", k, KindGCRA)
	}
}

// storedKind is the slot kind of key (KindNone when missing).
func storedKind(t *testing.T, e *Engine, key string) Kind {
	t.Helper()
	k := KindNone
	si := ShardOf([]byte(key), e.Shards())
	err := e.onEach(context.Background(), func(i int, s *shard) {
		if i != si {
			return
		}
		if j := s.tab.find([]byte(key), hashKey([]byte(key))); j >= 0 {
			k = s.tab.slots[j].kind()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestPolicyChangeShape: capacity 10 at 10/s (T = 100 ms). The units in
// the queue are kept (they are admitted requests waiting) and served at
// the new rate. Calls admitted before the change keep the delays they were
// given; later ones are placed after the rescaled queue.
func TestPolicyChangeShape(t *testing.T) {
	e := newEngine(t, 2)
	ss := func(capacity int64, rate float64, cost int64) Request {
		return scaledShape(t, "q", capacity, rate, cost)
	}
	queue := func(capacity, delay, queued, reset int64) Result {
		return Result{Allowed: true, Limit: capacity, Delay: delay, Queued: queued, Remaining: capacity - queued, ResetAfter: reset}
	}
	runScript(t, e, []scriptRow{
		{"queue 4 of 10", t0, ss(10, 10, 4), queue(10, 0, 4, 400*ms)},
		{"100 ms later 3 queued", t0 + 100*ms, ss(10, 10, 0), queue(10, 300*ms, 3, 300*ms)},
		{"capacity raised to 20: the same 3 units", t0 + 100*ms, ss(20, 10, 0), queue(20, 300*ms, 3, 300*ms)},
		// T 50 ms, tau 500 ms: 150 ms, the same 3 units served faster.
		{"rate raised to 20/s: the same units, served faster", t0 + 100*ms, ss(10, 20, 1), queue(10, 150*ms, 4, 200*ms)},
		// Stored 200 ms under T 50 ms, capacity 10: 4 units.
		{"capacity lowered to 5: the same 4 units", t0 + 100*ms, ss(5, 20, 0), queue(5, 200*ms, 4, 200*ms)},
		{"lowered capacity rejects what no longer fits", t0 + 100*ms, ss(5, 20, 4),
			Result{Limit: 5, Delay: -1, Queued: 4, Remaining: 1, RetryAfter: 150 * ms, ResetAfter: 200 * ms}},
		// T 200 ms, tau 2 s: 800 ms, the same 4 units served slower.
		{"rate lowered to 5/s: the same units, served slower", t0 + 100*ms, ss(10, 5, 0), queue(10, 800*ms, 4, 800*ms)},
		// The rejected call above stored 200 ms under T 50 ms, capacity 5;
		// the peek stored nothing.
		{"TYPE sees a queue", t0 + 100*ms, keyReq(OpTTL, "q"), Result{Value: 200 * ms, Kind: KindShape}},
		{"RL.ALLOW on it is WRONGTYPE", t0 + 100*ms, scaledBucket(t, "q", 10, 10, 1), Result{Err: ErrWrongType}},
	})
}

// TestPolicyChangeFixed: the count is kept and read under the new limit; a
// new window length starts a new window (the old count is dropped).
func TestPolicyChangeFixed(t *testing.T) {
	e := newEngine(t, 2)
	fx := func(limit, windowMs, cost int64) Request { return windowReq(t, OpFixed, "f", limit, windowMs, cost) }
	runScript(t, e, []scriptRow{
		{"4 of 5 in [t0, t0+1s)", t0, fx(5, 1000, 4), allowed(5, 1, sec)},
		{"limit lowered to 3: denied until the window turns", t0 + 100*ms, fx(3, 1000, 1), denied(3, 0, 900*ms, 900*ms)},
		{"limit raised to 10: 6 left at once", t0 + 100*ms, fx(10, 1000, 1), allowed(10, 5, 900*ms)},
		{"window changed to 2 s: a new window", t0 + 100*ms, fx(10, 2000, 1), allowed(10, 9, 1900*ms)},
		{"back to 1 s: new again", t0 + 200*ms, fx(10, 1000, 0), allowed(10, 10, 0)},
	})
}

// TestPolicyChangeSliding: counts are kept and weighed under the new
// limit; a new window length starts afresh.
func TestPolicyChangeSliding(t *testing.T) {
	e := newEngine(t, 2)
	sw := func(limit, windowMs, cost int64) Request { return windowReq(t, OpSliding, "s", limit, windowMs, cost) }
	runScript(t, e, []scriptRow{
		{"6 of 10", t0 + 500*ms, sw(10, 1000, 6), allowed(10, 4, 1500*ms)},
		// Count 6 > 5. Allowed in the next window once ceil(6*left/1s) <= 4:
		// left = 666666666 ns, at t0 + 2 s - left.
		{"limit lowered to 5: denied", t0 + 600*ms, sw(5, 1000, 1), denied(5, 0, 2*sec-666_666_666-600*ms, 1400*ms)},
		{"limit raised to 20", t0 + 600*ms, sw(20, 1000, 1), allowed(20, 13, 1400*ms)},
		// prev 7 weighs ceil(7 * 0.5) = 4.
		{"next window under 5", t0 + 1500*ms, sw(5, 1000, 0), allowed(5, 1, 500*ms)},
		{"window changed to 2 s: afresh", t0 + 1500*ms, sw(5, 2000, 0), allowed(5, 5, 0)},
	})
}

// TestPolicyChangeLog: timestamps are kept and re-read under the new limit
// and window; entries outside the stored window never come back.
func TestPolicyChangeLog(t *testing.T) {
	e := newEngine(t, 2)
	lg := func(limit, windowMs, cost int64) Request { return windowReq(t, OpLog, "l", limit, windowMs, cost) }
	runScript(t, e, []scriptRow{
		{"2 at t0", t0, lg(5, 1000, 2), allowed(5, 3, sec)},
		{"2 at t0+500ms", t0 + 500*ms, lg(5, 1000, 2), allowed(5, 1, sec)},
		// 4 entries, limit 3: 2 must leave, the second oldest at t0+1s.
		{"limit lowered to 3", t0 + 600*ms, lg(3, 1000, 1), denied(3, 0, 400*ms, 900*ms)},
		{"limit raised to 10", t0 + 600*ms, lg(10, 1000, 0), allowed(10, 6, 900*ms)},
		// (t0+100ms, t0+900ms]: the 2 at t0 are out.
		{"window shortened to 800 ms", t0 + 900*ms, lg(5, 800, 0), allowed(5, 3, 400*ms)},
		{"charge 3 under 800 ms", t0 + 900*ms, lg(5, 800, 3), allowed(5, 0, 800*ms)},
		// Stored window 800 ms: t0+500ms x2 and t0+900ms x3 are inside.
		{"window lengthened to 2 s", t0 + 1200*ms, lg(5, 2000, 1), denied(5, 0, 1300*ms, 1700*ms)},
		// Every entry left the stored 800 ms window by t0+1.7s: a longer
		// window does not bring them back.
		{"dropped entries stay dropped", t0 + 1750*ms, lg(5, 2000, 0), allowed(5, 5, 0)},
	})
}

// TestRescaleBounds: rescaling carries the units in use exactly, rounds
// up, caps a token bucket at its new tau, and never overflows.
func TestRescaleBounds(t *testing.T) {
	now := t0
	for _, c := range []struct {
		name                  string
		st                    scaledState
		interval, limit, want int64
		queue                 bool
	}{
		{"same parameters", scaledState{now + 5, 1, 10}, 1, 10, now + 5, false},
		{"empty state", scaledState{now - 5, 1, 10}, 7, 3, now - 5, false},
		{"capacity raised: debt kept", scaledState{now + 300*ms, 100 * ms, 10}, 100 * ms, 20, now + 300*ms, false},
		{"capacity lowered: capped at the new tau", scaledState{now + 1200*ms, 100 * ms, 20}, 100 * ms, 5, now + 500*ms, false},
		{"queue: never capped", scaledState{now + 1200*ms, 100 * ms, 20}, 50 * ms, 5, now + 600*ms, true},
		{"rate: the half token carried", scaledState{now + 225*ms, 50 * ms, 10}, 250 * ms, 10, now + 1125*ms, false},
		{"rounds up", scaledState{now + 1, 3, 1}, 1, 1, now + 1, false},
		{"a key in debt never reads full", scaledState{now + 1, MaxDuration / 10, 10}, 1, 10, now + 1, false},
		{"largest tau both ways", scaledState{now + MaxDuration, 1, MaxDuration}, MaxDuration, 1, now + MaxDuration, false},
		{"debt above its tau is capped", scaledState{now + MaxDuration, 1, 1}, 1, MaxDuration, now + MaxDuration, false},
		{"overflowing product is capped", scaledState{now + MaxDuration, 1, MaxDuration}, 2, 3, now + 6, false},
		{"overflowing queue is clamped", scaledState{now + MaxDuration, 1, 1}, 2, 3, now + MaxDuration, true},
		{"tiny new interval", scaledState{now + MaxDuration, MaxDuration, 1}, 1, 1, now + 1, false},
	} {
		if got := rescale(now, &c.st, c.interval, c.limit, c.queue); got != c.want {
			t.Errorf("%s: rescale = now%+d, want now%+d", c.name, got-now, c.want-now)
		}
	}
}

// TestScaledRecords: scaled states export with their parameters, import
// back as scaled, and count under their visible kinds.
func TestScaledRecords(t *testing.T) {
	ctx := context.Background()
	e := newEngine(t, 3)
	do1(t, e, t0, scaledBucket(t, "g", 10, 10, 4))
	do1(t, e, t0, scaledShape(t, "h", 10, 10, 2))
	do1(t, e, t0, bucket(t, "plain", 10, 10, 1))
	var recs []Record
	if _, err := e.Export(ctx, t0, func(r Record) error { recs = append(recs, r); return nil }); err != nil {
		t.Fatal(err)
	}
	want := map[string]Record{
		"g":     {Key: "g", Kind: KindGCRA, Fields: []int64{t0 + 400*ms, 100 * ms, 10}},
		"h":     {Key: "h", Kind: KindShape, Fields: []int64{t0 + 200*ms, 100 * ms, 10}},
		"plain": {Key: "plain", Kind: KindGCRA, Fields: []int64{t0 + 100*ms}},
	}
	if len(recs) != len(want) {
		t.Fatalf("exported %v", recs)
	}
	for _, r := range recs {
		if w := want[r.Key]; fmt.Sprint(r) != fmt.Sprint(w) {
			t.Errorf("record %v, want %v", r, w)
		}
	}
	kinds, err := e.CountKinds(ctx, t0)
	if err != nil || kinds[KindGCRA] != 2 || kinds[KindShape] != 1 {
		t.Errorf("CountKinds = %v, %v", kinds, err)
	}
	f := newEngine(t, 1)
	if err := f.Import(ctx, t0, recs); err != nil {
		t.Fatal(err)
	}
	if k := storedKind(t, f, "g"); k != kindGCRAScaled {
		t.Errorf("imported g has slot kind %d", k)
	}
	if k := storedKind(t, f, "h"); k != kindShapeScaled {
		t.Errorf("imported h has slot kind %d", k)
	}
	// The parameters came along: 4 tokens at 20/s are 200 ms.
	if got := do1(t, f, t0, bucket(t, "g", 10, 20, 0)); got != allowed(10, 6, 200*ms) {
		t.Errorf("after import: %+v", got)
	}
	for _, bad := range [][]int64{
		{t0, 0, 10}, {t0, 1, 0}, {t0, MaxDuration, 2}, {t0, 1}, {t0, 1, 1, 1},
	} {
		if err := f.Import(ctx, t0, []Record{{Key: "x", Kind: KindGCRA, Fields: bad}}); err == nil {
			t.Errorf("Import accepted GCRA fields %v", bad)
		}
	}
}
