package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/client/internal/rltest"
)

// serverBin is the rlserver binary built by TestMain.
var serverBin string

func TestMain(m *testing.M) { rltest.Main(m, &serverBin) }

// slow is a rate that refills nothing during a test (one token per
// 1000 s); slack bounds how far countdowns move while a test runs.
const (
	slow  = 0.001
	token = 1000 * time.Second
	slack = 60 * time.Second
)

// newClient returns a client with its own registry and no logs, closed
// at cleanup.
func newClient(t testing.TB, o Options) *Client {
	t.Helper()
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// deadAddr is a loopback address nothing listens on.
func deadAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// within checks a countdown that was want when written and may have
// shrunk by slack since.
func within(got, want time.Duration) bool { return got <= want && got > want-slack }

func TestAllowPeekAgainstServer(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second})
	ctx := context.Background()
	for i := int64(1); i <= 3; i++ {
		d, err := c.Allow(ctx, "user:1", 3, slow)
		if err != nil || !d.Allowed || d.Remaining != 3-i || d.Limit != 3 || d.RetryAfter != 0 ||
			!within(d.ResetAfter, time.Duration(i)*token) || d.Source != FromServer || d.Err != nil {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
	}
	d, err := c.Allow(ctx, "user:1", 3, slow)
	if err != nil || d.Allowed || d.Remaining != 0 || !within(d.RetryAfter, token) || !within(d.ResetAfter, 3*token) {
		t.Fatalf("fourth call: %+v %v, want denied with about %v to wait", d, err, token)
	}
	d, err = c.Peek(ctx, "user:1", 3, slow)
	if err != nil || d.Allowed || d.Remaining != 0 {
		t.Errorf("peek: %+v %v", d, err)
	}
	d, err = c.Peek(ctx, "user:2", 3, slow)
	if err != nil || !d.Allowed || d.Remaining != 2 {
		t.Errorf("peek on a fresh key: %+v %v", d, err)
	}
	if d, _ := c.Peek(ctx, "user:2", 3, slow); d.Remaining != 2 {
		t.Errorf("peek took a token: %+v", d)
	}
	d, err = c.Allow(ctx, "user:3", 3, slow, WithCost(4))
	if err != nil || d.Allowed || d.RetryAfter != Never {
		t.Errorf("cost above capacity: %+v %v, want never", d, err)
	}
	if n, err := c.Reset(ctx, "user:1", "user:2", "user:3"); err != nil || n != 1 {
		t.Errorf("reset: %d %v, want 1 key removed", n, err)
	}
	if d, _ := c.Allow(ctx, "user:1", 3, slow); d.Remaining != 2 {
		t.Errorf("after reset: %+v", d)
	}
}

func TestAlgorithmsAgainstServer(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second})
	ctx := context.Background()

	d, err := c.Throttle(ctx, "cell", 1, 1, 1000*time.Second)
	if err != nil || !d.Allowed || d.Limit != 2 || d.Remaining != 1 || d.RetryAfter != 0 || !within(d.ResetAfter, token) {
		t.Errorf("throttle 1: %+v %v", d, err)
	}
	c.Throttle(ctx, "cell", 1, 1, 1000*time.Second)
	d, err = c.Throttle(ctx, "cell", 1, 1, 1000*time.Second)
	if err != nil || d.Allowed || d.Remaining != 0 || !within(d.RetryAfter, token) {
		t.Errorf("throttle 3: %+v %v", d, err)
	}

	for name, f := range map[string]func(context.Context, string, int64, time.Duration, ...CallOption) (Decision, error){
		"fixed": c.Fixed, "sliding": c.Sliding, "log": c.Log,
	} {
		for i := int64(1); i <= 2; i++ {
			d, err := f(ctx, name, 2, 24*time.Hour)
			if err != nil || !d.Allowed || d.Limit != 2 || d.Remaining != 2-i || d.RetryAfter != 0 {
				t.Errorf("%s %d: %+v %v", name, i, d, err)
			}
		}
		// A fixed window and a log free a unit within the window; the
		// sliding counter weighs the full window it leaves behind, and
		// with a limit of 2 allows again half-way into the next one: up
		// to 1.5 windows (36 h early in a UTC day, which this test once
		// met).
		most := 24 * time.Hour
		if name == "sliding" {
			most = 36 * time.Hour
		}
		d, err := f(ctx, name, 2, 24*time.Hour)
		if err != nil || d.Allowed || d.RetryAfter <= 0 || d.RetryAfter > most {
			t.Errorf("%s 3: %+v %v", name, d, err)
		}
	}

	d, err = c.Shape(ctx, "queue", 2, slow)
	if err != nil || !d.Allowed || d.Delay != 0 || d.Remaining != 1 {
		t.Errorf("shape 1: %+v %v", d, err)
	}
	d, err = c.Shape(ctx, "queue", 2, slow)
	if err != nil || !d.Allowed || !within(d.Delay, token) || d.Remaining != 0 {
		t.Errorf("shape 2: %+v %v, want a delay of about %v", d, err, token)
	}
	d, err = c.Shape(ctx, "queue", 2, slow)
	if err != nil || d.Allowed || !within(d.RetryAfter, token) {
		t.Errorf("shape 3: %+v %v, want rejected, retry in about %v", d, err, token)
	}
}

// An error reply is the caller's bug: it is returned, never turned into a
// fail-open decision, and does not count against the server.
func TestCommandErrorIsReturnedNotFailedOpen(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second, Breaker: BreakerOptions{Failures: 2},
		Backstop: &BackstopOptions{}})
	ctx := context.Background()
	if _, err := c.Fixed(ctx, "k", 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		d, err := c.Allow(ctx, "k", 5, 1)
		if !errors.Is(err, ErrCommand) || !strings.Contains(err.Error(), "WRONGTYPE") || d.Allowed {
			t.Fatalf("token bucket on a fixed-window key: %+v %v, want a WRONGTYPE error", d, err)
		}
	}
	// An argument the server refuses (a refill period over 2^60 ns).
	if _, err := c.Allow(ctx, "k2", 1<<40, 1e-9); !errors.Is(err, ErrCommand) {
		t.Errorf("out-of-range policy: %v, want ErrCommand", err)
	}
	if _, err := c.Allow(ctx, "k", 0, 1); !errors.Is(err, ErrBadPolicy) {
		t.Errorf("capacity 0: %v, want ErrBadPolicy", err)
	}
	if got := value(t, c.m.errCommand); got != 6 {
		t.Errorf("command errors counted %v, want 6", got)
	}
	if value(t, c.m.failOpen)+value(t, c.m.backstopAllowed) != 0 || c.breaker.state.Load() != breakerClosed {
		t.Error("an error reply was treated as a failure")
	}
}

func TestFailoverToNextNode(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, Options{Addrs: []string{deadAddr(t), s.Addr}, Timeout: 5 * time.Second})
	ctx := context.Background()
	for i := range 3 {
		d, err := c.Allow(ctx, "k", 10, slow)
		if err != nil || d.Source != FromServer || d.Remaining != int64(9-i) {
			t.Fatalf("call %d: %+v %v", i, d, err)
		}
	}
	if c.cur.Load() != 1 {
		t.Errorf("the client did not stay on the node that answered")
	}
}

// The server is killed with SIGKILL mid-test: fail-open calls are answered
// at once by the backstop, which limits per instance; fail-closed calls
// are denied; when the server is back on the same port, it decides again.
func TestKillFailOpenBackstopRestart(t *testing.T) {
	s := rltest.Start(t, serverBin)
	const timeout = 50 * time.Millisecond
	clock := newFakeClock()
	c := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: timeout, Backstop: &BackstopOptions{MaxKeys: 100},
		Breaker: BreakerOptions{Failures: 3, Cooldown: time.Second}, clock: clock.now})
	bare := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: timeout, Breaker: BreakerOptions{Failures: -1}})
	ctx := context.Background()
	if d, err := c.Allow(ctx, "api:1", 3, slow); err != nil || d.Source != FromServer {
		t.Fatalf("before the kill: %+v %v", d, err)
	}
	bare.Allow(ctx, "api:1", 3, slow)

	s.Kill()
	for i := range 4 {
		start := time.Now()
		d, err := c.Allow(ctx, "api:1", 3, slow)
		if took := time.Since(start); took > timeout+100*time.Millisecond {
			t.Errorf("call %d took %v with the server down", i, took)
		}
		if err != nil || d.Source != FromBackstop || !errors.Is(d.Err, ErrUnavailable) {
			t.Fatalf("call %d: %+v %v, want a backstop decision", i, d, err)
		}
		if want := i < 3; d.Allowed != want || d.Limit != 3 {
			t.Errorf("call %d: allowed %v (limit %d), want %v: the backstop holds 3", i, d.Allowed, d.Limit, want)
		}
	}
	if c.breaker.state.Load() != breakerOpen || value(t, c.m.breakerState) != breakerOpen {
		t.Errorf("breaker not open after 4 failures")
	}
	if value(t, c.m.backstopAllowed) != 3 || value(t, c.m.backstopDenied) != 1 || value(t, c.m.breakerSkips) != 1 {
		t.Errorf("backstop allowed %v denied %v, breaker skips %v; want 3, 1, 1",
			value(t, c.m.backstopAllowed), value(t, c.m.backstopDenied), value(t, c.m.breakerSkips))
	}
	d, err := c.Allow(ctx, "login:1", 3, slow, WithFailure(FailClosed))
	if err != nil || d.Allowed || d.Source != FromFailClosed || !errors.Is(d.Err, ErrBreakerOpen) || d.RetryAfter != time.Second {
		t.Errorf("fail closed: %+v %v", d, err)
	}
	d, err = bare.Allow(ctx, "api:1", 3, slow)
	if err != nil || !d.Allowed || d.Source != FromFailOpen || value(t, bare.m.failOpen) != 1 || value(t, bare.m.errNetwork) != 1 {
		t.Errorf("fail open without a backstop: %+v %v", d, err)
	}

	s.Restart()
	// Until the cool-down ends the breaker keeps calls off the server,
	// even though it is back.
	skips := value(t, c.m.breakerSkips)
	if d, _ := c.Allow(ctx, "api:1", 3, slow); d.Source != FromBackstop || !errors.Is(d.Err, ErrBreakerOpen) || value(t, c.m.breakerSkips) != skips+1 {
		t.Errorf("during the cool-down: %+v", d)
	}
	// Then it lets a probe through (half-open); go-redis may still hand
	// the probe a connection that died with the old process, so poll.
	deadline := time.Now().Add(15 * time.Second)
	for {
		clock.add(time.Second)
		d, err = c.Allow(ctx, "api:1", 3, slow)
		if err == nil && d.Source == FromServer {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server decision after the restart: %+v %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The restarted server loaded nothing (saves are off), so the key
	// starts full again there.
	if !d.Allowed || d.Remaining != 2 || c.breaker.state.Load() != breakerClosed {
		t.Errorf("after the restart: %+v, breaker %d", d, c.breaker.state.Load())
	}
}

// A frozen server (SIGSTOP) accepts connections and never answers: every
// call ends at its timeout and takes its failure mode.
func TestHungServerTimesOut(t *testing.T) {
	s := rltest.Start(t, serverBin)
	const timeout = 50 * time.Millisecond
	c := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: timeout, Breaker: BreakerOptions{Failures: -1}})
	ctx := context.Background()
	if _, err := c.Allow(ctx, "k", 3, slow); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	defer s.Cont()
	for i := range 5 {
		start := time.Now()
		d, err := c.Allow(ctx, "k", 3, slow)
		took := time.Since(start)
		if took < timeout || took > timeout+100*time.Millisecond {
			t.Errorf("call %d took %v, want the timeout %v plus a little", i, took, timeout)
		}
		if err != nil || d.Source != FromFailOpen || !errors.Is(d.Err, ErrTimeout) {
			t.Errorf("call %d: %+v %v, want fail-open after a timeout", i, d, err)
		}
	}
	if got := value(t, c.m.timeouts); got != 5 {
		t.Errorf("timeouts counted %v, want 5", got)
	}
	// The caller's own deadline is not the server's failure.
	short, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := c.Allow(short, "k", 3, slow); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled context: %v", err)
	}
	s.Cont()
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := c.Allow(ctx, "k", 3, slow)
		if err == nil && d.Source == FromServer {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no server decision after SIGCONT: %+v %v", d, err)
		}
	}
}

// latency measures calls while the server is down and returns p50, p99.
func latency(t *testing.T, c *Client, n int) (p50, p99 time.Duration) {
	ctx := context.Background()
	took := make([]time.Duration, n)
	for i := range took {
		start := time.Now()
		if _, err := c.Allow(ctx, fmt.Sprintf("k%d", i%50), 100, 1); err != nil {
			t.Fatal(err)
		}
		took[i] = time.Since(start)
	}
	slices.Sort(took)
	return took[n/2], took[n*99/100]
}

// TestLatencyWhileDown measures what a caller waits per decision while
// the server is down: killed (connections refused at once) and frozen
// (every call runs into its timeout), with and without the breaker.
func TestLatencyWhileDown(t *testing.T) {
	const timeout = 50 * time.Millisecond
	for _, tc := range []struct {
		name    string
		freeze  bool
		breaker BreakerOptions
		n       int
	}{
		{"killed/no-breaker", false, BreakerOptions{Failures: -1}, 2000},
		{"killed/breaker", false, BreakerOptions{}, 2000},
		{"frozen/no-breaker", true, BreakerOptions{Failures: -1}, 40},
		{"frozen/breaker", true, BreakerOptions{Cooldown: time.Minute}, 2000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := rltest.Start(t, serverBin)
			c := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: timeout, Breaker: tc.breaker, Backstop: &BackstopOptions{}})
			if _, err := c.Allow(context.Background(), "k0", 100, 1); err != nil {
				t.Fatal(err)
			}
			if tc.freeze {
				s.Stop()
				defer s.Cont()
			} else {
				s.Kill()
			}
			p50, p99 := latency(t, c, tc.n)
			t.Logf("%s: %d calls, p50 %v, p99 %v (timeout %v)", tc.name, tc.n, p50, p99, timeout)
			if p99 > timeout+100*time.Millisecond {
				t.Errorf("p99 %v above the timeout plus 100 ms", p99)
			}
		})
	}
}

// Check defines the policies it knows when the server does not, charges
// all tiers or none, and falls back to the backstop over the tiers whose
// policies it knows.
func TestCheckTiers(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second, Backstop: &BackstopOptions{}})
	ctx := context.Background()
	if err := c.RegisterPolicy("per-ip", TokenBucket(10, slow)); err != nil {
		t.Fatal(err)
	}
	if err := c.DefinePolicy(ctx, "per-user", FixedWindow(2, time.Hour)); err != nil {
		t.Fatal(err)
	}
	tiers := []Tier{{"per-ip", "ip:1"}, {"per-user", "user:1"}}
	for i := int64(1); i <= 2; i++ {
		d, err := c.Check(ctx, tiers)
		if err != nil || !d.Allowed || d.Tier != 2 || d.Remaining != 2-i || d.Limit != 2 || len(d.Tiers) != 2 ||
			d.Tiers[0] != (TierDecision{Policy: "per-ip", Key: "ip:1", Allowed: true, Limit: 10, Remaining: 10 - i, ResetAfter: d.Tiers[0].ResetAfter}) {
			t.Fatalf("check %d: %+v %v", i, d, err)
		}
	}
	d, err := c.Check(ctx, tiers)
	if err != nil || d.Allowed || d.Tier != 2 || d.RetryAfter <= 0 {
		t.Fatalf("check 3: %+v %v, want denied by per-user", d, err)
	}
	if d, _ := c.Check(ctx, tiers[:1], WithCost(0)); d.Remaining != 8 {
		t.Errorf("the denied check charged per-ip: %+v", d)
	}
	if _, err := c.Check(ctx, []Tier{{"nobody-defined-it", "k"}}); !errors.Is(err, ErrCommand) || !strings.Contains(err.Error(), "unknown policy 'nobody-defined-it'") {
		t.Errorf("unknown policy: %v", err)
	}
	if got := value(t, c.m.errCommand); got != 1 {
		t.Errorf("command errors %v, want 1 (the per-ip definition on the fly is not one)", got)
	}

	s.Kill()
	tiers = append(tiers, Tier{"unknown-here", "k"})
	d, err = c.Check(ctx, tiers)
	if err != nil || d.Source != FromBackstop || !d.Allowed || d.Tier != 2 || len(d.Tiers) != 3 ||
		d.Tiers[1].Remaining != 1 || d.Tiers[2] != (TierDecision{Policy: "unknown-here", Key: "k", Allowed: true}) {
		t.Errorf("backstop check: %+v %v", d, err)
	}
	d, err = c.Check(ctx, tiers, WithFailure(FailClosed))
	if err != nil || d.Allowed || d.Source != FromFailClosed {
		t.Errorf("fail-closed check: %+v %v", d, err)
	}
}
