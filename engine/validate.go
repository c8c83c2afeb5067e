package engine

// Validate reports whether r is a request one of this package's
// constructors could have built (their documented bounds). The engine
// trusts its requests: a request that no constructor builds (a zero
// interval or window, an unknown op) could divide by zero or corrupt state
// on every replica. Requests that arrive from outside the process, such as
// a batch forwarded to a Raft leader, must pass Validate first.
func Validate(r *Request) error {
	switch r.Op {
	case OpDel, OpExists, OpTTL:
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
