package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/policy"
)

// Named policies in the log. Policies are replicated state: RL.POLICY SET,
// DEL and LOAD are policy entries (entry.PolicySet, entry.PolicyDel,
// entry.PolicyReplace) that the FSM applies to its policy.Store, and a
// batch's requests may name a policy instead of carrying parameters,
// resolved when the FSM applies the batch (fsm.go): a policy change is in
// force for every check applied after it, on every replica, and a check
// never runs with parameters a replica did not agree on. Snapshots carry
// the policies (persist's policies section). A follower forwards a policy
// change as msgPolicy (forward.go).

// policyResult is what Apply returns for a policy entry: a code that also
// travels in msgPolicy replies. Append-only.
type policyResult struct{ code byte }

const (
	policyOK       byte = 0 // done; DEL: the policy did not exist
	policyExisted  byte = 1 // DEL: removed
	policyTooMany  byte = 2 // SET, LOAD: over policy.MaxPolicies (nothing changed)
	policyDupNames byte = 3 // LOAD: a name twice (nothing changed)
)

func policyErr(code byte) error {
	switch code {
	case policyTooMany:
		return policy.ErrTooMany
	case policyDupNames:
		return policy.ErrDuplicate
	}
	return nil
}

// applyPolicyEntry applies a policy entry to the FSM's store. The store's
// refusals (too many policies) are results, the same on every replica.
func (f *fsm) applyPolicyEntry(e *entry.Decoded) *policyResult {
	switch e.Type {
	case entry.PolicySet:
		p, err := policy.Parse(e.Defs[0])
		if err != nil {
			panic(fmt.Sprintf("cluster: policy entry does not parse: %v", err))
		}
		if f.policies.Set(p) != nil {
			return &policyResult{policyTooMany}
		}
	case entry.PolicyDel:
		if f.policies.Del(e.Defs[0][0]) {
			return &policyResult{policyExisted}
		}
	case entry.PolicyReplace:
		ps, err := policy.ParseDefs(e.Defs)
		if err != nil {
			panic(fmt.Sprintf("cluster: policy entry does not parse: %v", err))
		}
		switch f.policies.Replace(ps) {
		case nil:
		case policy.ErrDuplicate:
			return &policyResult{policyDupNames}
		default:
			return &policyResult{policyTooMany}
		}
	}
	return &policyResult{policyOK}
}

// PolicyStore is the policies this replica has applied (RL.POLICY GET and
// LIST, INFO): reads are local, like a follower's view of the log.
func (n *Node) PolicyStore() *policy.Store { return n.fsm.policies }

// SetPolicy defines or redefines p, through the log.
func (n *Node) SetPolicy(ctx context.Context, p *policy.Policy) error {
	code, err := n.proposePolicy(ctx, entry.AppendPolicy(entry.PolicySet, [][]string{p.Words()}))
	if err != nil {
		return err
	}
	return policyErr(code)
}

// DelPolicy deletes a policy, through the log, and reports whether it
// existed.
func (n *Node) DelPolicy(ctx context.Context, name string) (bool, error) {
	code, err := n.proposePolicy(ctx, entry.AppendPolicy(entry.PolicyDel, [][]string{{name}}))
	return code == policyExisted, err
}

// ReplacePolicies makes ps the whole set, through the log.
func (n *Node) ReplacePolicies(ctx context.Context, ps []*policy.Policy) error {
	defs := make([][]string, len(ps))
	for i, p := range ps {
		defs[i] = p.Words()
	}
	code, err := n.proposePolicy(ctx, entry.AppendPolicy(entry.PolicyReplace, defs))
	if err != nil {
		return err
	}
	return policyErr(code)
}

// proposePolicy applies a policy entry (body: type and payload) on the
// leader, or forwards it, retrying while it is certainly not appended.
func (n *Node) proposePolicy(ctx context.Context, body []byte) (byte, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return n.applyPolicy(ctx, body, false)
}

func (n *Node) applyPolicy(ctx context.Context, body []byte, localOnly bool) (byte, error) {
	return applyOp(ctx, n, logOp[byte]{
		encode: func(now time.Time) []byte {
			buf := entry.AppendHeader(make([]byte, 0, 12+len(body)), body[0], now.UnixNano())
			return append(buf, body[1:]...)
		},
		leader: func(resp any) (byte, error) {
			pr, ok := resp.(*policyResult)
			if !ok {
				return 0, ErrUnknownOutcome
			}
			return pr.code, nil
		},
		msg:  msgPolicy,
		body: body,
		forwarded: func(reply []byte) (byte, error) {
			if len(reply) != 1 {
				return 0, ErrUnknownOutcome
			}
			return reply[0], nil
		},
	}, localOnly)
}
