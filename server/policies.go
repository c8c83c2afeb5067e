package server

import (
	"context"
	"errors"
	"strconv"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// The edge's part of named policies (RL.POLICY, command's) and tiered
// checks against them (RL.CHECK): the policy file, the batch's policy
// names, INFO's policies section.
//
// RL.CHECK's requests name their policy instead of carrying parameters:
// the client's pending batch keeps the names beside the requests
// (client.names, aligned with client.reqs) and the batch goes to the
// backend's DoPolicies, which resolves each name at apply time: standalone
// just before the engine runs the batch, clustered in the FSM when the
// entry is applied, so a policy change is in force for every check
// applied after it, on every replica.

// Policies is what the policy commands (command.Policies) and the batch
// step need from a Backend.
type Policies interface {
	command.Policies
	// ReplacePolicies makes ps the whole set (RL.POLICY LOAD, SIGHUP).
	ReplacePolicies(ctx context.Context, ps []*policy.Policy) error
	// DoPolicies is Do for a batch in which names[i], when not nil, names
	// the policy request i is made from (then the request carries only
	// Key, Cost and Tiers); see policy.Store.ResolveBatch. names may be
	// shorter than reqs: missing names are nil.
	DoPolicies(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error
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

// cmdPolicyLoad: RL.POLICY LOAD, which reads Config.PolicyFile.
func cmdPolicyLoad(s *Server, c *client, _ [][]byte) outcome {
	if s.policies() == nil {
		c.rep.error(command.ErrNoPolicies)
		return cmdOK
	}
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
			s.cfg.Logger.Warn("policy file refused; the policies in force stay", "file", s.cfg.PolicyFile, "err", command.PolicyFileError(err))
		}
		return 0, err
	}
	if s.cfg.Logger != nil {
		s.cfg.Logger.Info("policy file loaded", "file", s.cfg.PolicyFile, "policies", len(ps))
	}
	return len(ps), nil
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
