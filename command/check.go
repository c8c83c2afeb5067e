package command

import (
	"errors"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/policy"
)

// RL.CHECK: a request checked against one or more named policies, all or
// nothing. The edge batches its requests with their policy names; the
// backend resolves the names (DoPolicies).

// maxTiers bounds the tiers of one RL.CHECK.
const maxTiers = 64

// CheckKeys gives RL.CHECK's keys: every second argument after
// the policy name, which follows COST n when given.
func CheckKeys(args [][]byte) (first, last, step int) {
	first = 2
	if len(args) > 1 && EqualFold(args[1], "cost") {
		first = 4
	}
	return first, len(args) - 1, 2
}

// BatchCheck parses RL.CHECK [COST n] policy key [policy key ...] into one
// all-or-nothing group: a request per tier, carrying its key and the
// cost, the first one the group's size; the names go beside them.
func BatchCheck(reqs []engine.Request, names, args [][]byte) ([]engine.Request, [][]byte, string) {
	i, cost := 1, int64(1)
	if EqualFold(args[1], "cost") {
		if len(args) < 5 {
			return reqs, names, WrongArity("rl.check")
		}
		v, ok := ParseInt(args[2])
		if !ok {
			return reqs, names, ErrNotInteger
		}
		if v < 0 {
			return reqs, names, Text(engine.ErrBadCost)
		}
		i, cost = 3, v
	}
	rest := args[i:]
	if len(rest)%2 != 0 {
		return reqs, names, ErrSyntax
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

// RenderCheck appends RL.CHECK's reply:
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
// It counts the decision per policy in store (nil: not counted): allowed for every tier of an allowed
// check, denied for each tier that rejected.
func RenderCheck(w *kv.Writer, reqs []engine.Request, names [][]byte, res []engine.Result, store *policy.Store) (allowed, denied int64, deniedKey []byte, errText string) {
	for i := range res {
		if errors.Is(res[i].Err, policy.ErrUnknown) {
			return 0, 0, nil, unknownPolicy(names[i])
		}
	}
	for i := range res {
		if err := res[i].Err; err != nil && !errors.Is(err, engine.ErrGroupAborted) {
			return 0, 0, nil, Text(err)
		}
	}
	for i := range res {
		if res[i].Err != nil {
			return 0, 0, nil, ErrInternal
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
	w.Array(2 + len(res))
	if ok {
		w.Int(1)
	} else {
		w.Int(0)
	}
	w.Int(int64(decider + 1))
	for i := range res {
		d := &res[i]
		w.Array(8)
		w.Bulk(names[i])
		w.Bulk(reqs[i].Key)
		tierAllowed := int64(0)
		if d.Allowed {
			tierAllowed = 1
		}
		w.Int(tierAllowed)
		w.Int(d.Limit)
		w.Int(d.Remaining)
		retry := ceilDiv(d.RetryAfter, msNanos)
		if d.Allowed {
			retry = 0
		}
		w.Int(retry)
		w.Int(ceilDiv(d.ResetAfter, msNanos))
		delay := int64(0)
		if ok && d.Delay > 0 {
			delay = ceilDiv(d.Delay, msNanos)
		}
		w.Int(delay)
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
		return 1, 0, nil, ""
	}
	return 0, 1, reqs[decider].Key, ""
}
