package cluster

import (
	"sync"

	"github.com/rlserver/rlserver/engine"
)

// arrayPool keeps arrays of T for reuse on the hot paths of group commit
// (results, encoded requests, decoded requests): under load each entry
// would otherwise allocate them afresh, and the collector would scan them.
type arrayPool[T any] struct {
	p   sync.Pool // of *[]T
	max int       // arrays with a larger capacity are not kept
}

// get returns n zero values, in a pooled array when one is large enough.
func (ap *arrayPool[T]) get(n int) []T {
	if p, _ := ap.p.Get().(*[]T); p != nil && cap(*p) >= n {
		s := (*p)[:n]
		clear(s)
		return s
	}
	return make([]T, n)
}

// put keeps s's array for a later get; nothing may use s afterwards.
func (ap *arrayPool[T]) put(s []T) {
	if cap(s) <= ap.max {
		s = s[:0]
		ap.p.Put(&s)
	}
}

var (
	resultPool  = arrayPool[engine.Result]{max: maxCallReqs}  // an entry's results (batch.go)
	chunkPool   = arrayPool[byte]{max: maxCallBytes}          // DoPolicies' encoded requests (batch.go)
	requestPool = arrayPool[engine.Request]{max: maxCallReqs} // validBatch's decoded requests (batch.go)
)
