// Package memlimit enforces maxmemory: the memory limit, its eviction
// policy, and the controller that measures used memory and acts on the
// backend that owns the data.
//
// Used memory is the Go heap's live objects as of the last collection
// (runtime/metrics /gc/heap/live:bytes: connection buffers, the per-kind
// state of window and log keys, snapshots being written...) plus what the
// engine charges for its stored keys (engine.Usage.Charged: 32 bytes of
// slot per key plus its bytes, whose tables live outside the Go heap).
// Both parts move only when data is added or removed, not with the
// garbage waiting for the collector, so the limit does not flap, and
// deleting or evicting a key makes room at once, as in Redis.
//
// The engine never measures memory: replicas must agree. The controller
// measures it every Interval and, through the backend, turns the
// engine's no-create mode on while used memory is above the limit
// (NoEviction), or evicts the keys closest to being empty (VolatileTTL:
// for a token bucket, the one closest to full) until it is below. In a
// cluster only the leader's controller acts, and both decisions go
// through the Raft log.
package memlimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// Backend is what the controller needs from the owner of the data: the
// standalone backend implements it with the engine, a cluster node
// through the log.
type Backend interface {
	// Usage reads this replica's stored keys and table memory (O(shards)).
	Usage(ctx context.Context) (engine.Usage, error)
	// MemoryLeader reports whether this process decides for the data:
	// always standalone, on the leader in a cluster.
	MemoryLeader() bool
	// SetNoCreate turns the refusal of new keys on or off.
	SetNoCreate(ctx context.Context, on bool) error
	// Evict runs one round of eviction and returns the keys removed.
	Evict(ctx context.Context, r engine.EvictRange) (int, error)
}

// EvictionPolicy is what the controller does above the limit, by Redis's
// maxmemory-policy names.
type EvictionPolicy string

// The eviction policies.
const (
	// NoEviction refuses new keys while used memory is above the limit.
	NoEviction EvictionPolicy = "noeviction"
	// VolatileTTL evicts the keys closest to being empty until used
	// memory is below the limit.
	VolatileTTL EvictionPolicy = "volatile-ttl"
	// AllKeysLRU evicts the data keys used least recently first, whatever
	// their TTL, then the limiter keys closest to being empty.
	AllKeysLRU EvictionPolicy = "allkeys-lru"
)

// Interval is how often Run checks used memory against the limit.
const Interval = 100 * time.Millisecond

// evictSamples is how many sampled keys each eviction picks its victim
// from, as Redis's maxmemory-samples (default 5).
const evictSamples = 5

// maxEvictRound bounds the keys one eviction round removes, so a round
// reads at most about evictSamples*maxEvictRound keys per table (a
// millisecond or two of a shard's time); a check runs up to 16 rounds.
const maxEvictRound = 4096

// gcRefresh is the shortest time between two collections the controller
// forces to refresh the live heap figure, which otherwise dates from the
// last collection: on an idle server, possibly from the middle of a
// snapshot save whose copy is long gone.
const gcRefresh = time.Second

// Controller holds the limit and its policy and enforces them on a
// Backend. Its methods are safe for concurrent use.
type Controller struct {
	b        Backend
	limit    atomic.Int64 // bytes; 0: no limit
	policy   atomic.Pointer[EvictionPolicy]
	noCreate atomic.Bool // the last mode this controller set

	// heapLive, gc and now are the runtime's (tests replace them).
	heapLive func() int64
	gc       func()
	now      func() time.Time

	mu     sync.Mutex // one round at a time
	cursor uint64     // where the next eviction range starts
	lastGC time.Time  // the last forced collection
}

// New returns a controller of b with no limit and NoEviction.
func New(b Backend) *Controller {
	return &Controller{b: b, heapLive: HeapLive, gc: runtime.GC, now: time.Now}
}

// ParseMemory parses a byte count with Redis's units: a plain number of
// bytes, or one followed by k, kb, m, mb, g, gb (any case; k = 1000,
// kb = 1024, and so on).
func ParseMemory(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	units := []struct {
		suffix string
		mul    int64
	}{{"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1000}, {"m", 1000 * 1000}, {"g", 1000 * 1000 * 1000}, {"b", 1}}
	mul := int64(1)
	for _, u := range units {
		if strings.HasSuffix(t, u.suffix) {
			t, mul = strings.TrimSuffix(t, u.suffix), u.mul
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 || n > math.MaxInt64/mul {
		return 0, fmt.Errorf("argument must be a memory value")
	}
	return n * mul, nil
}

// Set sets the limit (bytes, 0: none) and the policy.
func (c *Controller) Set(limit int64, p EvictionPolicy) error {
	if limit < 0 {
		return errors.New("maxmemory must not be negative")
	}
	switch p {
	case NoEviction, VolatileTTL, AllKeysLRU:
	default:
		return fmt.Errorf("maxmemory-policy %q is not supported: use %s, %s or %s", p, NoEviction, VolatileTTL, AllKeysLRU)
	}
	c.limit.Store(limit)
	c.policy.Store(&p)
	return nil
}

// Limit reports the limit in bytes (0: none) and the policy.
func (c *Controller) Limit() (int64, EvictionPolicy) {
	return c.limit.Load(), c.evictionPolicy()
}

func (c *Controller) evictionPolicy() EvictionPolicy {
	if p := c.policy.Load(); p != nil {
		return *p
	}
	return NoEviction
}

// RefusingNewKeys reports whether this controller last turned the refusal
// of new keys on.
func (c *Controller) RefusingNewKeys() bool { return c.noCreate.Load() }

// HeapLive reads the Go heap's live bytes as of the last collection.
func HeapLive() int64 {
	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// Used reports used memory as the limit counts it (see the package
// comment) and the engine usage it read; on error, used is the heap alone.
func (c *Controller) Used(ctx context.Context) (used int64, u engine.Usage, err error) {
	used = c.heapLive()
	if u, err = c.b.Usage(ctx); err != nil {
		return used, u, err
	}
	return used + u.Charged, u, nil
}

// Run enforces the limit until ctx ends: every Interval it compares used
// memory with the limit and acts (see the package comment).
func (c *Controller) Run(ctx context.Context) {
	t := time.NewTicker(Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.Enforce(ctx)
	}
}

// Enforce runs one round: on the leader, evict (VolatileTTL) while above
// the limit, then refuse new keys while still above it; elsewhere, forget
// the mode it set (a new leader decides afresh).
func (c *Controller) Enforce(ctx context.Context) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.b.MemoryLeader() {
		c.noCreate.Store(false)
		return
	}
	limit := c.limit.Load()
	heap := c.heapLive()
	u, err := c.b.Usage(ctx)
	if err != nil {
		return
	}
	if limit > 0 && heap == 0 && c.lastGC.IsZero() {
		// No collection has run yet, so the live heap reads 0: collect
		// once to know it (a limit set right after start, as Redis's
		// test suite does, is enforced at once).
		c.gc()
		c.lastGC = c.now()
		heap = c.heapLive()
	}
	used := heap + u.Charged
	if limit > 0 && used > limit && c.now().Sub(c.lastGC) >= gcRefresh {
		c.gc()
		c.lastGC = c.now()
		heap = c.heapLive()
		used = heap + u.Charged
	}
	// Evicting keys shrinks only their charge: when the heap alone is
	// above the limit, eviction cannot help, and new keys are refused
	// instead.
	if p := c.evictionPolicy(); limit > 0 && used > limit && heap < limit && p != NoEviction {
		// Evict in rounds sized to the excess, each picking among
		// evictSamples times as many sampled keys, until below the
		// limit; a bounded number per check, so a flood of new keys
		// cannot hold the controller here.
		for round := 0; round < 16 && used > limit && u.Stored > 0; round++ {
			perKey := max(u.Charged/int64(u.Stored), 1)
			n := int((used-limit+perKey-1)/perKey) + 1
			n = min(n, max(u.Stored/8, 64), maxEvictRound)
			r := c.nextEvictRange(n, u.Stored)
			r.LRU = p == AllKeysLRU
			if _, err := c.b.Evict(ctx, r); err != nil {
				break
			}
			if u, err = c.b.Usage(ctx); err != nil {
				break
			}
			used = heap + u.Charged
		}
	}
	// NoEviction refuses new keys while above the limit; VolatileTTL
	// too when eviction could not get below it (nothing left to evict,
	// or keys created faster than this round evicted).
	want := limit > 0 && used > limit
	if want != c.noCreate.Load() || want {
		if err := c.b.SetNoCreate(ctx, want); err == nil {
			c.noCreate.Store(want)
		}
	}
}

// nextEvictRange returns the hash range of the next eviction round: wide
// enough to hold about evictSamples*n of the stored keys (hashes are
// uniform), starting where the last one ended. A range cut short by the
// end of the hash space evicts proportionally fewer keys (the next round
// starts again at 0), so every round picks among evictSamples times as
// many keys as it evicts.
func (c *Controller) nextEvictRange(n, stored int) engine.EvictRange {
	from := c.cursor
	frac := float64(evictSamples*n) / float64(max(stored, 1))
	to := uint64(math.MaxUint64)
	if frac < 1 {
		width := uint64(frac * (1 << 63) * 2)
		if w, carry := bits.Add64(from, width, 0); carry == 0 {
			to = w
		} else {
			cut := float64(to-from) / float64(width)
			n = max(1, int(float64(n)*cut))
		}
	}
	c.cursor = to + 1 // 0 after the end
	return engine.EvictRange{From: from, To: to, N: n}
}
