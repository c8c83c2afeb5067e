package engine

import "bytes"

// Validate reports whether r is a request one of this package's
// constructors could have built (their documented bounds). The engine
// trusts its requests: a request that no constructor builds (a zero
// interval or window, an unknown op) could divide by zero or corrupt state
// on every replica. Requests that arrive from outside the process, such as
// a batch forwarded to a Raft leader, must pass Validate first, and a
// batch that may hold all-or-nothing groups (Request.Tiers) ValidateBatch.
//
// Validate checks one request: a request with Tiers > 0 must be a decision
// op. Whether its group fits in the batch is ValidateBatch's to check.
// Scaled is accepted on every op (it only changes OpGCRA and OpShape).
func Validate(r *Request) error {
	switch r.Op {
	case OpDel, OpExists, OpTTL:
		if r.Tiers != 0 {
			return ErrBadRequest
		}
		return nil
	case OpCmd:
		if r.Cmd == nil || r.Tiers > 1 {
			return ErrBadRequest
		}
		return nil
	case OpGCRA, OpShape:
		if r.Interval < 1 || r.Limit < 1 || r.Limit > MaxDuration/r.Interval {
			return ErrBadRequest
		}
	case OpFixed, OpSliding, OpLog:
		maxLimit := MaxLimit
		if r.Op == OpLog {
			maxLimit = MaxLogLimit
		}
		if r.Limit < 1 || r.Limit > maxLimit || r.Window < 1 || r.Window > MaxDuration {
			return ErrBadRequest
		}
	default:
		return ErrBadRequest
	}
	if r.Cost < 0 {
		return ErrBadRequest
	}
	return nil
}

// ValidateBatch is Validate for every request of reqs, plus the group
// structure: a request with Tiers = n > 0 starts a group of n requests,
// which must all be in reqs (ErrBadRequest) and hold distinct keys
// (ErrDuplicateTier); the other n-1 must have Tiers 0 (ErrBadRequest).
// It never panics, whatever reqs holds, so it can check decoded Raft
// entries and forwarded batches.
func ValidateBatch(reqs []Request) error {
	for i := 0; i < len(reqs); {
		if err := Validate(&reqs[i]); err != nil {
			return err
		}
		n := int(reqs[i].Tiers)
		if n <= 1 {
			i++
			continue
		}
		if n > len(reqs)-i {
			return ErrBadRequest
		}
		g := reqs[i : i+n]
		for j := 1; j < n; j++ {
			if g[j].Tiers != 0 || !isDecision(g[j].Op) {
				return ErrBadRequest
			}
			if err := Validate(&g[j]); err != nil {
				return err
			}
		}
		if hasDuplicateKey(g) {
			return ErrDuplicateTier
		}
		i += n
	}
	return nil
}

// hasDuplicateKey reports whether two requests of g share a key. Groups
// are small (a few tiers), so pairs are compared directly up to 16; a map
// keeps larger ones linear.
func hasDuplicateKey(g []Request) bool {
	if len(g) <= 16 {
		for a := 1; a < len(g); a++ {
			for b := range a {
				if bytes.Equal(g[a].Key, g[b].Key) {
					return true
				}
			}
		}
		return false
	}
	seen := make(map[string]struct{}, len(g))
	for i := range g {
		if _, ok := seen[string(g[i].Key)]; ok {
			return true
		}
		seen[string(g[i].Key)] = struct{}{}
	}
	return false
}

// isDecision reports whether op decides against a limit (and so may be a
// tier of a group).
func isDecision(op Op) bool {
	switch op {
	case OpGCRA, OpFixed, OpSliding, OpLog, OpShape:
		return true
	}
	return false
}
