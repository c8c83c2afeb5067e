package httplimit

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/client"
	"github.com/rlserver/rlserver/client/internal/rltest"
)

var serverBin string

func TestMain(m *testing.M) { rltest.Main(m, &serverBin) }

const (
	slow  = 0.001 // one token per 1000 s: nothing refills during a test
	slack = 60    // seconds a countdown may move while a test runs
)

var discard = slog.New(slog.NewTextHandler(io.Discard, nil))

func newClient(t testing.TB, o client.Options) *client.Client {
	t.Helper()
	o.Registerer = prometheus.NewRegistry()
	o.Logger = discard
	c, err := client.New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// request serves one request from remote through h.
func request(h http.Handler, method, path, remote string, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Add(header[i], header[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// recorder is a handler that keeps the decisions it was called with.
type recorder struct {
	mu        sync.Mutex
	decisions []client.Decision
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	d, _ := DecisionFrom(r.Context())
	rec.mu.Lock()
	rec.decisions = append(rec.decisions, d)
	rec.mu.Unlock()
	io.WriteString(w, "ok")
}

func (rec *recorder) last() client.Decision {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	return rec.decisions[len(rec.decisions)-1]
}

// wantHeaders checks every rate-limit header exactly.
func wantHeaders(t *testing.T, w *httptest.ResponseRecorder, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := w.Header().Get(k); got != v {
			t.Errorf("%s: %q, want %q", k, got, v)
		}
		if v == "" && len(w.Header().Values(k)) > 0 {
			t.Errorf("%s present: %q", k, w.Header().Values(k))
		}
	}
}

// Headers are exact at the boundaries: full, one left, none left, denied.
func TestHeadersExactAtTheBoundaries(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, client.Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second})
	var rejected client.Decision
	m := New(Options{Client: c, OnReject: func(w http.ResponseWriter, r *http.Request, d client.Decision) {
		rejected = d
		Reject(w, r, d)
	}})
	m.Default(Rule{Limits: []Limit{{Name: "api", Policy: client.TokenBucket(3, slow)}}})
	rec := &recorder{}
	h := m.Handler(rec)
	for i := int64(1); i <= 3; i++ {
		w := request(h, "GET", "/items", "192.0.2.1:1000")
		if w.Code != 200 {
			t.Fatalf("request %d: %d", i, w.Code)
		}
		d := rec.last()
		reset := seconds(d.ResetAfter)
		if d.Remaining != 3-i || reset > i*1000 || reset < i*1000-slack {
			t.Fatalf("request %d: decision %+v", i, d)
		}
		wantHeaders(t, w, map[string]string{
			"RateLimit-Policy":      `"api";q=3;w=3000`,
			"RateLimit":             fmt.Sprintf(`"api";r=%d;t=%d`, 3-i, reset),
			"X-RateLimit-Limit":     "3",
			"X-RateLimit-Remaining": strconv.FormatInt(3-i, 10),
			"X-RateLimit-Reset":     strconv.FormatInt(reset, 10),
			"Retry-After":           "",
		})
	}
	w := request(h, "GET", "/items", "192.0.2.1:1000")
	if w.Code != http.StatusTooManyRequests || w.Body.String() != "rate limit exceeded\n" {
		t.Fatalf("request 4: %d %q, want 429", w.Code, w.Body)
	}
	retry := seconds(rejected.RetryAfter)
	if rejected.Allowed || retry > 1000 || retry < 1000-slack {
		t.Fatalf("request 4: decision %+v", rejected)
	}
	wantHeaders(t, w, map[string]string{
		"Retry-After":           strconv.FormatInt(retry, 10),
		"RateLimit-Policy":      `"api";q=3;w=3000`,
		"RateLimit":             fmt.Sprintf(`"api";r=0;t=%d`, retry),
		"X-RateLimit-Limit":     "3",
		"X-RateLimit-Remaining": "0",
		"X-RateLimit-Reset":     strconv.FormatInt(retry, 10),
	})
	if len(rec.decisions) != 3 {
		t.Errorf("the handler ran %d times, want 3", len(rec.decisions))
	}
	// Another client address has its own bucket.
	if w := request(h, "GET", "/items", "192.0.2.2:1000"); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("another address: %d %q", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
}

// The header values for decisions at rounding boundaries, and the
// switches.
func TestHeaderValues(t *testing.T) {
	c := newClient(t, client.Options{Addrs: []string{"127.0.0.1:1"}})
	cases := []struct {
		d                 client.Decision
		rateLimit, legacy string
		retryAfter        string
	}{
		{client.Decision{Allowed: true, Remaining: 10, ResetAfter: 0}, `"p";r=10;t=0`, "10 0", ""},
		{client.Decision{Allowed: true, Remaining: 9, ResetAfter: 1}, `"p";r=9;t=1`, "9 1", ""},
		{client.Decision{Allowed: true, Remaining: 9, ResetAfter: time.Second}, `"p";r=9;t=1`, "9 1", ""},
		{client.Decision{Allowed: true, Remaining: 0, ResetAfter: time.Second + 1}, `"p";r=0;t=2`, "0 2", ""},
		{client.Decision{Remaining: 0, RetryAfter: time.Millisecond, ResetAfter: 10 * time.Second}, `"p";r=0;t=1`, "0 1", "1"},
		{client.Decision{Remaining: 0, RetryAfter: 1999 * time.Millisecond, ResetAfter: 10 * time.Second}, `"p";r=0;t=2`, "0 2", "2"},
		{client.Decision{Remaining: 3, RetryAfter: client.Never, ResetAfter: 2500 * time.Millisecond}, `"p";r=3;t=3`, "3 3", ""},
	}
	for i, tc := range cases {
		for _, mode := range []string{"all", "no-draft", "no-legacy", "no-retry"} {
			m := New(Options{Client: c, NoDraftHeaders: mode == "no-draft", NoLegacyHeaders: mode == "no-legacy", NoRetryAfter: mode == "no-retry"})
			m.Default(Rule{Limits: []Limit{{Name: "p", Policy: client.FixedWindow(10, time.Minute)}}})
			w := httptest.NewRecorder()
			l := &m.def.limits[0]
			m.setHeaders(w.Header(), []*limit{l}, tc.d)
			if !tc.d.Allowed && tc.d.RetryAfter != client.Never && !m.o.NoRetryAfter {
				w.Header().Set("Retry-After", strconv.FormatInt(max(seconds(tc.d.RetryAfter), 1), 10))
			}
			want := map[string]string{"RateLimit-Policy": `"p";q=10;w=60`, "RateLimit": tc.rateLimit, "X-RateLimit-Limit": "10",
				"X-RateLimit-Remaining": strings.Fields(tc.legacy)[0], "X-RateLimit-Reset": strings.Fields(tc.legacy)[1], "Retry-After": tc.retryAfter}
			switch mode {
			case "no-draft":
				want["RateLimit-Policy"], want["RateLimit"] = "", ""
			case "no-legacy":
				want["X-RateLimit-Limit"], want["X-RateLimit-Remaining"], want["X-RateLimit-Reset"] = "", "", ""
			case "no-retry":
				want["Retry-After"] = ""
			}
			t.Run(fmt.Sprintf("%d/%s", i, mode), func(t *testing.T) { wantHeaders(t, w, want) })
		}
	}
}

// A spoofed X-Forwarded-For from an untrusted peer is ignored; from a
// trusted proxy it names the client.
func TestSpoofedForwardedForIgnored(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, client.Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second})
	trusted, _ := ParsePrefixes("10.0.0.0/8")
	m := New(Options{Client: c, Key: ClientIP(IPConfig{TrustedProxies: trusted})})
	m.Default(Rule{Limits: []Limit{{Name: "ip", Policy: client.TokenBucket(2, slow)}}})
	h := m.Handler(&recorder{})
	for i := range 4 {
		w := request(h, "GET", "/", "203.0.113.7:5000", "X-Forwarded-For", fmt.Sprintf("198.51.100.%d", i))
		if want := map[bool]int{true: 200, false: 429}[i < 2]; w.Code != want {
			t.Errorf("untrusted peer, request %d with a fresh X-Forwarded-For: %d, want %d", i, w.Code, want)
		}
	}
	// Through the trusted proxy, the forwarded address is the key, and
	// entries the client put to its left change nothing.
	for i := range 3 {
		w := request(h, "GET", "/", "10.1.2.3:5000", "X-Forwarded-For", fmt.Sprintf("6.6.6.%d, 198.51.100.50", i))
		if want := map[bool]int{true: 200, false: 429}[i < 2]; w.Code != want {
			t.Errorf("trusted proxy, request %d: %d, want %d", i, w.Code, want)
		}
	}
	if w := request(h, "GET", "/", "10.1.2.3:5000", "X-Forwarded-For", "198.51.100.51"); w.Code != 200 {
		t.Errorf("another client behind the proxy: %d", w.Code)
	}
}

// Per-route rules, keys from a header and the route, skipped limits, and
// error replies answered with 500.
func TestRoutesAndKeys(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, client.Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second})
	m := New(Options{Client: c})
	m.Default(Rule{Limits: []Limit{{Name: "default", Policy: client.TokenBucket(100, slow)}}})
	m.Route("POST /login", Rule{Limits: []Limit{{Name: "login", Policy: client.SlidingLog(1, time.Hour)}}})
	m.Route("/keyed/", Rule{Limits: []Limit{{Name: "keyed", Policy: client.FixedWindow(1, time.Hour), Key: Header("X-API-Key")}}})
	m.Route("/route/", Rule{Limits: []Limit{{Name: "route", Policy: client.TokenBucket(2, slow), Key: Route()}}})
	m.Route("/heavy", Rule{Limits: []Limit{{Name: "heavy", Policy: client.TokenBucket(10, slow)}},
		Cost: func(*http.Request) int64 { return 4 }})
	h := m.Handler(&recorder{})

	codes := func(method, path, remote string, n int, header ...string) string {
		var out []string
		for range n {
			out = append(out, strconv.Itoa(request(h, method, path, remote, header...).Code))
		}
		return strings.Join(out, " ")
	}
	if got := codes("POST", "/login", "192.0.2.1:1", 2); got != "200 429" {
		t.Errorf("login: %s", got)
	}
	if got := codes("GET", "/login", "192.0.2.1:1", 1); got != "200" {
		t.Errorf("GET /login falls to the default rule: %s", got)
	}
	if got := codes("GET", "/keyed/a", "192.0.2.1:1", 2, "X-API-Key", "k1"); got != "200 429" {
		t.Errorf("keyed k1: %s", got)
	}
	if got := codes("GET", "/keyed/a", "192.0.2.9:1", 1, "X-API-Key", "k2"); got != "200" {
		t.Errorf("keyed k2: %s", got)
	}
	w := request(h, "GET", "/keyed/a", "192.0.2.1:1")
	if w.Code != 200 || w.Header().Get("RateLimit") != "" {
		t.Errorf("no API key: the limit does not apply: %d %v", w.Code, w.Header())
	}
	if got := codes("GET", "/route/x", "192.0.2.1:1", 1) + " " + codes("GET", "/route/y", "192.0.2.2:1", 2); got != "200 200 429" {
		t.Errorf("route key shared by every path and client: %s", got)
	}
	w = request(h, "GET", "/heavy", "192.0.2.1:1")
	if w.Header().Get("X-RateLimit-Remaining") != "6" {
		t.Errorf("cost 4: remaining %q, want 6", w.Header().Get("X-RateLimit-Remaining"))
	}
	// A key holding another kind of state is the operator's bug: 500, not
	// a silent pass.
	if _, err := c.Fixed(context.Background(), "http:default:ip:192.0.2.77", 5, time.Minute); err != nil {
		t.Fatal(err)
	}
	if w := request(h, "GET", "/x", "192.0.2.77:1"); w.Code != 500 {
		t.Errorf("WRONGTYPE: %d, want 500", w.Code)
	}
}

func TestRulePanics(t *testing.T) {
	c := newClient(t, client.Options{Addrs: []string{"127.0.0.1:1"}})
	for name, f := range map[string]func(m *Middleware){
		"bad name":   func(m *Middleware) { m.Default(Rule{Limits: []Limit{{Name: `a"b`, Policy: client.TokenBucket(1, 1)}}}) },
		"no limits":  func(m *Middleware) { m.Default(Rule{}) },
		"bad policy": func(m *Middleware) { m.Default(Rule{Limits: []Limit{{Name: "a", Policy: client.TokenBucket(0, 1)}}}) },
		"name conflict": func(m *Middleware) {
			m.Route("/a", Rule{Limits: []Limit{{Name: "a", Policy: client.TokenBucket(2, 1)}}})
		},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			m := New(Options{Client: c})
			m.Route("/b", Rule{Limits: []Limit{{Name: "a", Policy: client.TokenBucket(1, 1)}}})
			f(m)
		}()
	}
}

// The server is killed mid-test: fail-open routes are answered within the
// timeout plus a margin, and the backstop limits this instance; the
// fail-closed route answers 503; when the server is back on the same port,
// it decides again.
func TestServerKilledAndRestarted(t *testing.T) {
	s := rltest.Start(t, serverBin)
	const timeout = 50 * time.Millisecond
	c := newClient(t, client.Options{Addrs: []string{s.Addr}, Timeout: timeout, Backstop: &client.BackstopOptions{},
		Breaker: client.BreakerOptions{Failures: 3, Cooldown: 200 * time.Millisecond}})
	m := New(Options{Client: c})
	m.Default(Rule{Limits: []Limit{{Name: "api", Policy: client.TokenBucket(3, slow)}}})
	m.Route("POST /login", Rule{Limits: []Limit{{Name: "login", Policy: client.TokenBucket(5, slow).WithFailure(client.FailClosed)}}})
	h := m.Handler(&recorder{})
	if w := request(h, "GET", "/", "192.0.2.1:1"); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "2" {
		t.Fatalf("server up: %d %v", w.Code, w.Header())
	}

	s.Kill()
	for i := range 5 {
		start := time.Now()
		w := request(h, "GET", "/", "192.0.2.1:1")
		if took := time.Since(start); took > timeout+100*time.Millisecond {
			t.Errorf("request %d took %v with the server down", i, took)
		}
		// The backstop starts with a full bucket of 3 for this instance.
		want := map[bool]int{true: 200, false: 429}[i < 3]
		if w.Code != want {
			t.Errorf("request %d: %d, want %d", i, w.Code, want)
		}
		if want := strconv.Itoa(max(2-i, 0)); w.Header().Get("X-RateLimit-Remaining") != want {
			t.Errorf("request %d: remaining %q, want %s from the backstop", i, w.Header().Get("X-RateLimit-Remaining"), want)
		}
	}
	start := time.Now()
	w := request(h, "POST", "/login", "192.0.2.1:1")
	if took := time.Since(start); w.Code != http.StatusServiceUnavailable || took > timeout+100*time.Millisecond {
		t.Errorf("fail-closed login: %d after %v, want 503 at once", w.Code, took)
	}
	if ra, err := strconv.Atoi(w.Header().Get("Retry-After")); err != nil || ra != 1 {
		t.Errorf("503 Retry-After %q, want 1", w.Header().Get("Retry-After"))
	}
	if w.Header().Get("RateLimit") != "" {
		t.Errorf("503 with rate-limit headers: %v", w.Header())
	}

	s.Restart()
	deadline := time.Now().Add(15 * time.Second)
	for {
		w = request(h, "POST", "/login", "192.0.2.1:1")
		if w.Code == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("login still %d after the restart", w.Code)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The restarted server holds nothing for this address (saves are off).
	if w.Header().Get("X-RateLimit-Remaining") != "4" {
		t.Errorf("after the restart: remaining %q, want 4 from the server", w.Header().Get("X-RateLimit-Remaining"))
	}
	if w := request(h, "GET", "/", "192.0.2.1:1"); w.Code != 200 || w.Header().Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("api after the restart: %d, remaining %q, want 2 from the server", w.Code, w.Header().Get("X-RateLimit-Remaining"))
	}
}

// Without a backstop a fail-open route passes without rate-limit headers.
func TestFailOpenWithoutBackstop(t *testing.T) {
	c := newClient(t, client.Options{Addrs: []string{deadAddr(t)}, Timeout: 50 * time.Millisecond})
	m := New(Options{Client: c})
	m.Default(Rule{Limits: []Limit{{Name: "api", Policy: client.TokenBucket(1, slow)}}})
	h := m.Handler(&recorder{})
	for i := range 3 {
		w := request(h, "GET", "/", "192.0.2.1:1")
		if w.Code != 200 || w.Header().Get("RateLimit") != "" || w.Header().Get("X-RateLimit-Limit") != "" {
			t.Errorf("request %d: %d %v", i, w.Code, w.Header())
		}
	}
}

// Tiers are checked atomically with RL.CHECK.
func TestTiers(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, client.Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second})
	m := New(Options{Client: c})
	user := User(func(r *http.Request) string { return r.Header.Get("X-User") })
	m.Default(Rule{Limits: []Limit{
		{Name: "per-ip", Policy: client.TokenBucket(10, slow)},
		{Name: "per-user", Policy: client.FixedWindow(2, time.Hour), Key: user},
	}})
	h := m.Handler(&recorder{})
	w := request(h, "GET", "/", "192.0.2.1:1", "X-User", "alice")
	if w.Code != 200 {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	if got := w.Header().Get("RateLimit-Policy"); got != `"per-ip";q=10;w=10000, "per-user";q=2;w=3600` {
		t.Errorf("RateLimit-Policy %q", got)
	}
	if got := w.Header().Get("RateLimit"); !strings.HasPrefix(got, `"per-ip";r=9;t=`) || !strings.Contains(got, `, "per-user";r=1;t=`) {
		t.Errorf("RateLimit %q", got)
	}
	if w.Header().Get("X-RateLimit-Limit") != "2" || w.Header().Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("legacy headers from the tier with the fewest remaining: %v", w.Header())
	}
	request(h, "GET", "/", "192.0.2.1:1", "X-User", "alice")
	w = request(h, "GET", "/", "192.0.2.1:1", "X-User", "alice")
	if w.Code != 429 || w.Header().Get("X-RateLimit-Limit") != "2" {
		t.Errorf("third: %d %v, want 429 from per-user", w.Code, w.Header())
	}
	// The rejected call charged no tier: per-ip still has 8.
	w = request(h, "GET", "/", "192.0.2.1:1")
	if w.Code != 200 || w.Header().Get("RateLimit") != `"per-ip";r=7;t=`+strings.TrimPrefix(w.Header().Get("RateLimit"), `"per-ip";r=7;t=`) {
		t.Errorf("anonymous request (per-user skipped): %d %q", w.Code, w.Header().Get("RateLimit"))
	}
}

func deadAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

func TestDecisionErrors(t *testing.T) {
	c := newClient(t, client.Options{Addrs: []string{deadAddr(t)}, Timeout: 50 * time.Millisecond})
	var got error
	m := New(Options{Client: c, OnError: func(w http.ResponseWriter, r *http.Request, err error) {
		got = err
		w.WriteHeader(500)
	}})
	m.Default(Rule{Limits: []Limit{{Name: "api", Policy: client.TokenBucket(1, slow)}}, Cost: func(*http.Request) int64 { return -1 }})
	if w := request(m.Handler(&recorder{}), "GET", "/", "192.0.2.1:1"); w.Code != 500 || !errors.Is(got, client.ErrBadPolicy) {
		t.Errorf("negative cost: %d %v", w.Code, got)
	}
}

func bareHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })
}

func benchServe(b *testing.B, h http.Handler) {
	reqs := make([]*http.Request, 1000)
	for i := range reqs {
		reqs[i] = httptest.NewRequest("GET", "/items", nil)
		reqs[i].RemoteAddr = fmt.Sprintf("10.%d.%d.1:1000", i/250, i%250)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, reqs[i%len(reqs)])
		if w.Code != 200 {
			b.Fatalf("status %d", w.Code)
		}
	}
}

// BenchmarkBare is the handler alone, the baseline.
func BenchmarkBare(b *testing.B) { benchServe(b, bareHandler()) }

// BenchmarkMiddlewareServer is the middleware deciding with a live
// server over loopback, one request at a time.
func BenchmarkMiddlewareServer(b *testing.B) {
	s := rltest.Start(b, serverBin)
	c := newClient(b, client.Options{Addrs: []string{s.Addr}})
	m := New(Options{Client: c})
	m.Default(Rule{Limits: []Limit{{Name: "api", Policy: client.TokenBucket(1<<40, 1e6)}}})
	benchServe(b, m.Handler(bareHandler()))
}

// BenchmarkMiddlewareServerParallel is the same with concurrent requests.
func BenchmarkMiddlewareServerParallel(b *testing.B) {
	s := rltest.Start(b, serverBin)
	c := newClient(b, client.Options{Addrs: []string{s.Addr}})
	m := New(Options{Client: c})
	m.Default(Rule{Limits: []Limit{{Name: "api", Policy: client.TokenBucket(1<<40, 1e6)}}})
	h := m.Handler(bareHandler())
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		r := httptest.NewRequest("GET", "/items", nil)
		r.RemoteAddr = "10.0.0.1:1000"
		for pb.Next() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
		}
	})
}

// BenchmarkMiddlewareLocal is the local decision path: the server is
// down, the breaker open, the backstop decides.
func BenchmarkMiddlewareLocal(b *testing.B) {
	c := newClient(b, client.Options{Addrs: []string{deadAddr(b)}, Backstop: &client.BackstopOptions{},
		Breaker: client.BreakerOptions{Failures: 1, Cooldown: time.Hour}})
	m := New(Options{Client: c})
	m.Default(Rule{Limits: []Limit{{Name: "api", Policy: client.TokenBucket(1<<40, 1e6)}}})
	h := m.Handler(bareHandler())
	request(h, "GET", "/", "10.0.0.1:1") // opens the breaker
	benchServe(b, h)
}

// A shaper's admitted request waits its delay before the handler runs;
// a request that ends while waiting never reaches it.
func TestShaperDelay(t *testing.T) {
	s := rltest.Start(t, serverBin)
	c := newClient(t, client.Options{Addrs: []string{s.Addr}, Timeout: 5 * time.Second})
	m := New(Options{Client: c})
	m.Default(Rule{Limits: []Limit{{Name: "queue", Policy: client.Shaper(2, 1)}}})
	rec := &recorder{}
	h := m.Handler(rec)
	if w := request(h, "GET", "/", "192.0.2.1:1"); w.Code != 200 {
		t.Fatalf("first: %d", w.Code)
	}
	// The second is admitted with a delay of about 1 s; its request ends
	// after 100 ms.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	r := httptest.NewRequest("GET", "/", nil).WithContext(ctx)
	r.RemoteAddr = "192.0.2.1:1"
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusServiceUnavailable || len(rec.decisions) != 1 {
		t.Errorf("second: %d, handler ran %d times; want 503 and once", w.Code, len(rec.decisions))
	}
	if w.Header().Get("X-RateLimit-Remaining") != "0" {
		t.Errorf("second: remaining %q, want 0 (the queue is full)", w.Header().Get("X-RateLimit-Remaining"))
	}
}
