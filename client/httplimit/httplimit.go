// Package httplimit is net/http middleware that rate-limits requests with
// rlserver through package client.
//
// Rules pick the limits for a request: one per route pattern (Go's
// ServeMux syntax, "POST /login", "/api/"), and a default for the rest.
// A rule holds one limit, sent as that algorithm's command, or several
// tiers (per address and per user, say), checked atomically with RL.CHECK:
// all are charged or none.
//
// Every limited response carries the headers of
// draft-ietf-httpapi-ratelimit-headers-11 (May 2026),
//
//	RateLimit-Policy: "api";q=100;w=60
//	RateLimit: "api";r=42;t=30
//
// and the legacy X-RateLimit-Limit, X-RateLimit-Remaining and
// X-RateLimit-Reset (delta seconds); a rejection is 429 Too Many Requests
// with Retry-After in whole seconds, rounded up. q is the policy's quota
// and w its window (for a token bucket, the time a full refill takes);
// r is what remains after this request; t, like X-RateLimit-Reset, is the
// seconds until the state is empty again (bucket full, window over) when
// allowed, and when denied the seconds until a retry can succeed, equal to
// Retry-After, as the draft asks that Retry-After not point before the end
// of t. Values are rounded up. Partition keys (pk) are not sent: they
// would expose client addresses or key digests.
//
// When the server is unavailable, a fail-open limit lets the request
// through (with headers from the local backstop if the client has one,
// without rate-limit headers otherwise); a fail-closed limit answers 503
// Service Unavailable. An error the caller must fix (a WRONGTYPE key, an
// invalid policy) answers 500 and is logged, never silently allowed.
package httplimit

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/client"
)

// Limit is one rate limit of a rule.
type Limit struct {
	// Name names the policy in the RateLimit headers and in the server
	// key; for tiers it is also the server-side policy name (RL.POLICY).
	// Limits with the same name share their keys' state, so they must
	// have the same policy. 1 to 64 letters, digits, '_', '-' or '.'.
	Name   string
	Policy client.Policy
	// Key identifies what is counted; nil uses Options.Key.
	Key KeyFunc
}

// Rule is what a route is limited by.
type Rule struct {
	// Limits: one, or several tiers checked together.
	Limits []Limit
	// Cost is the units a request takes; nil means 1.
	Cost func(*http.Request) int64
	// Failure overrides the limits' failure modes for this route.
	Failure client.FailureMode
}

// Options configures the middleware. Only Client is required.
type Options struct {
	Client *client.Client
	// Key is the key of limits without one. Default ClientIP with no
	// trusted proxies: the direct peer's address.
	Key KeyFunc
	// Prefix starts every server key. Default "http:".
	Prefix string
	// HashTag puts the identity in a Redis Cluster hash tag:
	// Prefix + name + ":{" + identity + "}". For a sharded server
	// (--groups): the limits of a rule that count the same identity then
	// share a hash slot, so a rule with several limits stays
	// all-or-nothing instead of getting CROSSSLOT (limits keyed on
	// different identities, a client IP and a user, still cannot share a
	// slot). It changes every key: turn it on before the first request,
	// not on a running deployment. Default off.
	HashTag bool

	// NoDraftHeaders drops RateLimit-Policy and RateLimit.
	NoDraftHeaders bool
	// NoLegacyHeaders drops X-RateLimit-Limit, -Remaining and -Reset.
	NoLegacyHeaders bool
	// NoRetryAfter drops Retry-After from 429 and 503 answers.
	NoRetryAfter bool

	// OnReject answers a request over its limit, after the headers are
	// set. Default: 429 with a one-line text body.
	OnReject func(w http.ResponseWriter, r *http.Request, d client.Decision)
	// OnUnavailable answers a fail-closed request while the server is
	// unavailable. Default: 503, Retry-After the breaker's cool-down left
	// (at least 1 s).
	OnUnavailable func(w http.ResponseWriter, r *http.Request, d client.Decision)
	// OnError answers a request whose limiter call failed through a bug
	// (client.ErrCommand, ErrBadPolicy) or whose context ended. Default:
	// log it and answer 500; 503 without a log when the context ended.
	OnError func(w http.ResponseWriter, r *http.Request, err error)
	// Logger receives OnError's default logs. Default slog.Default().
	Logger *slog.Logger
}

// Middleware limits requests by rules. Configure it with Default and
// Route before serving; it is then safe for concurrent use.
type Middleware struct {
	o      Options
	mux    *http.ServeMux
	def    *rule
	routes int
	names  map[string]client.Policy
}

// rule is a Rule with its header fragments computed once.
type rule struct {
	pattern string
	limits  []limit
	cost    func(*http.Request) int64
	opts    []client.CallOption // the rule's failure mode
	tiered  bool
}

type limit struct {
	Limit
	quota      int64
	policyItem string // `"name";q=100;w=60`
}

func (*rule) ServeHTTP(http.ResponseWriter, *http.Request) {} // a marker in the pattern mux

// New returns a middleware with no rules: it limits nothing until Default
// or Route is called.
func New(o Options) *Middleware {
	if o.Client == nil {
		panic("httplimit: Options.Client is nil")
	}
	if o.Key == nil {
		o.Key = ClientIP(IPConfig{})
	}
	if o.Prefix == "" {
		o.Prefix = "http:"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OnReject == nil {
		o.OnReject = Reject
	}
	if o.OnUnavailable == nil {
		o.OnUnavailable = Unavailable
	}
	m := &Middleware{o: o, mux: http.NewServeMux(), names: map[string]client.Policy{}}
	if m.o.OnError == nil {
		m.o.OnError = m.defaultError
	}
	return m
}

// Default sets the rule for requests that match no route.
func (m *Middleware) Default(r Rule) { m.def = m.compile("", r) }

// Route sets the rule for requests matching pattern, in http.ServeMux's
// syntax and precedence ("GET /items/{id}", "/admin/", "api.example.com/").
// It panics on an invalid pattern or rule, as ServeMux.Handle does.
func (m *Middleware) Route(pattern string, r Rule) {
	m.mux.Handle(pattern, m.compile(pattern, r))
	m.routes++
}

func (m *Middleware) compile(pattern string, r Rule) *rule {
	if len(r.Limits) == 0 {
		panic("httplimit: a rule without limits")
	}
	c := &rule{pattern: pattern, cost: r.Cost, tiered: len(r.Limits) > 1}
	if r.Failure != client.FailDefault {
		c.opts = []client.CallOption{client.WithFailure(r.Failure)}
	}
	for _, l := range r.Limits {
		if !validName(l.Name) {
			panic(fmt.Sprintf("httplimit: invalid limit name %q: use 1 to 64 letters, digits, '_', '-' or '.'", l.Name))
		}
		if prev, ok := m.names[l.Name]; ok && prev != l.Policy {
			panic(fmt.Sprintf("httplimit: limit %q defined twice with different policies", l.Name))
		}
		m.names[l.Name] = l.Policy
		if err := m.o.Client.RegisterPolicy(l.Name, l.Policy); err != nil {
			panic(fmt.Sprintf("httplimit: limit %q: %v", l.Name, err))
		}
		if l.Key == nil {
			l.Key = m.o.Key
		}
		q, w := l.Policy.Quota()
		item := `"` + l.Name + `";q=` + strconv.FormatInt(q, 10)
		if secs := int64(w / time.Second); secs > 0 {
			item += ";w=" + strconv.FormatInt(secs, 10)
		}
		c.limits = append(c.limits, limit{Limit: l, quota: q, policyItem: item})
	}
	return c
}

// validName accepts the names RL.POLICY accepts: 1 to 64 letters,
// digits, '_', '-' or '.', and not COST (RL.CHECK's keyword).
func validName(s string) bool {
	if s == "" || len(s) > 64 || strings.EqualFold(s, "cost") {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.", c) >= 0
		if !ok {
			return false
		}
	}
	return true
}

// state is what the middleware keeps in a request's context.
type state struct {
	pattern  string
	decision client.Decision
	decided  bool
}

type stateKey struct{}

func stateOf(r *http.Request) *state {
	st, _ := r.Context().Value(stateKey{}).(*state)
	return st
}

// DecisionFrom returns the decision the middleware made for the request
// whose context this is (handlers and OnReject see it).
func DecisionFrom(ctx context.Context) (client.Decision, bool) {
	st, _ := ctx.Value(stateKey{}).(*state)
	if st == nil || !st.decided {
		return client.Decision{}, false
	}
	return st.decision, true
}

// Handler wraps next.
func (m *Middleware) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { m.serve(w, r, next) })
}

func (m *Middleware) serve(w http.ResponseWriter, r *http.Request, next http.Handler) {
	ru := m.def
	if m.routes > 0 {
		if h, pattern := m.mux.Handler(r); pattern != "" {
			if matched, ok := h.(*rule); ok {
				ru = matched
			}
		}
	}
	if ru == nil {
		next.ServeHTTP(w, r)
		return
	}
	st := &state{pattern: ru.pattern}
	r = r.WithContext(context.WithValue(r.Context(), stateKey{}, st))
	opts := ru.opts
	if ru.cost != nil {
		opts = append(opts[:len(opts):len(opts)], client.WithCost(ru.cost(r)))
	}

	var (
		d      client.Decision
		err    error
		active []*limit // the limits that applied, in order
	)
	if !ru.tiered {
		l := &ru.limits[0]
		key := l.Key(r)
		if key == "" {
			next.ServeHTTP(w, r)
			return
		}
		active = []*limit{l}
		d, err = m.o.Client.Limit(r.Context(), m.serverKey(l.Name, key), l.Policy, opts...)
	} else {
		tiers := make([]client.Tier, 0, len(ru.limits))
		for i := range ru.limits {
			l := &ru.limits[i]
			if key := l.Key(r); key != "" {
				tiers = append(tiers, client.Tier{Policy: l.Name, Key: m.serverKey(l.Name, key)})
				active = append(active, l)
			}
		}
		if len(tiers) == 0 {
			next.ServeHTTP(w, r)
			return
		}
		d, err = m.o.Client.Check(r.Context(), tiers, opts...)
	}
	if err != nil {
		m.o.OnError(w, r, err)
		return
	}
	st.decision, st.decided = d, true
	if d.Source == client.FromFailClosed {
		if !m.o.NoRetryAfter {
			w.Header().Set("Retry-After", strconv.FormatInt(max(seconds(d.RetryAfter), 1), 10))
		}
		m.o.OnUnavailable(w, r, d)
		return
	}
	if d.Source != client.FromFailOpen {
		m.setHeaders(w.Header(), active, d)
	}
	if !d.Allowed {
		if !m.o.NoRetryAfter && d.RetryAfter != client.Never {
			w.Header().Set("Retry-After", strconv.FormatInt(max(seconds(d.RetryAfter), 1), 10))
		}
		m.o.OnReject(w, r, d)
		return
	}
	if d.Delay > 0 {
		t := time.NewTimer(d.Delay)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			http.Error(w, "request ended", http.StatusServiceUnavailable)
			return
		}
	}
	next.ServeHTTP(w, r)
}

// setHeaders writes the rate-limit headers of decision d over the limits
// that applied (one per tier of d.Tiers when tiered).
//
// The keys are set in canonical form (textproto.CanonicalMIMEHeaderKey)
// directly, which saves a canonicalisation per header.
func (m *Middleware) setHeaders(h http.Header, active []*limit, d client.Decision) {
	if !m.o.NoDraftHeaders && len(active) == 1 {
		l := active[0]
		h["Ratelimit-Policy"] = []string{l.policyItem}
		h["Ratelimit"] = []string{`"` + l.Name + `";r=` + strconv.FormatInt(max(d.Remaining, 0), 10) +
			";t=" + strconv.FormatInt(resetSeconds(d.Allowed, d.RetryAfter, d.ResetAfter), 10)}
	} else if !m.o.NoDraftHeaders {
		policy := make([]string, len(active))
		items := make([]string, len(active))
		for i, l := range active {
			policy[i] = l.policyItem
			remaining, reset := d.Remaining, resetSeconds(d.Allowed, d.RetryAfter, d.ResetAfter)
			if len(d.Tiers) == len(active) {
				t := d.Tiers[i]
				remaining, reset = t.Remaining, resetSeconds(t.Allowed, t.RetryAfter, t.ResetAfter)
			}
			items[i] = `"` + l.Name + `";r=` + strconv.FormatInt(max(remaining, 0), 10) + ";t=" + strconv.FormatInt(reset, 10)
		}
		h["Ratelimit-Policy"] = []string{strings.Join(policy, ", ")}
		h["Ratelimit"] = []string{strings.Join(items, ", ")}
	}
	if !m.o.NoLegacyHeaders {
		limitQ := active[0].quota
		if d.Tier > 0 && d.Tier <= len(active) {
			limitQ = active[d.Tier-1].quota
		}
		h["X-Ratelimit-Limit"] = []string{strconv.FormatInt(limitQ, 10)}
		h["X-Ratelimit-Remaining"] = []string{strconv.FormatInt(max(d.Remaining, 0), 10)}
		h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(resetSeconds(d.Allowed, d.RetryAfter, d.ResetAfter), 10)}
	}
}

// resetSeconds is t and X-RateLimit-Reset: when allowed, the seconds until
// the state is empty again; when denied, until a retry can succeed (the
// reset when it never can).
func resetSeconds(allowed bool, retry, reset time.Duration) int64 {
	if !allowed && retry != client.Never {
		return seconds(retry)
	}
	return seconds(reset)
}

// seconds rounds d up to whole seconds; 0 for d <= 0.
func seconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	s := int64(d / time.Second)
	if d%time.Second != 0 {
		s++
	}
	return s
}

// Reject is the default OnReject: 429 Too Many Requests, a one-line text
// body.
func Reject(w http.ResponseWriter, _ *http.Request, _ client.Decision) {
	http.Error(w, "rate limit exceeded", http.StatusTooManyRequests)
}

// Unavailable is the default OnUnavailable: 503 Service Unavailable, a
// one-line text body.
func Unavailable(w http.ResponseWriter, _ *http.Request, _ client.Decision) {
	http.Error(w, "rate limiter unavailable", http.StatusServiceUnavailable)
}

func (m *Middleware) defaultError(w http.ResponseWriter, r *http.Request, err error) {
	if r.Context().Err() != nil {
		// The request ended (client gone, or a deadline of the server's):
		// not a bug, and the answer likely reaches nobody.
		http.Error(w, "request ended", http.StatusServiceUnavailable)
		return
	}
	m.o.Logger.Error("rate limiter call failed", "method", r.Method, "path", r.URL.Path, "err", err)
	http.Error(w, "internal server error", http.StatusInternalServerError)
}
