package server

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// Named policies (RL.POLICY) and tiered checks against them (RL.CHECK).
//
// RL.CHECK's requests name their policy instead of carrying parameters:
// the client's pending batch keeps the names beside the requests
// (client.names, aligned with client.reqs) and the batch goes to the
// backend's DoPolicies, which resolves each name at apply time: standalone
// just before the engine runs the batch, clustered in the FSM when the
// entry is applied, so a policy change is in force for every check
// applied after it, on every replica.

// Policies is what the policy commands need from a Backend.
type Policies interface {
	// PolicyStore is the policies in force on this node (RL.POLICY GET
	// and LIST, INFO, metrics); nil when the backend keeps none.
	PolicyStore() *policy.Store
	// SetPolicy adds or replaces a policy; DelPolicy removes one and
	// reports whether it existed; ReplacePolicies makes ps the whole set.
	// Replicated backends apply them through the log.
	SetPolicy(ctx context.Context, p *policy.Policy) error
	DelPolicy(ctx context.Context, name string) (bool, error)
	ReplacePolicies(ctx context.Context, ps []*policy.Policy) error
	// DoPolicies is Do for a batch in which names[i], when not nil, names
	// the policy request i is made from (then the request carries only
	// Key, Cost and Tiers); see policy.Store.ResolveBatch. names may be
	// shorter than reqs: missing names are nil.
	DoPolicies(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error
}

// maxTiers bounds the tiers of one RL.CHECK.
const maxTiers = 64

func init() {
	register(
		container("rl.policy", "A container for named rate-limit policies.", "ratelimit",
			policySub("set", -5, []string{"write", "admin"}, []string{"@admin", "@write", "@slow", "@dangerous"},
				"Defines or redefines a policy: RL.POLICY SET name KIND params... (ALLOW capacity rate, THROTTLE max_burst count_per_period period, FIXED|SLIDING|LOG limit window_ms, SHAPE capacity rate).", cmdPolicySet),
			policySub("get", 3, []string{"readonly"}, []string{"@read", "@slow", "@ratelimit"},
				"Returns a policy's definition [name, KIND, params...], or null.", cmdPolicyGet),
			policySub("del", 3, []string{"write", "admin"}, []string{"@admin", "@write", "@slow", "@dangerous"},
				"Deletes a policy. Returns 1 if it existed, else 0.", cmdPolicyDel),
			policySub("list", 2, []string{"readonly"}, []string{"@read", "@slow", "@ratelimit"},
				"Returns every policy's definition, sorted by name.", cmdPolicyList),
			policySub("load", 2, []string{"write", "admin"}, []string{"@admin", "@write", "@slow", "@dangerous"},
				"Replaces the policies with the --policies file's (the file is taken whole or not at all).", cmdPolicyLoad),
		),
		&entry{
			name: "rl.check", arity: -3, flags: []string{"write", "denyoom", "fast", "movablekeys"},
			firstKey: 2, lastKey: -1, keyStep: 2, movableKeys: checkKeyPositions,
			acl:     []string{"@write", "@fast", "@ratelimit"},
			summary: "Checks a request against one or more policies, all-or-nothing: RL.CHECK [COST n] policy key [policy key ...]. Replies [allowed, deciding_tier, [policy, key, allowed, limit, remaining, retry_after_ms, reset_after_ms, delay_ms] per tier].",
			group:   "ratelimit", since: "0.9.0",
			tiered: batchCheck, renderTiered: renderCheck,
		},
	)
}

func policySub(name string, arity int, flags, acl []string, summary string, h func(*Server, *client, Policies, [][]byte) outcome) *entry {
	return &entry{name: "rl.policy|" + name, arity: arity, flags: flags, acl: acl,
		summary: summary, group: "ratelimit", since: "0.9.0",
		handler: func(s *Server, c *client, args [][]byte) outcome {
			pb := s.policies()
			if pb == nil {
				c.rep.error(errNoPolicies)
				return cmdOK
			}
			return h(s, c, pb, args)
		}}
}

// policies returns Config.Policies, or nil when the backend keeps none
// (no Config.Policies, or one without a store).
func (s *Server) policies() Policies {
	pb := s.cfg.Policies
	if pb == nil || pb.PolicyStore() == nil {
		return nil
	}
	return pb
}

func words(args [][]byte) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out
}

func cmdPolicySet(_ *Server, c *client, pb Policies, args [][]byte) outcome {
	p, err := policy.Parse(words(args[2:]))
	if err == nil {
		err = pb.SetPolicy(context.Background(), p)
	}
	if err != nil {
		c.rep.error(policyCmdErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func writePolicy(r *replier, p *policy.Policy) {
	w := p.Words()
	r.conn.WriteArray(len(w))
	for _, s := range w {
		r.conn.WriteBulkString(s)
	}
}

func cmdPolicyGet(_ *Server, c *client, pb Policies, args [][]byte) outcome {
	p, ok := pb.PolicyStore().Get(args[2])
	if !ok {
		c.rep.null()
		return cmdOK
	}
	writePolicy(&c.rep, p)
	return cmdOK
}

func cmdPolicyDel(_ *Server, c *client, pb Policies, args [][]byte) outcome {
	if !policy.ValidName(args[2]) {
		c.rep.conn.WriteInt(0) // no such policy can exist: nothing to replicate
		return cmdOK
	}
	existed, err := pb.DelPolicy(context.Background(), string(args[2]))
	if err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	if existed {
		c.rep.conn.WriteInt(1)
	} else {
		c.rep.conn.WriteInt(0)
	}
	return cmdOK
}

func cmdPolicyList(_ *Server, c *client, pb Policies, _ [][]byte) outcome {
	ps := pb.PolicyStore().List()
	c.rep.conn.WriteArray(len(ps))
	for _, p := range ps {
		writePolicy(&c.rep, p)
	}
	return cmdOK
}

func cmdPolicyLoad(s *Server, c *client, _ Policies, _ [][]byte) outcome {
	if s.cfg.PolicyFile == "" {
		c.rep.error(errNoPolicyFile)
		return cmdOK
	}
	if _, err := s.ReloadPolicies(context.Background()); err != nil {
		c.rep.error(policyLoadErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// policyLoadErrorText is RL.POLICY LOAD's reply to a refused file. A file
// that cannot be read gets a generic text: the OS error names paths, which
// go to the log only.
func policyLoadErrorText(err error) string {
	var le *policy.LineError
	if !errors.As(err, &le) && !errors.Is(err, policy.ErrFileTooLarge) && !isBackendError(err) {
		return errPolicyFileRead
	}
	return policyCmdErrorText(err)
}

// PolicyFileError is the text of a refused policy file for the log and the
// start-up error: RL.POLICY LOAD's reply without "ERR " (so a bad line
// reads the same to the client and in the log), or the read error.
func PolicyFileError(err error) string {
	t := policyLoadErrorText(err)
	if t == errPolicyFileRead {
		return err.Error()
	}
	return strings.TrimPrefix(t, "ERR ")
}

func isBackendError(err error) bool {
	var be BackendError
	return errors.As(err, &be)
}

// ErrNoPolicyFile means ReloadPolicies was called with no policy file
// configured.
var ErrNoPolicyFile = errors.New("no policy file configured")

// ReloadPolicies replaces the policies with Config.PolicyFile's (RL.POLICY
// LOAD, SIGHUP). The file is taken whole or not at all: on an error
// (a *policy.LineError names the line) the policies in force stay, and
// the refusal is logged here, so callers do not log it again. It returns
// the number of policies loaded.
func (s *Server) ReloadPolicies(ctx context.Context) (int, error) {
	if s.cfg.PolicyFile == "" {
		return 0, ErrNoPolicyFile
	}
	pb := s.policies()
	if pb == nil {
		return 0, errors.New("this server keeps no policies")
	}
	ps, err := policy.ParseFile(s.cfg.PolicyFile)
	if err == nil {
		err = pb.ReplacePolicies(ctx, ps)
	}
	if err != nil {
		// Logged here, once, whoever asked (RL.POLICY LOAD or SIGHUP).
		if s.cfg.Logger != nil {
			s.cfg.Logger.Warn("policy file refused; the policies in force stay", "file", s.cfg.PolicyFile, "err", PolicyFileError(err))
		}
		return 0, err
	}
	if s.cfg.Logger != nil {
		s.cfg.Logger.Info("policy file loaded", "file", s.cfg.PolicyFile, "policies", len(ps))
	}
	return len(ps), nil
}

// checkKeyPositions gives RL.CHECK's keys: every second argument after
// the policy name, which follows COST n when given.
func checkKeyPositions(args [][]byte) (first, last, step int) {
	first = 2
	if len(args) > 1 && equalFold(args[1], "cost") {
		first = 4
	}
	return first, len(args) - 1, 2
}

// batchCheck parses RL.CHECK [COST n] policy key [policy key ...] into one
// all-or-nothing group: a request per tier, carrying its key and the
// cost, the first one the group's size; the names go beside them.
func batchCheck(reqs []engine.Request, names, args [][]byte) ([]engine.Request, [][]byte, string) {
	i, cost := 1, int64(1)
	if equalFold(args[1], "cost") {
		if len(args) < 5 {
			return reqs, names, wrongArity("rl.check")
		}
		v, ok := parseInt(args[2])
		if !ok {
			return reqs, names, errNotInteger
		}
		if v < 0 {
			return reqs, names, engineErrorText(engine.ErrBadCost)
		}
		i, cost = 3, v
	}
	rest := args[i:]
	if len(rest)%2 != 0 {
		return reqs, names, errSyntax
	}
	n := len(rest) / 2
	if n > maxTiers {
		return reqs, names, errTooManyTiers
	}
	first := len(reqs)
	for k := 0; k < n; k++ {
		name, key := rest[2*k], rest[2*k+1]
		if !policy.ValidName(name) {
			return reqs, names, unknownPolicy(name)
		}
		for j := 0; j < k; j++ {
			if string(rest[2*j+1]) == string(key) {
				return reqs, names, duplicateTierKey(key)
			}
		}
		reqs = append(reqs, engine.Request{Key: key, Cost: cost})
		names = append(names, name)
	}
	reqs[first].Tiers = uint16(n)
	return reqs, names, ""
}

// renderCheck writes RL.CHECK's reply:
//
//  1. 1 if every tier allowed and all were charged, 0 otherwise (none charged)
//  2. the deciding tier, 1-based: when rejected, the first tier that
//     rejected; when allowed, the tier with the fewest remaining (the
//     first on ties)
//     3...) per tier, in argument order: [policy, key, allowed, limit,
//     remaining, retry_after_ms (0 when allowed, -1 never), reset_after_ms,
//     delay_ms (SHAPE tiers of an admitted check: the delay; else 0)]
//
// An unknown policy (also one deleted since) is an error naming it; a
// tier's error (WRONGTYPE) is the reply's error, and nothing was charged.
// It counts the decision per policy: allowed for every tier of an allowed
// check, denied for each tier that rejected.
func renderCheck(s *Server, r *replier, reqs []engine.Request, names [][]byte, res []engine.Result) (allowed, denied int64, deniedKey []byte, failed bool) {
	for i := range res {
		if errors.Is(res[i].Err, policy.ErrUnknown) {
			r.error(unknownPolicy(names[i]))
			return 0, 0, nil, true
		}
	}
	for i := range res {
		if err := res[i].Err; err != nil && !errors.Is(err, engine.ErrGroupAborted) {
			r.error(engineErrorText(err))
			return 0, 0, nil, true
		}
	}
	for i := range res {
		if res[i].Err != nil {
			r.error(errInternal)
			return 0, 0, nil, true
		}
	}
	ok := true
	decider := -1
	for i := range res {
		if !res[i].Allowed {
			ok = false
			if decider < 0 {
				decider = i
			}
		}
	}
	if ok {
		decider = 0
		for i := range res {
			if res[i].Remaining < res[decider].Remaining {
				decider = i
			}
		}
	}
	var store *policy.Store
	if pb := s.policies(); pb != nil {
		store = pb.PolicyStore()
	}
	r.conn.WriteArray(2 + len(res))
	if ok {
		r.conn.WriteInt64(1)
	} else {
		r.conn.WriteInt64(0)
	}
	r.conn.WriteInt64(int64(decider + 1))
	for i := range res {
		d := &res[i]
		r.conn.WriteArray(8)
		r.conn.WriteBulk(names[i])
		r.conn.WriteBulk(reqs[i].Key)
		tierAllowed := int64(0)
		if d.Allowed {
			tierAllowed = 1
		}
		r.conn.WriteInt64(tierAllowed)
		r.conn.WriteInt64(d.Limit)
		r.conn.WriteInt64(d.Remaining)
		retry := ceilDiv(d.RetryAfter, msNanos)
		if d.Allowed {
			retry = 0
		}
		r.conn.WriteInt64(retry)
		r.conn.WriteInt64(ceilDiv(d.ResetAfter, msNanos))
		delay := int64(0)
		if ok && d.Delay > 0 {
			delay = ceilDiv(d.Delay, msNanos)
		}
		r.conn.WriteInt64(delay)
		if store != nil {
			switch {
			case ok:
				store.Record(names[i], 1, 0)
			case !d.Allowed:
				store.Record(names[i], 0, 1)
			}
		}
	}
	if ok {
		return 1, 0, nil, false
	}
	return 0, 1, reqs[decider].Key, false
}

// writePolicyInfo writes INFO's policies section: the number of policies,
// then per policy its decisions on this node (allowed: checks in which
// every tier allowed, charged unless COST 0; denied: checks its tier
// rejected).
func (s *Server) writePolicyInfo(kv func(k string, v any)) {
	pb := s.policies()
	if pb == nil {
		kv("policies", 0)
		return
	}
	st := pb.PolicyStore().Stats()
	kv("policies", len(st))
	for _, p := range st {
		kv("policy_"+p.Name, "allowed="+strconv.FormatInt(p.Allowed, 10)+",denied="+strconv.FormatInt(p.Denied, 10))
	}
}

// PolicyStats returns the decisions per policy on this node, sorted by
// name (none when the backend keeps no policies).
func (s *Server) PolicyStats() []policy.Stat {
	pb := s.policies()
	if pb == nil {
		return nil
	}
	return pb.PolicyStore().Stats()
}
