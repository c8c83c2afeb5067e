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
	// in Result.Value (-2 when the key is missing, -1 for a data key
	// without a TTL) and its kind in Result.Kind.
	OpTTL Op = 4
	// OpFixed is a fixed window decision (RL.FIXED).
	OpFixed Op = 5
	// OpSliding is a sliding window counter decision (RL.SLIDING).
	OpSliding Op = 6
	// OpLog is a sliding window log decision (RL.LOG).
	OpLog Op = 7
	// OpShape is a leaky bucket queue decision (RL.SHAPE).
	OpShape Op = 8
)

// Kind is the kind of state a key holds. A key holds exactly one kind.
// Values are append-only: they appear in snapshots.
type Kind uint8

// Kinds of state.
const (
	KindNone    Kind = 0
	KindGCRA    Kind = 1 // token bucket: RL.ALLOW, RL.PEEK, CL.THROTTLE, GCRA
	KindFixed   Kind = 2 // RL.FIXED
	KindSliding Kind = 3 // RL.SLIDING
	KindLog     Kind = 4 // RL.LOG
	KindShape   Kind = 5 // RL.SHAPE

	// Kinds 6 and 7 never leave the package: they are the slot kinds of
	// GCRA and SHAPE state kept with the parameters it was last charged
	// under (Request.Scaled, scaled.go). Records, TYPE, OpTTL and
	// countKinds show them as KindGCRA and KindShape.
	kindGCRAScaled  Kind = 6
	kindShapeScaled Kind = 7
)

// String is the name TYPE replies with.
func (k Kind) String() string {
	switch k {
	case KindGCRA, kindGCRAScaled:
		return "rl-gcra"
	case KindFixed:
		return "rl-fixed"
	case KindSliding:
		return "rl-sliding"
	case KindLog:
		return "rl-log"
	case KindShape, kindShapeScaled:
		return "rl-shape"
	case KindString:
		return "string"
	case KindHash:
		return "hash"
	case KindZSet:
		return "zset"
	case KindList:
		return "list"
	case KindSet:
		return "set"
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

// MaxLimit is the largest limit RL.FIXED and RL.SLIDING accept (2^60), so
// that counts plus costs cannot overflow int64.
const MaxLimit = int64(1) << 60

// MaxLogLimit is the largest limit RL.LOG accepts. The log keeps one
// timestamp (8 bytes) per admitted unit of cost still inside the window, so
// a key never holds more than MaxLogLimit*8 bytes (800 KB) of log.
const MaxLogLimit = 100_000

// Sentinel errors. The server package maps them to wire text.
var (
	ErrWrongType     = errors.New("wrong kind of state for this key")
	ErrBadCapacity   = errors.New("capacity must be a positive integer")
	ErrBadRate       = errors.New("rate must be a positive finite number")
	ErrBadCost       = errors.New("cost must be a non-negative integer")
	ErrPeriodTooLong = errors.New("capacity divided by rate exceeds the longest supported period")
	ErrClosed        = errors.New("engine closed")

	ErrZeroRate  = errors.New("zero rates are not supported")
	ErrBadBurst  = errors.New("max burst must be a non-negative integer")
	ErrBadPeriod = errors.New("period must be a number of seconds above 0 and below 1e12")
	ErrBadTokens = errors.New("tokens must be a positive integer")

	// ErrGCRATokensOverflow and ErrGCRABurstOverflow are the GCRA
	// arguments Redis refuses because its microsecond arithmetic would
	// overflow int64 (GCRAAt).
	ErrGCRATokensOverflow = errors.New("period, tokens_per_period and tokens overflow microsecond time")
	ErrGCRABurstOverflow  = errors.New("period, tokens_per_period and max_burst overflow microsecond time")
	ErrBadLimit           = errors.New("limit must be a positive integer")
	ErrLimitTooLarge      = errors.New("limit exceeds the largest supported limit (2^60)")
	ErrLogLimitTooLarge   = errors.New("limit exceeds the sliding log maximum of 100000")
	ErrBadWindow          = errors.New("window must be a positive integer")
	ErrWindowTooLong      = errors.New("window exceeds the longest supported duration")
	ErrBadRecord          = errors.New("invalid state record")
	ErrBadRequest         = errors.New("request outside every constructor's bounds")

	// ErrGroupAborted is the Result.Err of the tiers of an all-or-nothing
	// group (Request.Tiers) that did not fail themselves while another
	// tier of the group did: nothing in the group was charged.
	ErrGroupAborted = errors.New("another tier of the group failed")
	// ErrDuplicateTier means a key appears twice in one all-or-nothing
	// group: its tiers would be charged one after the other, so the
	// group's decision could not hold for both.
	ErrDuplicateTier = errors.New("a key appears twice in one group")
)

// Request is one typed command for the engine. Requests are built by the
// constructors in this package (which validate them) and are plain values:
// Key may alias the caller's buffer and must stay valid until Do returns.
type Request struct {
	Op       Op
	ReadOnly bool // compute the decision, never write or create state

	// Tiers, on the first request of an all-or-nothing group, is the
	// number of requests in the group (>= 1), itself included; the
	// group's other requests follow it directly in the slice and have
	// Tiers 0. It is 0 on a plain request. Tiers may be of any decision
	// op (OpGCRA, OpFixed, OpSliding, OpLog, OpShape), mixed, on any
	// shards, and no key may appear twice in a group (ErrDuplicateTier).
	//
	// Every tier is first evaluated as if ReadOnly, at the same now. If
	// every tier allows (SHAPE: admits), every tier is then applied for
	// real and its Result is that of the applied call; otherwise nothing
	// is written and each tier's Result is its read-only evaluation
	// (Allowed false on the tiers that reject). If a tier fails
	// (ErrWrongType), nothing is written, that tier's Result.Err says
	// why and every other tier's Result is {Err: ErrGroupAborted}. The
	// group is atomic against every other request and group: no other
	// request on its keys takes effect between its evaluation and its
	// charge. Requests before it in the slice take effect before it,
	// requests after it after it.
	Tiers uint16

	// Scaled marks a request made from a policy whose limit may change
	// at run time (OpGCRA and OpShape; the window algorithms ignore it).
	// A Scaled request that writes stores the parameters (Interval,
	// Limit) with the state, and any request that later meets such a
	// state with other parameters first rescales it: the units in use
	// are kept (a token bucket's capped at the new capacity) and refill
	// at the new rate. The rules, per algorithm, are in DESIGN.md
	// (engine) and scaled.go.
	Scaled bool

	// Op, ReadOnly, Tiers and Scaled share the word before Key: a
	// Request is 80 bytes (TestRequestSize).

	Key      []byte // the key; any bytes
	Interval int64  // GCRA, SHAPE: emission interval T in ns (>= 1)
	Limit    int64  // GCRA: bucket capacity in tokens (tau = Limit*Interval); FIXED, SLIDING, LOG: most units per window; SHAPE: queue capacity in units
	Window   int64  // FIXED, SLIDING, LOG: window length in ns (>= 1)
	Cost     int64  // tokens (units) this call takes (>= 0)

	// Cmd is the data command of an OpCmd request (data.go), nil
	// otherwise.
	Cmd Command
}

// Result is the outcome of one Request. Durations are in nanoseconds;
// -1 means "never". Allowed/denied is a value, not an error.
type Result struct {
	Err        error // ErrWrongType; nil otherwise
	Allowed    bool
	Limit      int64  // the limit the decision was taken against
	Remaining  int64  // whole tokens (or requests) left after this call
	RetryAfter int64  // ns until the same call would be allowed; 0 when allowed, -1 never
	ResetAfter int64  // ns until the state is empty (bucket full) again
	Delay      int64  // SHAPE: ns the caller waits before proceeding when admitted; -1 when rejected
	Queued     int64  // SHAPE: units in the queue at now, this call's included when admitted (then <= capacity; a queue built under another rate or capacity can exceed it)
	Value      int64  // OpDel, OpExists, OpTTL: see the Op
	Kind       Kind   // OpTTL: the key's kind
	Reply      string // OpCmd: the command's reply, RESP (a string keeps Result comparable)
}
