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
//
// A batch may hold all-or-nothing groups of requests (Request.Tiers),
// atomic across shards, and requests made from runtime policies
// (Request.Scaled), whose state follows a limit changed at run time.
// DESIGN.md gives the rules for both.
package engine

import (
	"bytes"
	"context"
	"slices"
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
	idx    [][]int32
	groups []bool // groups[si]: idx[si] lists a group
	done   chan struct{}

	// For groups that span shards (cross): a parked shard signals parked,
	// then takes one token from release. of and held are scratch.
	parked  chan struct{}
	release chan struct{}
	park    func(*shard)
	of      []int32
	held    []int32
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
		b := &batch{
			idx:     make([][]int32, n),
			groups:  make([]bool, n),
			done:    make(chan struct{}, n),
			parked:  make(chan struct{}, 1),
			release: make(chan struct{}, n),
		}
		b.park = func(*shard) {
			b.parked <- struct{}{}
			<-b.release
		}
		return b
	}
	return e
}

// Shards is the number of shards: ShardOf(key, e.Shards()) is the shard
// that holds key.
func (e *Engine) Shards() int { return len(e.shards) }

// Close stops the shard goroutines. Calls after Close panic.
func (e *Engine) Close() {
	e.once.Do(func() {
		for _, s := range e.shards {
			close(s.ch)
		}
		e.wg.Wait()
	})
}

// ShardOf returns the shard index that owns key: FNV-1a 64, unseeded, so
// every process agrees. A key with a hash tag, as in Redis Cluster, is
// placed by its tag alone: when the key holds a '{' and, later, a '}' with
// at least one byte between them, only the bytes between the first '{' and
// the first '}' after it are hashed, so {user42}:login and {user42}:api
// share a shard (and tiered checks on them take the one-shard path).
func ShardOf(key []byte, n int) int {
	if o := bytes.IndexByte(key, '{'); o >= 0 {
		if c := bytes.IndexByte(key[o+1:], '}'); c > 0 {
			key = key[o+1 : o+1+c]
		}
	}
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
//
// An all-or-nothing group (Request.Tiers) whose keys all live on one shard
// travels in that shard's message like any request. A group that spans
// shards splits the batch: the requests before it are applied first (one
// message per shard, as above), then the group, then the rest, which may
// hold more such groups. For the group, and the groups that directly
// follow it (a pipeline of checks), Do takes exclusive hold of their
// shards in ascending shard order (each runs a job that parks it until
// released; two callers that both hold some shard and wait for another
// would need one of them to wait for a lower shard than one it holds,
// which ascending order rules out), decides and charges the groups in
// slice order on its own goroutine, then releases the shards. The channel
// hand-offs order the shard's accesses before and after the caller's, so
// there is no data race.
func (e *Engine) Do(ctx context.Context, nowNanos int64, reqs []Request, res []Result) error {
	if len(reqs) == 0 {
		return nil
	}
	res = res[:len(reqs)]
	b := e.pool.Get().(*batch)
	n := len(e.shards)
	var tiers uint16 // nonzero when reqs holds a group
	for i := range reqs {
		tiers |= reqs[i].Tiers
		si := 0
		if n > 1 {
			si = ShardOf(reqs[i].Key, n)
		}
		b.idx[si] = append(b.idx[si], int32(i))
	}
	at := len(reqs)
	if tiers != 0 {
		b.reset()
		at = e.split(b, reqs, 0)
	}
	// ctx is honoured only before anything is enqueued: once one shard has
	// the batch, every shard gets its part and Do waits for all of them, so
	// a batch is applied whole or not at all, and the shards never touch
	// reqs or res after Do returns.
	if err := ctx.Err(); err != nil {
		e.pool.Put(b.reset())
		return err
	}
	for {
		e.send(b, nowNanos, reqs, res)
		if at == len(reqs) {
			break
		}
		end := groupRun(reqs, at)
		e.cross(b, nowNanos, reqs[at:end], res[at:end])
		at = e.split(b, reqs, end)
	}
	e.pool.Put(b)
	return nil
}

// split adds reqs[from:] to b's per-shard lists (empty on entry), up to
// the first group that spans shards, and returns that group's index
// (len(reqs) when there is none). A group on one shard is listed as ^i (i
// its first request's index), and its shard's job is marked: the shard
// applies the whole group when it reaches it. Do lists batches without
// groups itself, in one pass whose only cost for groups is a load and an OR
// per request (tiers, to see whether the batch holds one).
func (e *Engine) split(b *batch, reqs []Request, from int) int {
	n := len(e.shards)
	for i := from; i < len(reqs); i++ {
		si := 0
		if n > 1 {
			si = ShardOf(reqs[i].Key, n)
		}
		if reqs[i].Tiers != 0 {
			end := groupEnd(reqs, i)
			if n > 1 {
				for j := i + 1; j < end; j++ {
					if ShardOf(reqs[j].Key, n) != si {
						return i
					}
				}
				if reqs[i].Op == OpCmd && !onOneShard(&reqs[i], si, n) {
					return i
				}
			}
			b.idx[si] = append(b.idx[si], ^int32(i))
			b.groups[si] = true
			i = end - 1
			continue
		}
		b.idx[si] = append(b.idx[si], int32(i))
	}
	return len(reqs)
}

// send gives each shard its listed requests, waits for all of them and
// empties the lists.
func (e *Engine) send(b *batch, nowNanos int64, reqs []Request, res []Result) {
	sent := 0
	for si, idx := range b.idx {
		if len(idx) == 0 {
			continue
		}
		e.shards[si].ch <- job{now: nowNanos, reqs: reqs, res: res, idx: idx, groups: b.groups[si], done: b.done}
		sent++
	}
	for range sent {
		<-b.done
	}
	b.reset()
}

// groupEnd is the index after the group that starts at i. A Tiers count
// that overruns the slice (which ValidateBatch refuses) ends at its end.
func groupEnd(reqs []Request, i int) int {
	return min(i+int(reqs[i].Tiers), len(reqs))
}

// cross applies reqs, a run of consecutive groups the first of which
// spans shards, holding the shards of all of them for the whole run (see
// Do). b's lists are empty and its channels drained.
func (e *Engine) cross(b *batch, nowNanos int64, reqs []Request, res []Result) {
	n := len(e.shards)
	of := b.of[:0] // the shard of each request
	for k := range reqs {
		of = append(of, int32(ShardOf(reqs[k].Key, n)))
	}
	held := append(b.held[:0], of...)
	for k := range reqs {
		if reqs[k].Op == OpCmd {
			held = cmdShards(held, &reqs[k], n)
		}
	}
	slices.Sort(held)
	held = slices.Compact(held)
	b.of, b.held = of, held // keep the grown buffers

	for _, si := range held {
		e.shards[si].ch <- job{fn: b.park, done: b.done}
		<-b.parked
	}
	now := nowNanos
	for _, si := range held {
		e.shards[si].advance(nowNanos)
		now = max(now, e.shards[si].now)
	}
	for g := 0; g < len(reqs); {
		end := groupEnd(reqs, g)
		if reqs[g].Op == OpCmd {
			// A data command over several shards sees them all, at the
			// latest of their times (each shard's never runs backwards).
			for _, si := range held {
				e.shards[si].advance(now)
			}
			v := &crossView{e: e, now: now, first: e.shards[held[0]]}
			res[g] = Result{Reply: string(reqs[g].Cmd.Exec(v, nil))} // rare: no arena
			g = end
			continue
		}
		decideGroup(reqs[g:end], res[g:end], func(k int) *shard { return e.shards[of[g+k]] })
		g = end
	}
	for range held {
		b.release <- struct{}{}
	}
	// The shards publish their dirty counts when the job ends: wait, so
	// that Changes counts the run once Do returns.
	for range held {
		<-b.done
	}
}

// groupRun is the index after the run of consecutive groups that starts
// with the group at i: a pipeline of tiered checks is decided under one
// hold of its shards instead of one per check.
func groupRun(reqs []Request, i int) int {
	for i < len(reqs) && reqs[i].Tiers != 0 {
		i = groupEnd(reqs, i)
	}
	return i
}

// decideGroup applies the all-or-nothing group reqs, writing res (see
// Request.Tiers). at(k) is the shard that owns reqs[k].Key, advanced to
// now, which the caller has to itself until decideGroup returns.
func decideGroup(reqs []Request, res []Result, at func(k int) *shard) {
	if reqs[0].Op == OpCmd && len(reqs) == 1 {
		at(0).apply(&reqs[0], &res[0]) // a data command whose keys share a shard
		return
	}
	if err := groupError(reqs); err != nil {
		for k := range reqs {
			res[k] = Result{Err: err}
		}
		return
	}
	if len(reqs) == 1 {
		// The same as evaluating read-only, then charging if allowed.
		at(0).apply(&reqs[0], &res[0])
		return
	}
	allowed, failed := true, false
	for k := range reqs {
		s := at(k)
		// The read-only copy lives in the shard: a local would escape
		// (apply's decision functions are called through a func value).
		ro := &s.scratch
		*ro = reqs[k]
		ro.ReadOnly = true
		s.apply(ro, &res[k])
		*ro = Request{} // drop the key: the shard must not pin the caller's buffer
		switch {
		case res[k].Err != nil:
			failed = true
		case !res[k].Allowed:
			allowed = false
		}
	}
	if failed {
		for k := range res[:len(reqs)] {
			if res[k].Err == nil {
				res[k] = Result{Err: ErrGroupAborted}
			}
		}
		return
	}
	if !allowed {
		// Nothing is charged; scaled states met with new parameters keep
		// their rescaled form, as a denied request's would (scaled.go).
		for k := range reqs {
			at(k).rescaleOnly(&reqs[k])
		}
		return
	}
	// Every tier allowed its read-only evaluation at this now, and no two
	// tiers share a key, so each charge sees the state it was evaluated
	// on and allows again, with the same Result.
	for k := range reqs {
		at(k).apply(&reqs[k], &res[k])
	}
}

// groupError reports why Do cannot apply a group that ValidateBatch would
// refuse (a tier that is not a decision, a key twice), or nil.
func groupError(reqs []Request) error {
	for k := range reqs {
		if !isDecision(reqs[k].Op) {
			return ErrBadRequest
		}
	}
	if hasDuplicateKey(reqs) {
		return ErrDuplicateTier
	}
	return nil
}

func (b *batch) reset() *batch {
	for si := range b.idx {
		b.idx[si] = b.idx[si][:0]
		b.groups[si] = false
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

// CmdWrites counts the data commands that changed a key since New (on
// this replica: in a cluster, those every replica applies from the log).
// Limiter decisions do not count. A parked blocking client retries when
// it moves.
func (e *Engine) CmdWrites() uint64 {
	var n uint64
	for _, s := range e.shards {
		n += s.cmdWrites.Load()
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

// SweepRounds is the most sweeps SweepWave runs in a row.
const SweepRounds = 100

// SweepWave sweeps (Sweep) again at once while more than a quarter of the
// keys examined had expired, at most SweepRounds times, as Redis's active
// expiry does: an expiry wave is reclaimed quickly without long stalls.
// now gives each sweep's time in nanoseconds (the engine reads no clock);
// SweepWave returns the keys dropped and stops at the first error.
func (e *Engine) SweepWave(ctx context.Context, now func() int64, budget int) (dropped int) {
	for range SweepRounds {
		ex, dr, err := e.Sweep(ctx, now(), budget)
		dropped += dr
		if err != nil || dr*4 <= ex {
			break
		}
	}
	return dropped
}
