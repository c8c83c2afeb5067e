// Package client is a typed Go client for rlserver, built on go-redis, for
// services that must keep answering when the limiter does not.
//
// Every call has a tight timeout (50 ms by default) covering all its
// attempts. A call either gets the server's decision, or a failure
// (unreachable, timed out, a transient state such as CLUSTERDOWN or
// LOADING), and then the failure mode decides: FailOpen allows, through the
// optional local backstop (an in-process token bucket per key, bounded in
// keys) when one is configured; FailClosed denies. Such decisions carry
// their Source and the failure in Err, so callers can tell them apart; a
// call returns an error only when the caller must fix something: an error
// reply (WRONGTYPE, a bad argument, NOAUTH: ErrCommand), an invalid policy
// (ErrBadPolicy), a closed client, or the caller's own context ending. A
// circuit breaker stops sending calls to a server that failed several
// times in a row and probes it again after a cool-down.
//
// Several addresses may be given (nodes of a cluster: any node accepts any
// command). A call starts at the node that last answered and moves to the
// next when a node cannot be reached or answers with a transient state,
// within the same timeout. A connection lost after the command was sent
// may have been applied: moving on can then charge a key twice, which
// errs against the caller, never in its favour beyond the policy.
//
// With Options.Cluster the client speaks the Redis Cluster protocol to a
// sharded cluster (rlserver --groups): go-redis's cluster client sends
// each command to the leader of its key's group, follows -MOVED, and
// reloads the slot map every ClusterReloadInterval so that a dead leader's
// keys move to its successor within about a second.
//
// Counters for errors, timeouts, degraded decisions and the breaker's
// state are registered on the Registerer given in Options.
package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
)

// DefaultTimeout is the per-call timeout when Options.Timeout is zero.
const DefaultTimeout = 50 * time.Millisecond

// Options configures a Client. Only Addrs is required.
type Options struct {
	// Addrs are the server's addresses, host:port: one standalone node, or
	// any nodes of a cluster. With Cluster, they are seeds: the client
	// learns the other nodes from CLUSTER SLOTS.
	Addrs []string
	// Cluster speaks the Redis Cluster protocol (CLUSTER SLOTS, -MOVED) to
	// a sharded cluster (rlserver --groups with the default
	// --cluster-redirect moved): each call goes straight to the leader of
	// its key's group. RL.CHECK's tiers must then share a hash slot (hash
	// tags: "{user:42}:ip", "{user:42}:login"), else ErrCommand with
	// CROSSSLOT; Reset splits its keys by slot itself.
	Cluster bool
	// Username and Password authenticate (AUTH / HELLO AUTH).
	Username, Password string
	// TLSConfig turns TLS on.
	TLSConfig *tls.Config
	// Timeout bounds each call, every attempt and connection set-up
	// included. Default 50 ms.
	Timeout time.Duration
	// Failure is the failure mode of policies and calls that do not set
	// their own. Default FailOpen.
	Failure FailureMode
	// Backstop, when set, decides fail-open calls locally while the server
	// is unavailable.
	Backstop *BackstopOptions
	// Breaker configures the circuit breaker (on by default).
	Breaker BreakerOptions
	// Registerer receives the client's Prometheus collectors; nil
	// registers nothing (they still count).
	Registerer prometheus.Registerer
	// MetricsNamespace prefixes the metric names. Default "rlclient".
	MetricsNamespace string
	// Logger receives failures (at most one line per second, with the
	// number suppressed) and breaker transitions. Default slog.Default().
	Logger *slog.Logger
	// PoolSize is the connections kept per node. Default go-redis's (10
	// per CPU).
	PoolSize int
	// Redis, when set, adjusts each node's go-redis options after the
	// client filled them in (with Cluster too: each node the cluster
	// client connects to).
	Redis func(*redis.Options)

	clock func() time.Time // tests only; default time.Now
}

// Client is safe for concurrent use. Create it with New.
type Client struct {
	nodes    []redis.UniversalClient // one *redis.ClusterClient with Options.Cluster
	cluster  bool
	cur      atomic.Int32 // index of the node that last answered
	timeout  time.Duration
	failure  FailureMode
	backstop *backstop
	breaker  *breaker
	m        *metrics
	log      *slog.Logger
	now      func() time.Time
	epoch    time.Time
	closed   atomic.Bool

	policyMu sync.RWMutex
	policies map[string]Policy // known by name, for Check's backstop and redefinition

	logMu      sync.Mutex
	lastLog    time.Time
	suppressed int
}

// New returns a Client for the servers in o.Addrs. It does not connect:
// connections are made by the first calls.
func New(o Options) (*Client, error) {
	if len(o.Addrs) == 0 {
		return nil, errors.New("client: no server address")
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Failure == FailDefault {
		o.Failure = FailOpen
	}
	if o.MetricsNamespace == "" {
		o.MetricsNamespace = "rlclient"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.clock == nil {
		o.clock = time.Now
	}
	c := &Client{
		timeout: o.Timeout, failure: o.Failure, log: o.Logger, now: o.clock,
		policies: map[string]Policy{},
	}
	c.epoch = c.now()
	if o.Backstop != nil {
		c.backstop = newBackstop(*o.Backstop)
	}
	m, err := newMetrics(o.Registerer, o.MetricsNamespace, func() float64 {
		if c.backstop == nil {
			return 0
		}
		return float64(c.backstop.len())
	})
	if err != nil {
		return nil, err
	}
	c.m = m
	c.breaker = newBreaker(o.Breaker, c.now, c.breakerChanged)
	if o.Cluster {
		c.cluster = true
		c.nodes = []redis.UniversalClient{newClusterClient(o)}
		return c, nil
	}
	for _, addr := range o.Addrs {
		ro := &redis.Options{
			Addr: addr, Username: o.Username, Password: o.Password, TLSConfig: o.TLSConfig,
			// The call's context carries the deadline; these only bound
			// operations outside a call.
			DialTimeout: o.Timeout, ReadTimeout: o.Timeout, WriteTimeout: o.Timeout, PoolTimeout: o.Timeout,
			ContextTimeoutEnabled: true,
			// Retrying is this package's job (the next node, the breaker):
			// go-redis's retries and dial backoff would spend the budget
			// on one dead node.
			MaxRetries: -1, DialerRetries: 1,
			DisableIdentity: true, // no CLIENT SETINFO round trip per connection
			PoolSize:        o.PoolSize,
		}
		if o.Redis != nil {
			o.Redis(ro)
		}
		c.nodes = append(c.nodes, redis.NewClient(ro))
	}
	return c, nil
}

// Close closes the connections. Calls after Close return ErrClosed.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	var errs []error
	for _, n := range c.nodes {
		errs = append(errs, n.Close())
	}
	return errors.Join(errs...)
}

// CallOption adjusts one call.
type CallOption func(*callOpts)

type callOpts struct {
	cost    int64
	failure FailureMode
	timeout time.Duration
}

// WithCost sets the units the call takes (default 1; 0 only looks).
func WithCost(n int64) CallOption { return func(o *callOpts) { o.cost = n } }

// WithFailure sets the call's failure mode, over the policy's.
func WithFailure(m FailureMode) CallOption { return func(o *callOpts) { o.failure = m } }

// WithTimeout sets the call's timeout, over Options.Timeout.
func WithTimeout(d time.Duration) CallOption { return func(o *callOpts) { o.timeout = d } }

func (c *Client) options(opts []CallOption) (callOpts, error) {
	co := callOpts{cost: 1, timeout: c.timeout}
	for _, f := range opts {
		f(&co)
	}
	if co.cost < 0 {
		return co, fmt.Errorf("%w: negative cost %d", ErrBadPolicy, co.cost)
	}
	if co.timeout <= 0 {
		co.timeout = c.timeout
	}
	return co, nil
}

// mode resolves a failure mode: the call's, else the policy's, else the
// client's.
func (c *Client) mode(call, policy FailureMode) FailureMode {
	if call != FailDefault {
		return call
	}
	if policy != FailDefault {
		return policy
	}
	return c.failure
}

// Allow is RL.ALLOW: takes cost tokens (WithCost, default 1) from key's
// bucket of capacity tokens refilled at ratePerSec.
func (c *Client) Allow(ctx context.Context, key string, capacity int64, ratePerSec float64, opts ...CallOption) (Decision, error) {
	return c.Limit(ctx, key, TokenBucket(capacity, ratePerSec), opts...)
}

// Peek is RL.PEEK: what Allow would decide now, without taking anything
// or creating the key.
func (c *Client) Peek(ctx context.Context, key string, capacity int64, ratePerSec float64, opts ...CallOption) (Decision, error) {
	return c.limit(ctx, key, TokenBucket(capacity, ratePerSec), "RL.PEEK", opts)
}

// Throttle is CL.THROTTLE (redis-cell): a burst of maxBurst+1, then
// countPerPeriod per period (whole seconds). Its durations have whole
// seconds, as the command replies.
func (c *Client) Throttle(ctx context.Context, key string, maxBurst, countPerPeriod int64, period time.Duration, opts ...CallOption) (Decision, error) {
	return c.Limit(ctx, key, Cell(maxBurst, countPerPeriod, period), opts...)
}

// Fixed is RL.FIXED: limit per window (whole milliseconds) aligned to
// multiples of the window since the epoch.
func (c *Client) Fixed(ctx context.Context, key string, limit int64, window time.Duration, opts ...CallOption) (Decision, error) {
	return c.Limit(ctx, key, FixedWindow(limit, window), opts...)
}

// Sliding is RL.SLIDING: the sliding window counter.
func (c *Client) Sliding(ctx context.Context, key string, limit int64, window time.Duration, opts ...CallOption) (Decision, error) {
	return c.Limit(ctx, key, SlidingWindow(limit, window), opts...)
}

// Log is RL.LOG: the exact sliding window log.
func (c *Client) Log(ctx context.Context, key string, limit int64, window time.Duration, opts ...CallOption) (Decision, error) {
	return c.Limit(ctx, key, SlidingLog(limit, window), opts...)
}

// Shape is RL.SHAPE: a queue of capacity units drained at ratePerSec.
// An admitted call should wait Decision.Delay before proceeding. A
// rejection's RetryAfter is derived from the reply (see shapeRetry).
func (c *Client) Shape(ctx context.Context, key string, capacity int64, ratePerSec float64, opts ...CallOption) (Decision, error) {
	return c.Limit(ctx, key, Shaper(capacity, ratePerSec), opts...)
}

// Limit applies policy p to key with p's command.
func (c *Client) Limit(ctx context.Context, key string, p Policy, opts ...CallOption) (Decision, error) {
	return c.limit(ctx, key, p, "", opts)
}

// limit runs p's command, or name with p's arguments when name is set.
func (c *Client) limit(ctx context.Context, key string, p Policy, name string, opts []CallOption) (Decision, error) {
	co, err := c.options(opts)
	if err != nil {
		return Decision{}, err
	}
	if err := p.validate(); err != nil {
		return Decision{}, err
	}
	// The breaker is asked first, so that while it is open a call
	// builds no command.
	probe, err := c.gate()
	var v any
	if err == nil {
		cmd, rest := p.command(co.cost)
		if name != "" {
			cmd = name
		}
		args := make([]any, 0, 2+len(rest))
		args = append(append(args, cmd, key), rest...)
		v, err = c.exec(ctx, co.timeout, args, probe)
	}
	if err == nil {
		return parseDecision(p, co.cost, v)
	}
	if !errors.Is(err, ErrUnavailable) {
		return Decision{}, c.callerError(err)
	}
	tiers := [1]localTier{{key: key, policy: p}}
	return c.degrade(c.mode(co.failure, p.Failure), err, tiers[:], co.cost, name == ""), nil
}

// Tier is one level of a Check: a policy defined on the server (by
// DefinePolicy, or RL.POLICY SET from elsewhere) and the key it applies to.
type Tier struct {
	Policy string
	Key    string
}

// Check is RL.CHECK: all tiers are charged cost (WithCost) atomically, or
// none. Decision.Tier is the deciding tier and Decision.Tiers holds every
// tier's numbers. A policy this client defined or registered but the
// server does not know (a new or restarted server) is defined again and
// the call retried, each definition and retry with its own timeout. When
// the server is unavailable the failure mode is the call's, else closed if
// any tier's known policy fails closed, else open if any fails open, else
// the client's; the backstop applies the tiers whose policies this client
// knows.
func (c *Client) Check(ctx context.Context, tiers []Tier, opts ...CallOption) (Decision, error) {
	co, err := c.options(opts)
	if err != nil {
		return Decision{}, err
	}
	if len(tiers) == 0 {
		return Decision{}, fmt.Errorf("%w: Check needs at least one tier", ErrBadPolicy)
	}
	args := make([]any, 0, 3+2*len(tiers))
	args = append(args, "RL.CHECK")
	if co.cost != 1 {
		args = append(args, "COST", co.cost)
	}
	for _, t := range tiers {
		args = append(args, t.Policy, t.Key)
	}
	var v any
	for attempt := 0; ; attempt++ {
		v, err = c.do(ctx, co.timeout, args)
		name, unknown := unknownPolicy(err)
		if !unknown || attempt >= len(tiers) {
			break
		}
		p, ok := c.policy(name)
		if !ok {
			break
		}
		if derr := c.define(ctx, co.timeout, name, p); derr != nil {
			err = derr
			break
		}
	}
	if err == nil {
		return parseCheck(v, len(tiers))
	}
	if !errors.Is(err, ErrUnavailable) {
		return Decision{}, c.callerError(err)
	}
	policyMode := FailDefault // FailClosed > FailOpen > FailDefault
	local := make([]localTier, 0, len(tiers))
	index := make([]int, 0, len(tiers)) // local tier -> tier
	for i, t := range tiers {
		if p, ok := c.policy(t.Policy); ok {
			local = append(local, localTier{key: t.Key, policy: p})
			index = append(index, i)
			policyMode = max(policyMode, p.Failure)
		}
	}
	d := c.degrade(c.mode(co.failure, policyMode), err, local, co.cost, true)
	if d.Source != FromBackstop {
		return d, nil
	}
	// Report every tier in argument order; those the backstop could not
	// apply show as allowed with nothing known.
	all := make([]TierDecision, len(tiers))
	for i, t := range tiers {
		all[i] = TierDecision{Policy: t.Policy, Key: t.Key, Allowed: true}
	}
	if len(local) == 1 {
		d.Tier = 1
		d.Tiers = []TierDecision{{Allowed: d.Allowed, Limit: d.Limit, Remaining: d.Remaining, RetryAfter: d.RetryAfter, ResetAfter: d.ResetAfter}}
	}
	for j, td := range d.Tiers {
		td.Policy, td.Key = tiers[index[j]].Policy, tiers[index[j]].Key
		all[index[j]] = td
	}
	d.Tier, d.Tiers = index[d.Tier-1]+1, all
	return d, nil
}

// unknownPolicy returns the name in RL.CHECK's `ERR unknown policy 'name'`.
func unknownPolicy(err error) (string, bool) {
	if err == nil || !errors.Is(err, ErrCommand) {
		return "", false
	}
	msg := err.Error()
	const marker = "ERR unknown policy '"
	i := strings.Index(msg, marker)
	if i < 0 {
		return "", false
	}
	name := msg[i+len(marker):]
	j := strings.LastIndexByte(name, '\'')
	if j < 0 {
		return "", false
	}
	return name[:j], true
}

// RegisterPolicy makes p known to this client under name without sending
// anything: Check's backstop can then apply it, and Check defines it on
// the server when the server answers that it does not know it.
func (c *Client) RegisterPolicy(name string, p Policy) error {
	if err := p.validate(); err != nil {
		return err
	}
	if name == "" {
		return fmt.Errorf("%w: empty policy name", ErrBadPolicy)
	}
	c.policyMu.Lock()
	c.policies[name] = p
	c.policyMu.Unlock()
	return nil
}

// DefinePolicy registers p under name (see RegisterPolicy) and defines it
// on the server with RL.POLICY SET. A failure to reach the server is
// returned (wrapping ErrUnavailable); Check retries the definition later.
func (c *Client) DefinePolicy(ctx context.Context, name string, p Policy) error {
	if err := c.RegisterPolicy(name, p); err != nil {
		return err
	}
	return c.callerError(c.define(ctx, c.timeout, name, p))
}

func (c *Client) define(ctx context.Context, timeout time.Duration, name string, p Policy) error {
	args := append([]any{"RL.POLICY", "SET", name}, p.definition()...)
	_, err := c.do(ctx, timeout, args)
	return err
}

func (c *Client) policy(name string) (Policy, bool) {
	c.policyMu.RLock()
	defer c.policyMu.RUnlock()
	p, ok := c.policies[name]
	return p, ok
}

// Reset is RL.RESET: removes the keys' state and returns how many held
// some. A failure is returned (wrapping ErrUnavailable): there is nothing
// to decide.
func (c *Client) Reset(ctx context.Context, keys ...string) (int64, error) {
	if len(keys) == 0 {
		return 0, nil
	}
	if c.cluster {
		return c.resetCluster(ctx, keys)
	}
	args := make([]any, 0, 1+len(keys))
	args = append(args, "RL.RESET")
	for _, k := range keys {
		args = append(args, k)
	}
	v, err := c.do(ctx, c.timeout, args)
	if err != nil {
		return 0, c.callerError(err)
	}
	n, ok := v.(int64)
	if !ok {
		return 0, fmt.Errorf("%w: RL.RESET replied %#v", ErrBadReply, v)
	}
	return n, nil
}

// do sends one command through the breaker to the nodes, within timeout.
// Its error wraps ErrUnavailable for a failure, ErrCommand for an error
// reply; otherwise it is ErrClosed or the caller's context error.
func (c *Client) do(ctx context.Context, timeout time.Duration, args []any) (any, error) {
	probe, err := c.gate()
	if err != nil {
		return nil, err
	}
	return c.exec(ctx, timeout, args, probe)
}

// errSkipped is the failure of a call the open breaker skipped.
var errSkipped = fmt.Errorf("%w: %w", ErrUnavailable, ErrBreakerOpen)

// gate admits a call through the breaker; probe must be passed to exec.
func (c *Client) gate() (probe bool, err error) {
	if c.closed.Load() {
		return false, ErrClosed
	}
	ok, probe := c.breaker.allow()
	if !ok {
		c.m.breakerSkips.Inc()
		return false, errSkipped
	}
	return probe, nil
}

// exec sends a command gate admitted.
func (c *Client) exec(ctx context.Context, timeout time.Duration, args []any, probe bool) (any, error) {
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	start := time.Now()
	v, err := c.send(callCtx, args)
	c.m.duration.Observe(time.Since(start).Seconds())
	cancel()
	if err == nil {
		c.breaker.done(callOK, probe)
		return v, nil
	}
	var reply redis.Error
	switch {
	case errors.As(err, &reply) && !c.unavailable(err.Error()):
		c.breaker.done(callOK, probe)
		return nil, fmt.Errorf("%w: %w", ErrCommand, err)
	case errors.Is(err, redis.ErrClosed) && c.closed.Load():
		c.breaker.done(callNeutral, probe)
		return nil, ErrClosed
	case ctx.Err() != nil:
		// The caller gave up (its request ended, its own deadline was
		// shorter): not the server's failure, and nobody is waiting for a
		// decision.
		c.breaker.done(callNeutral, probe)
		return nil, fmt.Errorf("client: %w", context.Cause(ctx))
	}
	c.breaker.done(callFailed, probe)
	var fail error
	switch {
	case errors.As(err, &reply):
		c.m.errServer.Inc()
		fail = fmt.Errorf("%w: %w", ErrUnavailable, err)
	case isTimeout(err):
		c.m.timeouts.Inc()
		fail = fmt.Errorf("%w: %w after %v: %w", ErrUnavailable, ErrTimeout, timeout, err)
	default:
		c.m.errNetwork.Inc()
		fail = fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	c.logFailure(fail)
	return nil, fail
}

// send tries the nodes in turn from the one that last answered, moving on
// while a node is unreachable or in a transient state and time is left.
func (c *Client) send(ctx context.Context, args []any) (any, error) {
	first := int(c.cur.Load())
	pos := keyPos(args)
	var err error
	for i := range c.nodes {
		idx := (first + i) % len(c.nodes)
		cmd := redis.NewCmd(ctx, args...)
		cmd.SetFirstKeyPos(pos)
		c.nodes[idx].Process(ctx, cmd)
		var v any
		v, err = cmd.Result()
		var reply redis.Error
		isReply := errors.As(err, &reply)
		if err == nil || (isReply && !c.unavailable(err.Error())) {
			if idx != first {
				c.cur.Store(int32(idx))
			}
			return v, err
		}
		if ctx.Err() != nil || isTimeout(err) || (isReply && !retryElsewhere(err.Error())) {
			return nil, err
		}
	}
	return nil, err
}

// callerError counts an error reply returned to the caller (one that
// Check resolves itself, an unknown policy it then defines, is not).
func (c *Client) callerError(err error) error {
	if errors.Is(err, ErrCommand) {
		c.m.errCommand.Inc()
	}
	return err
}

// transient reports whether an error reply is a server state rather than
// an answer: the failure mode applies to these. OOM is the server refusing
// new keys above --maxmemory: the limiter cannot decide for this key now.
func transient(msg string) bool {
	for _, p := range []string{"CLUSTERDOWN", "TRYAGAIN", "LOADING", "MASTERDOWN", "UNKNOWN ", "BUSY ", "OOM ",
		"ERR server is shutting down", "ERR max number of clients reached"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// unavailable reports whether an error reply is a failure (the failure
// mode applies) rather than the caller's bug: a transient state, or in
// cluster mode a redirect left over when the redirects ran out (the slot
// map is changing). A plain client sent -MOVED is pointed at a sharded
// cluster without Options.Cluster: a configuration error.
func (c *Client) unavailable(msg string) bool {
	return transient(msg) || (c.cluster && redirect(msg))
}

// retryElsewhere reports whether another node may take a command this one
// answered with a transient state. UNKNOWN means it may have been applied:
// sending it again could charge twice. OOM is the whole cluster's state
// (every node forwards to the same leader).
func retryElsewhere(msg string) bool {
	return transient(msg) && !strings.HasPrefix(msg, "UNKNOWN ") && !strings.HasPrefix(msg, "OOM ")
}

func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// degrade makes the decision of a call the server could not answer.
func (c *Client) degrade(mode FailureMode, cause error, tiers []localTier, cost int64, charge bool) Decision {
	var limit int64
	if len(tiers) > 0 {
		limit, _ = tiers[0].policy.Quota()
	}
	switch {
	case mode == FailClosed:
		c.m.failClosed.Inc()
		return Decision{Limit: limit, RetryAfter: c.breaker.retryIn(), Source: FromFailClosed, Err: cause}
	case c.backstop != nil && len(tiers) > 0:
		d := c.backstop.decide(int64(c.now().Sub(c.epoch)), tiers, cost, charge)
		d.Err = cause
		if d.Allowed {
			c.m.backstopAllowed.Inc()
		} else {
			c.m.backstopDenied.Inc()
		}
		return d
	}
	c.m.failOpen.Inc()
	return Decision{Allowed: true, Limit: limit, Remaining: limit, Source: FromFailOpen, Err: cause}
}

// logFailure logs at most one failure per second, with the number of
// failures not logged since the last line.
func (c *Client) logFailure(err error) {
	now := c.now()
	c.logMu.Lock()
	if !c.lastLog.IsZero() && now.Sub(c.lastLog) < time.Second {
		c.suppressed++
		c.logMu.Unlock()
		return
	}
	n := c.suppressed
	c.suppressed, c.lastLog = 0, now
	c.logMu.Unlock()
	c.log.Warn("rlserver call failed", "err", err, "suppressed", n)
}

func (c *Client) breakerChanged(from, to int) {
	c.m.breakerState.Set(float64(to))
	switch to {
	case breakerOpen:
		if from == breakerClosed {
			c.m.breakerOpened.Inc()
			c.log.Warn("rlserver circuit breaker open: calls take their failure mode without trying the server")
		}
	case breakerClosed:
		c.log.Info("rlserver circuit breaker closed: the server answers again")
	}
}
