package server

import (
	"context"
	"errors"
	"strconv"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
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
			firstKey: 2, lastKey: -1, keyStep: 2, movableKeys: command.CheckKeys,
			acl:     []string{"@write", "@fast", "@ratelimit"},
			summary: "Checks a request against one or more policies, all-or-nothing: RL.CHECK [COST n] policy key [policy key ...]. Replies [allowed, deciding_tier, [policy, key, allowed, limit, remaining, retry_after_ms, reset_after_ms, delay_ms] per tier].",
			group:   "ratelimit", since: "0.9.0",
			tiered: command.BatchCheck, renderTiered: renderCheck,
		},
	)
}

func policySub(name string, arity int, flags, acl []string, summary string, h func(*Server, *client, Policies, [][]byte) outcome) *entry {
	return &entry{name: "rl.policy|" + name, arity: arity, flags: flags, acl: acl,
		summary: summary, group: "ratelimit", since: "0.9.0",
		handler: func(s *Server, c *client, args [][]byte) outcome {
			pb := s.policies()
			if pb == nil {
				c.rep.error(command.ErrNoPolicies)
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
		c.rep.error(command.PolicyErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func writePolicy(r *replier, p *policy.Policy) {
	w := kv.Writer{B: r.scratch[:0], RESP3: r.resp3()}
	command.WritePolicy(&w, p)
	r.conn.WriteRaw(w.B)
	r.scratch = w.B
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
		c.rep.error(command.ErrNoPolicyFile)
		return cmdOK
	}
	if _, err := s.ReloadPolicies(context.Background()); err != nil {
		c.rep.error(command.PolicyLoadErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// PolicyFileError is the text of a refused policy file for the log and the
// start-up error (command.PolicyFileError).
func PolicyFileError(err error) string { return command.PolicyFileError(err) }

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

// renderCheck writes RL.CHECK's reply (command.RenderCheck), counting
// its decisions per policy in the backend's store.
func renderCheck(s *Server, r *replier, reqs []engine.Request, names [][]byte, res []engine.Result) (allowed, denied int64, deniedKey []byte, failed bool) {
	var store *policy.Store
	if pb := s.policies(); pb != nil {
		store = pb.PolicyStore()
	}
	r.kw.B = r.kw.B[:0]
	allowed, denied, deniedKey, errText := command.RenderCheck(&r.kw, reqs, names, res, store)
	if errText != "" {
		r.error(errText)
		return 0, 0, nil, true
	}
	r.conn.WriteRaw(r.kw.B)
	return allowed, denied, deniedKey, false
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
