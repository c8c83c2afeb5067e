package engine

import "errors"

// Op says what a Request does.
// Values are append-only and never renumbered: they appear in Raft log entries.
type Op uint8

// Operations.
const (
	// OpGCRA is a token bucket decision (RL.ALLOW, RL.PEEK, CL.THROTTLE, GCRA).
	OpGCRA Op = 1
	// OpDel removes the key of any kind; Result.Value is 1 if it existed.
	OpDel Op = 2
	// OpExists reports whether the key holds live state; Result.Value is 0 or 1.
	OpExists Op = 3
	// OpTTL reports the nanoseconds until the key's state is empty again
	// in Result.Value (-2 when the key is missing) and its kind in Result.Kind.
	OpTTL Op = 4
)

// Kind is the kind of state a key holds. A key holds exactly one kind.
// Values are append-only: they appear in snapshots.
type Kind uint8

// Kinds of state.
const (
	KindNone Kind = 0
	KindGCRA Kind = 1
)

// String is the name TYPE replies with.
func (k Kind) String() string {
	switch k {
	case KindGCRA:
		return "rl-gcra"
	default:
		return "none"
	}
}

// MaxDuration bounds every duration the engine multiplies or adds
// (tau, cost*interval, windows): 2^60 ns, about 36.5 years. With now below
// MaxNow, sums of a few such terms cannot overflow int64.
const MaxDuration = int64(1) << 60

// MaxNow is the largest time the engine accepts (2^62 ns, the year 2116).
const MaxNow = int64(1) << 62

// Sentinel errors. The resp package maps them to wire text.
var (
	ErrWrongType     = errors.New("wrong kind of state for this key")
	ErrBadCapacity   = errors.New("capacity must be a positive integer")
	ErrBadRate       = errors.New("rate must be a positive finite number")
	ErrBadCost       = errors.New("cost must be a non-negative integer")
	ErrPeriodTooLong = errors.New("capacity divided by rate exceeds the longest supported period")
	ErrClosed        = errors.New("engine closed")
)

// Request is one typed command for the engine. Requests are built by the
// constructors in this package (which validate them) and are plain values:
// Key may alias the caller's buffer and must stay valid until Do returns.
type Request struct {
	Op       Op
	ReadOnly bool   // compute the decision, never write or create state
	Key      []byte // the key; any bytes
	Interval int64  // GCRA: emission interval T in ns (>= 1)
	Limit    int64  // GCRA: bucket capacity in tokens (tau = Limit*Interval)
	Cost     int64  // tokens this call takes (>= 0)
}

// Result is the outcome of one Request. Durations are in nanoseconds;
// -1 means "never". Allowed/denied is a value, not an error.
type Result struct {
	Err        error // ErrWrongType; nil otherwise
	Allowed    bool
	Limit      int64 // the limit the decision was taken against
	Remaining  int64 // whole tokens (or requests) left after this call
	RetryAfter int64 // ns until the same call would be allowed; 0 when allowed, -1 never
	ResetAfter int64 // ns until the state is empty (bucket full) again
	Value      int64 // OpDel, OpExists, OpTTL: see the Op
	Kind       Kind  // OpTTL: the key's kind
}
