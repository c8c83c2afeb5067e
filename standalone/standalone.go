// Package standalone is the backend of a server running alone: it reads
// the clock once per batch and applies the batch to the engine directly,
// keeps the named policies in memory, runs the background sweep of
// expired keys, and carries out the memory controller's decisions on the
// engine.
package standalone

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// Backend is the server.Backend of a server running alone.
type Backend struct {
	eng      *engine.Engine
	policies *policy.Store // nil: none kept

	expired atomic.Int64 // keys the sweep dropped
	evicted atomic.Int64 // keys Evict removed
}

// New returns the backend of eng with the named policies ps (RL.POLICY,
// RL.CHECK; nil: the server keeps none).
func New(eng *engine.Engine, ps *policy.Store) *Backend {
	return &Backend{eng: eng, policies: ps}
}

func nowNanos() int64 { return time.Now().UnixNano() }

// Do applies the batch at the current time.
func (b *Backend) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	return b.eng.Do(ctx, nowNanos(), reqs, res)
}

// Shards is the engine's shard count: a script whose keys lie on one
// shard runs on it (command.LiveEngine).
func (b *Backend) Shards() int { return b.eng.Shards() }

// Len counts live keys.
func (b *Backend) Len(ctx context.Context) (int, error) { return b.eng.Len(ctx, nowNanos()) }

// Flush removes every key.
func (b *Backend) Flush(ctx context.Context) error { return b.eng.Flush(ctx) }

// Sweep drops expired keys in the background until ctx ends: every
// interval it examines a bounded sample (budget) per shard, and keeps
// going at once while many had expired (engine.Engine.SweepWave), each
// sweep at the wall clock's time. ExpiredKeys counts the keys it drops.
func (b *Backend) Sweep(ctx context.Context, interval time.Duration, budget int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.expired.Add(int64(b.eng.SweepWave(ctx, nowNanos, budget)))
	}
}

// ExpiredKeys counts the keys Sweep dropped (INFO expired_keys).
func (b *Backend) ExpiredKeys() int64 { return b.expired.Load() }

// The memory controller's backend (memlimit.Backend): the engine directly.

// Usage reads the engine's stored keys and table memory.
func (b *Backend) Usage(ctx context.Context) (engine.Usage, error) { return b.eng.Usage(ctx) }

// CmdWrites counts the data writes applied (server.CmdWriter).
func (b *Backend) CmdWrites() uint64 { return b.eng.CmdWrites() }

// MemoryLeader is always true: a standalone server decides for itself.
func (b *Backend) MemoryLeader() bool { return true }

// SetNoCreate turns the engine's no-create mode on or off.
func (b *Backend) SetNoCreate(ctx context.Context, on bool) error {
	return b.eng.SetNoCreate(ctx, on)
}

// Evict runs one round of eviction at the current time.
func (b *Backend) Evict(ctx context.Context, r engine.EvictRange) (int, error) {
	n, err := b.eng.Evict(ctx, nowNanos(), r)
	if err == nil {
		b.evicted.Add(int64(n))
	}
	return n, err
}

// EvictedKeys counts the keys Evict removed (INFO evicted_keys).
func (b *Backend) EvictedKeys() int64 { return b.evicted.Load() }

// Policies: the store is changed directly, and DoPolicies resolves the
// names just before the engine applies the batch.

// PolicyStore is the server's policies (nil: none kept).
func (b *Backend) PolicyStore() *policy.Store { return b.policies }

// SetPolicy adds or replaces p.
func (b *Backend) SetPolicy(_ context.Context, p *policy.Policy) error { return b.policies.Set(p) }

// DelPolicy removes a policy.
func (b *Backend) DelPolicy(_ context.Context, name string) (bool, error) {
	return b.policies.Del(name), nil
}

// ReplacePolicies makes ps the whole set.
func (b *Backend) ReplacePolicies(_ context.Context, ps []*policy.Policy) error {
	return b.policies.Replace(ps)
}

// DoPolicies resolves the policy names at the current time and applies
// the batch.
func (b *Backend) DoPolicies(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	now := nowNanos()
	if b.policies.ResolveInPlace(reqs, names) {
		return b.eng.Do(ctx, now, reqs, res)
	}
	out, idx := b.policies.ResolveBatch(reqs, names, res)
	if idx == nil {
		return b.eng.Do(ctx, now, out, res)
	}
	tmp := make([]engine.Result, len(out))
	if err := b.eng.Do(ctx, now, out, tmp); err != nil {
		return err
	}
	for k, i := range idx {
		res[i] = tmp[k]
	}
	return nil
}

// Scan continues a walk of the keys from cursor (engine.Engine.Scan),
// calling fn with each live key and its kind; 0 when the walk is done.
func (b *Backend) Scan(ctx context.Context, cursor uint64, count int, fn func(key []byte, k engine.Kind)) (uint64, error) {
	next, _, err := b.eng.Scan(ctx, nowNanos(), cursor, count, fn)
	return next, err
}
