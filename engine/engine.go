// Package engine is the limiter state machine: the rate-limiting
// algorithms and the shards that hold their state.
//
// It is pure and deterministic: it never reads a clock (every call carries
// now in Unix nanoseconds), uses integer arithmetic only, and has no
// randomness that affects results. The same sequence of Do calls therefore
// produces the same replies and the same state on every replica.
//
// Keys are partitioned over N shards by a fixed, unseeded hash. Each shard
// is owned by one goroutine, so there are no locks on limiter state. A batch
// of requests (a pipeline, or a Raft log entry) is split by shard and each
// shard receives one message for the whole batch.
package engine

import (
	"context"
	"sync"
)

// Engine is a set of shards. Its methods are safe for concurrent use.
type Engine struct {
	shards []*shard
	pool   sync.Pool // *batch
	wg     sync.WaitGroup
	once   sync.Once
}

// batch holds the per-call scratch space of Do, reused across calls.
type batch struct {
	idx  [][]int32
	done chan struct{}
}

// New starts an engine with n shards (at least 1).
func New(n int) *Engine {
	n = max(n, 1)
	e := &Engine{shards: make([]*shard, n)}
	for i := range e.shards {
		e.shards[i] = newShard(1024)
		e.wg.Add(1)
		go func(s *shard) {
			defer e.wg.Done()
			s.run()
		}(e.shards[i])
	}
	e.pool.New = func() any {
		return &batch{idx: make([][]int32, n), done: make(chan struct{}, n)}
	}
	return e
}

// Close stops the shard goroutines. Calls after Close panic.
func (e *Engine) Close() {
	e.once.Do(func() {
		for _, s := range e.shards {
			close(s.ch)
		}
		e.wg.Wait()
	})
}

// Shards reports the number of shards.
func (e *Engine) Shards() int { return len(e.shards) }

// ShardOf returns the shard index that owns key: FNV-1a 64, unseeded, so
// every process agrees.
func ShardOf(key []byte, n int) int {
	h := uint64(14695981039346656037)
	for _, c := range key {
		h ^= uint64(c)
		h *= 1099511628211
	}
	return int(h % uint64(n))
}

// Do applies reqs at time nowNanos and writes one result per request into
// res (len(res) must be >= len(reqs)). Requests on the same key take effect
// in slice order. Each shard involved receives one message.
func (e *Engine) Do(ctx context.Context, nowNanos int64, reqs []Request, res []Result) error {
	if len(reqs) == 0 {
		return nil
	}
	res = res[:len(reqs)]
	b := e.pool.Get().(*batch)
	n := len(e.shards)
	for i := range reqs {
		si := 0
		if n > 1 {
			si = ShardOf(reqs[i].Key, n)
		}
		b.idx[si] = append(b.idx[si], int32(i))
	}
	// ctx is honoured only before anything is enqueued: once one shard has
	// the batch, every shard gets its part and Do waits for all of them, so
	// a batch is applied whole or not at all, and the shards never touch
	// reqs or res after Do returns.
	if err := ctx.Err(); err != nil {
		e.pool.Put(b.reset())
		return err
	}
	sent := 0
	for si, idx := range b.idx {
		if len(idx) == 0 {
			continue
		}
		e.shards[si].ch <- job{now: nowNanos, reqs: reqs, res: res, idx: idx, done: b.done}
		sent++
	}
	for range sent {
		<-b.done
	}
	e.pool.Put(b.reset())
	return nil
}

func (b *batch) reset() *batch {
	for si := range b.idx {
		b.idx[si] = b.idx[si][:0]
	}
	return b
}

// onEach runs fn on every shard's goroutine and waits for all of them.
// Like Do, it honours ctx only before it starts.
func (e *Engine) onEach(ctx context.Context, fn func(i int, s *shard)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{}, len(e.shards))
	for i, s := range e.shards {
		s.ch <- job{fn: func(s *shard) { fn(i, s) }, done: done}
	}
	for range e.shards {
		<-done
	}
	return nil
}

// Len counts the keys whose state is not empty at nowNanos (DBSIZE).
func (e *Engine) Len(ctx context.Context, nowNanos int64) (int, error) {
	counts := make([]int, len(e.shards))
	err := e.onEach(ctx, func(i int, s *shard) { counts[i] = s.live(nowNanos) })
	total := 0
	for _, c := range counts {
		total += c
	}
	return total, err
}

// Flush removes every key (FLUSHALL).
func (e *Engine) Flush(ctx context.Context) error {
	return e.onEach(ctx, func(_ int, s *shard) { s.flush() })
}

// Changes counts the writes to limiter state since New: decisions that
// stored state, deletions, flushes of a non-empty shard and imported
// records. Reads, denied or read-only decisions, and the dropping of
// expired state (which is invisible) do not count. A snapshot taken after
// Changes returned n reflects at least those n changes, so a saver that
// sees the same count again has nothing new to write. The count is
// published at the end of each shard job, so it is exact once the calls
// that made the changes have returned.
func (e *Engine) Changes() uint64 {
	var n uint64
	for _, s := range e.shards {
		n += s.changes.Load()
	}
	return n
}

// Sweep examines up to budget keys per shard and drops those whose state is
// empty again at nowNanos. It returns the totals examined and dropped, so a
// caller can sweep again at once when many keys were expired.
func (e *Engine) Sweep(ctx context.Context, nowNanos int64, budget int) (examined, dropped int, err error) {
	ex := make([]int, len(e.shards))
	dr := make([]int, len(e.shards))
	err = e.onEach(ctx, func(i int, s *shard) { ex[i], dr[i] = s.sweep(nowNanos, budget) })
	for i := range ex {
		examined += ex[i]
		dropped += dr[i]
	}
	return examined, dropped, err
}
