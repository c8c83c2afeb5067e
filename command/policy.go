package command

import (
	"context"

	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/policy"
)

// Named policies: RL.POLICY's commands and replies.

// writePolicy writes a policy's definition [name, KIND, params...].
func writePolicy(w *kv.Writer, p *policy.Policy) {
	words := p.Words()
	w.Array(len(words))
	for _, s := range words {
		w.BulkString(s)
	}
}

// RL.POLICY and RL.CHECK. LOAD, which reads the server's --policies
// file, is the edge's (Cmd.Edge).
func init() {
	write := []string{"@admin", "@write", "@slow", "@dangerous"}
	read := []string{"@read", "@slow", "@ratelimit"}
	policySub := func(name string, arity int, flags, acl []string, summary string, run func(*Call, Policies, [][]byte)) *Cmd {
		c := &Cmd{Name: "rl.policy|" + name, Arity: arity, Flags: flags, ACL: acl,
			Summary: summary, Group: "ratelimit", Since: "0.9.0"}
		if run != nil {
			c.Run = func(x *Call, args [][]byte) {
				pb := x.Env.policies()
				if pb == nil {
					x.fail(ErrNoPolicies)
					return
				}
				run(x, pb, args)
			}
		}
		return c
	}
	register(
		container("rl.policy", "A container for named rate-limit policies.", "ratelimit",
			policySub("set", -5, []string{"write", "admin"}, write,
				"Defines or redefines a policy: RL.POLICY SET name KIND params... (ALLOW capacity rate, THROTTLE max_burst count_per_period period, FIXED|SLIDING|LOG limit window_ms, SHAPE capacity rate).", policySet),
			policySub("get", 3, []string{"readonly"}, read,
				"Returns a policy's definition [name, KIND, params...], or null.", policyGet),
			policySub("del", 3, []string{"write", "admin"}, write,
				"Deletes a policy. Returns 1 if it existed, else 0.", policyDel),
			policySub("list", 2, []string{"readonly"}, read,
				"Returns every policy's definition, sorted by name.", policyList),
			policySub("load", 2, []string{"write", "admin"}, write,
				"Replaces the policies with the --policies file's (the file is taken whole or not at all).", nil),
		),
		&Cmd{
			Name: "rl.check", Arity: -3, Flags: []string{"write", "denyoom", "fast", "movablekeys"},
			FirstKey: 2, LastKey: -1, KeyStep: 2, MovableKeys: CheckKeys,
			ACL:     []string{"@write", "@fast", "@ratelimit"},
			Summary: "Checks a request against one or more policies, all-or-nothing: RL.CHECK [COST n] policy key [policy key ...]. Replies [allowed, deciding_tier, [policy, key, allowed, limit, remaining, retry_after_ms, reset_after_ms, delay_ms] per tier].",
			Group:   "ratelimit", Since: "0.9.0",
			Tiered: BatchCheck, RenderTiered: RenderCheck,
		},
	)
}

func policySet(x *Call, pb Policies, args [][]byte) {
	words := make([]string, len(args)-2)
	for i, a := range args[2:] {
		words[i] = string(a)
	}
	p, err := policy.Parse(words)
	if err == nil {
		err = pb.SetPolicy(context.Background(), p)
	}
	if err != nil {
		x.fail(PolicyErrorText(err))
		return
	}
	x.W.OK()
}

func policyGet(x *Call, pb Policies, args [][]byte) {
	p, ok := pb.PolicyStore().Get(args[2])
	if !ok {
		x.W.Nil()
		return
	}
	writePolicy(&x.W, p)
}

func policyDel(x *Call, pb Policies, args [][]byte) {
	if !policy.ValidName(args[2]) {
		x.W.Int(0) // no such policy can exist: nothing to replicate
		return
	}
	existed, err := pb.DelPolicy(context.Background(), string(args[2]))
	switch {
	case err != nil:
		x.fail(Text(err))
	case existed:
		x.W.Int(1)
	default:
		x.W.Int(0)
	}
}

func policyList(x *Call, pb Policies, _ [][]byte) {
	ps := pb.PolicyStore().List()
	x.W.Array(len(ps))
	for _, p := range ps {
		writePolicy(&x.W, p)
	}
}
