package status

// NumLatencyBuckets is the number of finite bounds of the latency
// histograms.
const NumLatencyBuckets = 23

// LatencyBuckets are the upper bounds, in seconds, of the latency
// histograms: 1 µs to ~4 s in powers of two (NumLatencyBuckets bounds,
// then +Inf).
var LatencyBuckets = func() []float64 {
	b := make([]float64, NumLatencyBuckets)
	for i := range b {
		b[i] = float64(int64(1000)<<i) / 1e9
	}
	return b
}()

// Histogram is a snapshot of a latency histogram: cumulative counts per
// bound of LatencyBuckets, the total count and the sum in seconds.
type Histogram struct {
	Cumulative []uint64 // len(LatencyBuckets)
	Count      uint64
	SumSeconds float64
}

// Command is one command's counters since start.
type Command struct {
	Name     string // lower case, "container|sub" for a subcommand
	Calls    int64  // executed, whatever the outcome
	Allowed  int64  // limiter decisions that allowed
	Denied   int64  // limiter decisions that denied
	Failed   int64  // executed and answered with an error
	Rejected int64  // refused before running (arity, auth, ACL, key length)
	Latency  Histogram
	Decides  bool // a limiter command: its replies are decisions, allowed or denied
}

// DefaultTopCount is how many keys RL.TOP lists without COUNT.
const DefaultTopCount = 10

// TopKey is one of the keys denied most in the recent past (RL.TOP): its
// recent denials, decayed with a one-minute half-life, and how much that
// may overestimate them.
type TopKey struct {
	Key    string
	Denied float64
	Error  float64
}
