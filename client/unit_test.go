package client

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value reads a counter or gauge.
func value(t testing.TB, c prometheus.Metric) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// fakeClock is a clock the test moves by hand.
type fakeClock struct{ t time.Time }

func (f *fakeClock) now() time.Time      { return f.t }
func (f *fakeClock) add(d time.Duration) { f.t = f.t.Add(d) }
func newFakeClock() *fakeClock           { return &fakeClock{t: time.Unix(1_700_000_000, 0)} }

func TestBackstopGCRA(t *testing.T) {
	const sec = int64(time.Second)
	t0 := int64(1000 * sec)
	p := TokenBucket(2, 1) // T = 1 s, tau = 2 s
	type step struct {
		at       int64
		cost     int64
		allowed  bool
		rem      int64
		retry    time.Duration
		reset    time.Duration
		keysHeld int
	}
	steps := []step{
		{t0, 1, true, 1, 0, time.Second, 1},
		{t0, 1, true, 0, 0, 2 * time.Second, 1},
		{t0, 1, false, 0, time.Second, 2 * time.Second, 1},
		{t0 + sec/2, 1, false, 0, time.Second / 2, 3 * time.Second / 2, 1},
		{t0 + sec, 1, true, 0, 0, 2 * time.Second, 1},
		{t0 + sec, 3, false, 0, Never, 2 * time.Second, 1}, // above capacity: never
		{t0 + sec, 0, true, 0, 0, 2 * time.Second, 1},      // cost 0 looks
		{t0 + 10*sec, 1, true, 1, 0, time.Second, 1},       // refilled, capped at capacity
		{t0 + 20*sec, 0, true, 2, 0, 0, 0},                 // full again: dropped when seen... only when stored
	}
	b := newBackstop(BackstopOptions{})
	for i, s := range steps {
		d := b.decide(s.at, []localTier{{key: "k", policy: p}}, s.cost, true)
		if d.Allowed != s.allowed || d.Remaining != s.rem || d.RetryAfter != s.retry || d.ResetAfter != s.reset || d.Limit != 2 || d.Source != FromBackstop {
			t.Errorf("step %d: %+v, want allowed %v remaining %d retry %v reset %v", i, d, s.allowed, s.rem, s.retry, s.reset)
		}
	}
}

func TestBackstopLRUBound(t *testing.T) {
	b := newBackstop(BackstopOptions{MaxKeys: 2})
	p := TokenBucket(1, 0.001)
	take := func(key string) bool {
		return b.decide(0, []localTier{{key: key, policy: p}}, 1, true).Allowed
	}
	for _, k := range []string{"a", "b", "c"} {
		if !take(k) {
			t.Fatalf("first call on %s denied", k)
		}
	}
	if b.len() != 2 {
		t.Fatalf("%d keys held, want 2", b.len())
	}
	if take("c") || take("b") {
		t.Errorf("the two most recent keys should still be empty")
	}
	if !take("a") {
		t.Errorf("the least recently used key should have been dropped (full again)")
	}
}

func TestBackstopTiersAllOrNothing(t *testing.T) {
	b := newBackstop(BackstopOptions{})
	wide, narrow := TokenBucket(10, 0.001), TokenBucket(1, 0.001)
	tiers := []localTier{{key: "ip", policy: wide}, {key: "login", policy: narrow}}
	d := b.decide(0, tiers, 1, true)
	if !d.Allowed || d.Tier != 2 || d.Remaining != 0 {
		t.Fatalf("first: %+v, want allowed, tier 2 (fewest remaining) with 0 left", d)
	}
	d = b.decide(0, tiers, 1, true)
	if d.Allowed || d.Tier != 2 || d.Tiers[0].Remaining != 9 {
		t.Fatalf("second: %+v, want denied by tier 2, tier 1 at 9 remaining", d)
	}
	// Tier 1 was not charged by the denied call.
	if d := b.decide(0, tiers[:1], 0, false); d.Remaining != 9 {
		t.Errorf("tier 1 remaining %d after a denied check, want 9", d.Remaining)
	}
}

func TestBackstopScale(t *testing.T) {
	p := TokenBucket(10, 2)
	if c, i := p.local(0.5); c != 5 || i != int64(time.Second) {
		t.Errorf("scaled bucket %d per %d ns, want 5 per 1e9", c, i)
	}
	if c, i := Cell(4, 10, time.Minute).local(1); c != 5 || i != int64(6*time.Second) {
		t.Errorf("cell bucket %d per %d ns, want 5 per 6e9", c, i)
	}
	if c, i := FixedWindow(100, time.Minute).local(1); c != 100 || i != int64(600*time.Millisecond) {
		t.Errorf("window bucket %d per %d ns, want 100 per 6e8", c, i)
	}
}

func TestBreakerStates(t *testing.T) {
	clock := newFakeClock()
	var changes []string
	b := newBreaker(BreakerOptions{Failures: 3, Cooldown: time.Second}, clock.now, func(from, to int) {
		changes = append(changes, fmt.Sprintf("%d>%d", from, to))
	})
	call := func(outcome int) bool {
		ok, probe := b.allow()
		if ok {
			b.done(outcome, probe)
		}
		return ok
	}
	for i := range 3 {
		if !call(callFailed) {
			t.Fatalf("call %d refused while closed", i)
		}
	}
	if b.state.Load() != breakerOpen || call(callOK) {
		t.Fatalf("after 3 failures: state %d, want open and refusing", b.state.Load())
	}
	clock.add(999 * time.Millisecond)
	if call(callOK) {
		t.Fatal("let a call through before the cool-down ended")
	}
	clock.add(time.Millisecond)
	ok, probe := b.allow()
	if !ok || !probe || b.state.Load() != breakerHalfOpen {
		t.Fatalf("after the cool-down: ok %v probe %v state %d, want a probe, half-open", ok, probe, b.state.Load())
	}
	if ok2, _ := b.allow(); ok2 {
		t.Fatal("a second call went through while the probe is in flight")
	}
	b.done(callFailed, true)
	if b.state.Load() != breakerOpen {
		t.Fatalf("failed probe: state %d, want open", b.state.Load())
	}
	clock.add(time.Second)
	ok, probe = b.allow()
	b.done(callNeutral, probe) // the caller gave up: another probe may go
	if ok2, probe2 := b.allow(); !ok || !ok2 || !probe2 {
		t.Fatal("a neutral probe did not release the half-open slot")
	} else {
		b.done(callOK, probe2)
	}
	if b.state.Load() != breakerClosed {
		t.Fatalf("successful probe: state %d, want closed", b.state.Load())
	}
	// Failures interleaved with successes never open it.
	for range 10 {
		call(callFailed)
		call(callFailed)
		call(callOK)
	}
	if b.state.Load() != breakerClosed {
		t.Fatal("opened on failures that were not consecutive")
	}
	want := "[0>2 2>1 1>2 2>1 1>0]"
	if got := fmt.Sprint(changes); got != want {
		t.Errorf("transitions %s, want %s", got, want)
	}
}

func TestBreakerOff(t *testing.T) {
	b := newBreaker(BreakerOptions{Failures: -1}, time.Now, nil)
	for range 100 {
		ok, probe := b.allow()
		if !ok {
			t.Fatal("a disabled breaker refused a call")
		}
		b.done(callFailed, probe)
	}
}

func TestParseReplies(t *testing.T) {
	d, err := parseDecision(Cell(2, 1, time.Minute), 1, []any{int64(1), int64(3), int64(0), int64(60), int64(180)})
	if err != nil || d.Allowed || d.Limit != 3 || d.RetryAfter != time.Minute || d.ResetAfter != 3*time.Minute {
		t.Errorf("throttle denied: %+v %v", d, err)
	}
	d, _ = parseDecision(Cell(2, 1, time.Minute), 1, []any{int64(0), int64(3), int64(2), int64(-1), int64(60)})
	if !d.Allowed || d.RetryAfter != 0 || d.Remaining != 2 {
		t.Errorf("throttle allowed: %+v", d)
	}
	d, _ = parseDecision(TokenBucket(5, 1), 9, []any{int64(0), int64(5), int64(-1), int64(0)})
	if d.RetryAfter != Never || d.Limit != 5 {
		t.Errorf("never: %+v", d)
	}
	// A shaper with capacity 4 at 1/s (T = 1 s) and 4 queued with 3.5 s
	// to drain: a unit call fits when 3 are queued, after 0.5 s.
	d, _ = parseDecision(Shaper(4, 1), 1, []any{int64(0), int64(-1), int64(4), int64(3500)})
	if d.Allowed || d.Remaining != 0 || d.RetryAfter != 500*time.Millisecond || d.Delay != 0 {
		t.Errorf("shape rejected: %+v", d)
	}
	d, _ = parseDecision(Shaper(4, 1), 1, []any{int64(1), int64(1500), int64(3), int64(2500)})
	if !d.Allowed || d.Remaining != 1 || d.Delay != 1500*time.Millisecond {
		t.Errorf("shape admitted: %+v", d)
	}
	if _, err := parseDecision(TokenBucket(5, 1), 1, []any{int64(1)}); !errors.Is(err, ErrBadReply) {
		t.Errorf("short reply: %v, want ErrBadReply", err)
	}

	check := []any{int64(0), int64(2),
		[]any{"per-ip", "ip:1", int64(1), int64(100), int64(99), int64(0), int64(600), int64(0)},
		[]any{"login", "u:1", int64(0), int64(5), int64(0), int64(1200), int64(60000), int64(0)},
	}
	d, err = parseCheck(check, 2)
	if err != nil || d.Allowed || d.Tier != 2 || d.RetryAfter != 1200*time.Millisecond || d.Limit != 5 ||
		d.Tiers[0].Policy != "per-ip" || d.Tiers[0].Remaining != 99 || d.Tiers[1].Key != "u:1" {
		t.Errorf("check: %+v %v", d, err)
	}
	if _, err := parseCheck(check, 3); !errors.Is(err, ErrBadReply) {
		t.Errorf("check with a missing tier: %v", err)
	}
}

func TestPolicyValidationAndQuota(t *testing.T) {
	bad := []Policy{
		TokenBucket(0, 1), TokenBucket(1, 0), Shaper(1, -1), Cell(1, 0, time.Second), Cell(1, 1, 1500*time.Millisecond),
		FixedWindow(0, time.Second), SlidingWindow(1, 1500*time.Microsecond), SlidingLog(1, 0), {},
	}
	for _, p := range bad {
		if err := p.validate(); !errors.Is(err, ErrBadPolicy) {
			t.Errorf("%+v: %v, want ErrBadPolicy", p, err)
		}
	}
	quotas := []struct {
		p Policy
		q int64
		w time.Duration
	}{
		{TokenBucket(100, 10), 100, 10 * time.Second},
		{TokenBucket(100, 3), 100, 34 * time.Second}, // 33.3 s rounded up
		{Cell(9, 10, time.Minute), 10, time.Minute},
		{FixedWindow(5, 1500*time.Millisecond), 5, 2 * time.Second},
		{SlidingLog(5, time.Hour), 5, time.Hour},
	}
	for _, c := range quotas {
		if q, w := c.p.Quota(); q != c.q || w != c.w {
			t.Errorf("%+v: quota %d per %v, want %d per %v", c.p, q, w, c.q, c.w)
		}
	}
}

func TestTransientReplies(t *testing.T) {
	for msg, want := range map[string]bool{
		"CLUSTERDOWN no leader is known":                          true,
		"TRYAGAIN the command was not":                            true,
		"LOADING server is loading":                               true,
		"UNKNOWN outcome unknown: the":                            true,
		"ERR server is shutting down":                             true,
		"WRONGTYPE Operation against":                             false,
		"ERR value is not an integer":                             false,
		"NOAUTH Authentication required.":                         false,
		"ERR unknown policy 'x'":                                  false,
		"ERR max number of clients reached":                       true,
		"OOM command not allowed when used memory > 'maxmemory'.": true,
	} {
		if transient(msg) != want {
			t.Errorf("transient(%q) = %v", msg, !want)
		}
	}
	if retryElsewhere("UNKNOWN outcome unknown") || !retryElsewhere("CLUSTERDOWN x") {
		t.Error("retryElsewhere: UNKNOWN may have been applied, CLUSTERDOWN was not")
	}
	if retryElsewhere("OOM command not allowed when used memory > 'maxmemory'.") {
		t.Error("retryElsewhere: OOM is every node's state")
	}
}
